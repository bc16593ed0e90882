"""The session's teardown order (evbench.session's docstring), held with a system that starts
no process and children that only note being stopped: pure logic of the one teardown."""

from __future__ import annotations

import contextlib
import os

import pytest

from evbench import session as session_module
from evbench.options import RunOptions
from evbench.session import Session
from loadgen.pace import parse_pace
from loadgen.settings import SenderSettings
from suts.drivers import Direct
from suts.settings import LabSettings


class _Child:
    """A child process as the session sees one, noting when it is stopped."""

    def __init__(self, name: str, stopped: list[str]) -> None:
        self.name, self.stopped, self.pid = name, stopped, os.getpid()
        self.log_path = None

    def alive(self) -> bool:
        return True

    def stop(self, timeout_s: float = 15.0) -> int:
        self.stopped.append(self.name)
        return 0

    def final_report(self) -> None:
        return None

    def tail(self, lines: int = 15) -> str:
        return ""


def _system(stopped: list[str]):
    class Logged(Direct):
        def stop(self):
            stopped.append("system")
            return super().stop()

    return lambda name, settings, logs, run_id, host: Logged(LabSettings(), logs, run_id, host)


@pytest.mark.parametrize("fails", [False, True])
def test_teardown_stops_policy_senders_system_receiver_then_records(tmp_path, monkeypatch, fails):
    stopped: list[str] = []
    monkeypatch.setattr(
        session_module, "start_receiver", lambda *a, **k: (_Child("receiver", stopped), "http://x")
    )
    monkeypatch.setattr(SenderSettings, "start", lambda self, log, name: _Child(name, stopped))
    opts = RunOptions(pace=parse_pace("10:1", name="p"), runs_dir=tmp_path, run_id="t")
    session = Session.open(opts, "p", lambda line: None, _system(stopped))
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext(), session:
        session.on_record(lambda status: stopped.append(f"record {status}"))
        session.on_teardown(lambda: stopped.append("policy"))
        session.start_receiver()
        session.start_system()
        session.start_senders(session.sender_settings("10:1"))
        if fails:
            raise RuntimeError("the policy failed")
        session.finish("completed")
    assert stopped == ["policy", "sender", "system", "receiver", "record None"]
    # a failing policy leaves the outcome failed (the receiver without a final report fails
    # it too: an instrument failure, judged after the receiver stopped)
    assert session.outcome.status == "failed"
    assert session.outcome.reason == ("RuntimeError: the policy failed" if fails else None)
