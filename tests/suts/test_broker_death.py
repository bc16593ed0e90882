"""The lab's Kafka broker killed mid-run: named as the system's death with its time, judged by
it, and its client's retries said once instead of flooding the console (issue 33, item 4)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import psutil

from analysis.job import AnalyzeOptions, analyze
from evbench.options import RunOptions
from evbench.runner import run
from loadgen.pace import resolve_pace
from loadgen.settings import SendKnobs
from suts.lab import LabSettings
from tests.conftest import wait_until


def _pid_of_broker() -> int:
    for child in psutil.Process().children(recursive=True):
        if any("tansu" in part for part in child.cmdline()[:1]):
            return child.pid
    raise AssertionError("no tansu broker process found")


def test_a_killed_broker_is_a_death_not_a_completed_run(tmp_path: Path, spark, capfd) -> None:
    opts = RunOptions(
        pace=resolve_pace("100:5"),
        runs_dir=tmp_path / "runs",
        send=SendKnobs(step_gap_s=0.5),
        grace_s=2.0,
        lab=LabSettings(partitions=4),
        lag_interval_s=0.5,
        sut="channel-kafka",
        run_id="broker-death",
    )
    received = tmp_path / "runs" / "broker-death-100x5" / "channel-kafka" / "received"
    killed: list[int] = []

    def kill_broker_once_delivering() -> None:
        wait_until(lambda: any(received.glob("*.parquet")), 60, "first deliveries")
        pid = _pid_of_broker()
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_broker_once_delivering, daemon=True)
    killer.start()
    lines: list[str] = []
    outcome = run(opts, lines.append, live=False)
    killer.join(timeout=60)
    assert killed, "the broker was never killed"
    # Seen and named with its time, in the run's lines and in run.json.
    assert "kafka" in outcome.sut["died"]
    assert any(line.startswith("channel-kafka: kafka died at ") for line in lines), lines
    roles = [d["role"] for d in outcome.sut_deaths]
    assert "kafka" in roles
    # The lag sampler's client said the dead broker once, not once per retry (it retries
    # every second: 577 lines in the run).
    err = capfd.readouterr().err
    retries = [line for line in err.splitlines() if "Connect to" in line]
    assert len(retries) <= 2, retries[:5]
    (summary,) = analyze(spark, [outcome.sut_dir.root], AnalyzeOptions())
    assert summary["breaking_point_per_s"] is None
    assert "kafka died at" in summary["verdict"], summary["verdict"]
    assert all(s["verdict"] != "breaks" for s in summary["steps"])
