"""`--fault-exec` commands that detach, daemonise or flood (evbench issue 51, part 9): the
command is waited for itself, not for the end of its output; what it leaves in its process
group is killed at the end of the run and said, what escaped the group is said; its output is
kept as a bounded tail while it is read. Real shells and processes."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import tracemalloc
from pathlib import Path

import pytest

from evbench.faultexec import OUTPUT_CHARS
from evbench.faults import FaultInjector
from evbench.faultspec import parse_fault_exec
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e

NS_PER_S = 1_000_000_000
STEP = {"rate_per_s": 10, "duration_s": 5, "warmup": False, "start_offset_ns": 0}
STEPS = [{"number": 1, "first_seq": 0, **STEP}]
# A bound no test comes near: a command that only ends at it was waited for too long.
BOUND_S = 30.0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is killed, not yet reaped by whoever adopted it


def _injected(*commands: str) -> tuple[FaultInjector, list[str]]:
    lines: list[str] = []
    injector = FaultInjector(
        [parse_fault_exec(f"1@0s:{c}") for c in commands], lines.append, exec_timeout_s=BOUND_S
    )
    injector.arm(time.time_ns(), STEPS, None)  # type: ignore[arg-type]
    return injector, lines


def _ended(injector: FaultInjector) -> None:
    wait_until(lambda: all(d["back_ns"] for d in injector.docs), 10, "the commands to end")


def test_a_child_left_in_the_background_neither_holds_the_run_nor_outlives_it(tmp_path):
    pid_file = tmp_path / "child.pid"
    injector, lines = _injected(f"sleep 120 & echo $! > {pid_file}; echo started")
    try:
        _ended(injector)
        (doc,) = injector.docs
        # Done when the shell ended, though its child holds its output open (before: at the
        # bound, then said "killed").
        assert doc["back_ns"] - doc["at_ns"] < 5 * NS_PER_S, doc
        assert doc["exit_code"] == 0 and doc["error"] is None and doc["output"] == "started\n"
        child = int(pid_file.read_text())
        assert _alive(child)  # until the run ends: it may be what the fault is for
    finally:
        injector.stop()
    wait_until(lambda: not _alive(child), 5, "the command's child to be killed with the run")
    assert doc["left_killed"] == [child]
    said = f"1 process (pid {child} sleep) it left running killed at the end of the run"
    assert any(said in line for line in lines), lines


def test_a_daemon_that_left_the_group_is_said_at_the_end_of_the_run(tmp_path):
    pid_file = tmp_path / "daemon.pid"
    injector, lines = _injected(f"setsid sleep 120 & echo $! > {pid_file}")
    try:
        _ended(injector)
        (doc,) = injector.docs
        assert doc["back_ns"] - doc["at_ns"] < 5 * NS_PER_S, doc
        assert doc["exit_code"] == 0 and doc["error"] is None
        daemon = int(pid_file.read_text())
        injector.stop()
        assert doc["left_running"] == [daemon] and "left_killed" not in doc
        said = [line for line in lines if "outside its process group" in line]
        assert said and f"pid {daemon} sleep" in said[0] and "stop it yourself" in said[0]
        assert _alive(daemon)  # said, not killed: no group reaches it
    finally:
        with contextlib.suppress(ValueError, OSError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_flood_of_output_is_kept_as_its_end_only():
    size_bytes = 100_000_000
    tracemalloc.start()
    try:
        injector, _ = _injected(f"head -c {size_bytes} /dev/zero | tr '\\0' x; echo END")
        _ended(injector)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    injector.stop()
    (doc,) = injector.docs
    assert doc["exit_code"] == 0, doc["error"]
    assert doc["output"] == "x" * (OUTPUT_CHARS - 4) + "END\n"
    # Before, the whole output was held (and then decoded): over 100 MB at its peak.
    assert peak_bytes < 10_000_000, peak_bytes


def test_a_command_still_running_when_the_run_ends_is_killed_with_its_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    injector, lines = _injected(f"sleep 120 & echo $! > {pid_file}; sleep 120")
    wait_until(pid_file.exists, 10, "the command to start its child")
    wait_until(lambda: pid_file.read_text().strip(), 5, "the child's pid")
    injector.stop()
    (doc,) = injector.docs
    assert doc["error"] == "still running at the end of the run: killed"
    assert doc["exit_code"] is None and doc["back_ns"] - doc["at_ns"] < 10 * NS_PER_S
    wait_until(lambda: not _alive(int(pid_file.read_text())), 5, "its child to be killed")
    assert any("still running at the end of the run: killed" in line for line in lines)
