"""SIGKILL mid-step, with records rolling: the receiver and the sender each lose at most about a
second of records and count none twice (issue 34, item 2). Real processes, real files; a
short roll interval ($EVBENCH_RECORD_ROLL_S) so that rolls happen while they run."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from contract.units import NS_PER_S
from loadgen.pace import Step
from loadgen.schedule import plan_steps, schedule
from loadgen.settings import SenderSettings, SendKnobs
from runtime.parquet import ROLL_ENV, part_files, read_parts
from tests.conftest import RunningReceiver, wait_until
from tests.receivers.rxproc import EVENT_HEADERS, receiver_process

pytestmark = pytest.mark.e2e

ROLL_S = "0.5"
# What a kill may lose: the rows of the flush interval (1 s) and of the write in flight.
LOSS_S = 1.5


class _Poster:
    """Events posted one after another until stopped; when each was answered 202."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answered: dict[str, float] = {}  # event id -> monotonic time of its 202
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._post, daemon=True)
        self.thread.start()

    def _post(self) -> None:
        with httpx.Client(timeout=2) as client:
            for number in range(10**9):
                if self.stop.is_set():
                    return
                event_id = f"k-{number}"
                headers = {**EVENT_HEADERS, "ce-id": event_id, "ce-evbenchid": event_id}
                try:
                    answer = client.post(self.url, content=b"{}", headers=headers)
                except httpx.HTTPError:
                    return  # the receiver is gone
                if answer.status_code == 202:
                    self.answered[event_id] = time.monotonic()


def test_a_receiver_killed_mid_step_keeps_all_but_its_last_second(tmp_path, monkeypatch):
    monkeypatch.setenv(ROLL_ENV, ROLL_S)
    out = tmp_path / "received"
    with receiver_process(out, tmp_path / "rx.log") as rx:
        poster = _Poster(rx.url)
        # Long enough for several rolls (and so for a kill to land amid one, sometimes).
        wait_until(lambda: rx.stats()["parts_written"] >= 5, 30, "five parts written")
        parts_written = rx.stats()["parts_written"]
        killed_at = time.monotonic()
        rx.child.signal(signal.SIGKILL)
        rx.child.wait(10)
        poster.stop.set()
        poster.thread.join(10)
    ids = read_parts(out, RECEIVED_FIELDS).column("event_id").to_pylist()
    assert len(ids) == len(set(ids)), "a delivery counted twice"
    assert set(ids) <= {f"k-{n}" for n in range(len(poster.answered) + 1)}
    before = {i for i, at in poster.answered.items() if at < killed_at - LOSS_S}
    assert len(before) > 100
    assert before <= set(ids), f"{len(before - set(ids))} answered events lost"
    files = part_files(out)
    assert any(p.name.endswith(".rolled.parquet") for p in files)
    assert len(files) < parts_written


def test_a_sender_killed_mid_step_keeps_all_but_its_last_second(
    tmp_path: Path, receiver: RunningReceiver, monkeypatch
):
    monkeypatch.setenv(ROLL_ENV, ROLL_S)
    rate, seconds = 400, 20
    settings = SenderSettings(
        target=receiver.url,
        pace=f"{rate}:{seconds}",
        out=tmp_path / "sent",
        knobs=SendKnobs(step_gap_s=0.2),
        start_delay_s=0.2,
    )
    child = settings.start(tmp_path / "sender.log")
    try:
        start_ns = child.wait_for("start", 30)["start_ns"]
        # Four seconds into the step: several parts, several rolls.
        wait_until(lambda: time.time_ns() > start_ns + 4 * NS_PER_S, 30, "four seconds sent")
        killed_ns = time.time_ns()
        child.signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.alive():
            child.stop()
    seqs = read_parts(tmp_path / "sent", SENT_FIELDS).column("seq").to_pylist()
    assert len(seqs) == len(set(seqs)), "a slot recorded twice"
    slots = schedule(plan_steps([Step(rate, seconds)], 0.2))
    due = {s.seq for s in slots if start_ns + s.offset_ns < killed_ns - LOSS_S * NS_PER_S}
    assert len(due) > 2 * rate
    assert due <= set(seqs), f"{len(due - set(seqs))} slots due before the last second lost"
    names = [p.name for p in part_files(tmp_path / "sent")]
    assert any(n.endswith(".rolled.parquet") for n in names), names


def test_a_normal_stop_leaves_rolled_files_and_nothing_hidden(
    tmp_path: Path, receiver: RunningReceiver, monkeypatch
):
    monkeypatch.delenv(ROLL_ENV, raising=False)  # the default: no roll falls due in 3 s
    settings = SenderSettings(
        target=receiver.url,
        pace="100:3",
        out=tmp_path / "sent",
        knobs=SendKnobs(step_gap_s=0.2),
        start_delay_s=0.2,
    )
    child = settings.start(tmp_path / "sender.log")
    assert child.wait_for("done", 60)["interrupted"] is False
    assert child.wait(10) == 0
    receiver.child.signal(signal.SIGINT)
    assert receiver.child.wait(30) == 0
    for directory, fields, count in (
        (tmp_path / "sent", SENT_FIELDS, 300),
        (receiver.out, RECEIVED_FIELDS, 300),
    ):
        names = sorted(p.name for p in directory.iterdir() if p.suffix != ".json")
        # Every part of the run rolled into one file at the stop, and the parts deleted.
        assert len(names) == 1 and names[0].endswith(".rolled.parquet"), names
        assert read_parts(directory, fields).num_rows == count
