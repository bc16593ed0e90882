"""`evbench run --workers N`: a Locust master and N worker processes on loopback, each running a
real sender on every Nth slot."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contract.documents import RunDoc, problems
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from loadgen.pace import parse_pace
from loadgen.schedule import plan_steps, schedule
from runtime.parquet import read_parts
from runtime.procs import die_with_parent
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e


def _evbench(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "evbench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=die_with_parent,
    )


def test_two_workers_send_the_pace_as_one_sender_would(tmp_path):
    pace = "200:2"
    proc = _evbench(
        "run", "--sut", "direct", "--pace", pace, "--workers", "2", "--step-gap", "0.5",
        "--runs-dir", str(tmp_path), "--run-id", "f", "--no-analyze",
    )  # fmt: skip
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    sut_dir = tmp_path / "f-200x2" / "direct"
    run = json.loads((sut_dir / "run.json").read_text())
    assert problems(run, RunDoc) == []
    assert run["status"] == "completed" and run["sender"]["workers"] == 2
    summary = run["sender"]["summary"]
    assert (summary["workers"], summary["sent"], summary["failed_workers"]) == (2, 400, {})
    assert sorted(run["clock"]["senders"]) == ["0", "1"]  # each worker measured its clock

    sent = read_parts(sut_dir / "sent", SENT_FIELDS).to_pylist()
    # Every slot of the one schedule, each sent by worker seq % 2 at its intended time.
    start_ns = run["schedule"]["start_ns"]
    planned = plan_steps(parse_pace(pace).steps, 0.5)
    expected = {(s.seq, s.seq % 2, start_ns + s.offset_ns) for s in schedule(planned)}
    assert {(r["seq"], r["worker"], r["intended_ns"]) for r in sent} == expected
    assert {r["status"] for r in sent} == {202}
    received = {
        r["event_id"] for r in read_parts(sut_dir / "received", RECEIVED_FIELDS).to_pylist()
    }
    assert received == {r["event_id"] for r in sent}

    # Locust's own statistics counted every answer, from the workers' latency counts.
    with open(sut_dir / "logs" / "locust_stats.csv", newline="") as f:
        rows = {row["Name"]: row for row in csv.DictReader(f)}
    assert int(rows["Aggregated"]["Request Count"]) == 400
    assert int(rows["Aggregated"]["Failure Count"]) == 0
    assert (sut_dir / "logs" / "locust.html").stat().st_size > 0


def _descendants(pid: int) -> dict[int, str]:
    """Every process below `pid`, with its command line (read from /proc, found by pid)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            try:
                found[child] = (
                    (Path("/proc") / str(child) / "cmdline").read_text().replace("\0", " ")
                )
            except OSError:
                continue
            todo.append(child)
    return found


def _sender_of_worker(run_pid: int, index: int) -> int | None:
    for pid, command in _descendants(run_pid).items():
        if " -m loadgen " in f"{command} " and f"--worker {index} " in f"{command} ":
            return pid
    return None


def test_a_worker_killed_mid_step_ends_the_run_marked_and_keeps_the_records(tmp_path):
    proc = _evbench(
        "run", "--sut", "direct", "--pace", "100:8", "--workers", "2",
        "--runs-dir", str(tmp_path), "--run-id", "k",
    )  # fmt: skip
    try:
        victim = wait_until(
            lambda: _sender_of_worker(proc.pid, 1), timeout_s=60, what="worker 1's sender"
        )
        sent_dir = tmp_path / "k-100x8" / "direct" / "sent"
        # Mid-step: once both workers' first records are on disk.
        wait_until(
            lambda: len(list(sent_dir.glob("sent-w*.parquet"))) >= 2,
            timeout_s=30,
            what="both workers' first records",
        )
        os.kill(victim, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)  # the run ends: nothing waits for the dead
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    sut_dir = tmp_path / "k-100x8" / "direct"
    run = json.loads((sut_dir / "run.json").read_text())
    assert run["status"] == "failed"
    (failure,) = run["instrument_failures"]
    assert failure.startswith("sender fleet lost 1 of 2 workers (worker 1: its sender exited (-9)")
    # Everything written so far was analysed: worker 0's whole share and worker 1's part.
    summary = json.loads((sut_dir / "analysis" / "summary.json").read_text())
    sent = read_parts(sut_dir / "sent", SENT_FIELDS).to_pylist()
    by_worker = {w: sum(r["worker"] == w for r in sent) for w in (0, 1)}
    assert by_worker[0] == 400 and 0 < by_worker[1] < 400
    assert summary["counts"]["scheduled"] == len(sent)
    assert summary["instrument_failures"] == [failure]  # no breaking point charged to the SUT
