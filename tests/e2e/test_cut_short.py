"""Runs stopped in a later step, analysed as `evbench run` ends (issue 51, item 9.1): the last
step, cut short, carries `ran_s` and the others do not; every file of the analysis is written
all the same, for it and for the systems after it. Real processes on loopback."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from contract.documents import problems
from contract.summarydocs import SummaryDoc
from runtime.parquet import part_files
from runtime.procs import die_with_parent
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e

# A short first step, then a long one to stop in.
PACE = "200:2,300:60"


def _evbench(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "evbench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=die_with_parent,  # an interrupted pytest must not leave runs behind
    )


def _in_step_two(sent: Path) -> bool:
    """A part of sent/ holds a slot of step 2: the first step is over and recorded."""
    for path in part_files(sent):
        try:
            steps = pq.read_table(path, columns=["step"]).column("step")
        except OSError:
            continue  # a roll renamed it meanwhile
        if pc.any(pc.equal(steps, 2)).as_py():
            return True
    return False


def _analysed(sut_dir: Path) -> SummaryDoc:
    """The system's summary, its steps.csv as it says and its report, all written."""
    summary: SummaryDoc = json.loads((sut_dir / "analysis" / "summary.json").read_text())
    assert problems(summary, SummaryDoc) == []
    rows = list(csv.DictReader((sut_dir / "analysis" / "steps.csv").open()))
    assert [int(r["step"]) for r in rows] == [s["step"] for s in summary["steps"]]
    assert (sut_dir / "analysis" / "report.html").is_file()
    return summary


def test_ctrl_c_in_the_second_step_is_analysed_and_exits_130(tmp_path):
    proc = _evbench(
        "run", "--sut", "direct", "--pace", PACE, "--step-gap", "0.5",
        "--runs-dir", str(tmp_path), "--run-id", "cut",
    )  # fmt: skip
    sut_dir = tmp_path / "cut-200x2-300x60" / "direct"
    wait_until(lambda: _in_step_two(sut_dir / "sent"), 90, "a slot of step 2 on disk")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "ran_s" not in err, err
    summary = _analysed(sut_dir)
    first, second = summary["steps"]
    assert "ran_s" not in first and 0 < second["ran_s"] < 60, summary["steps"]
    rows = list(csv.DictReader((sut_dir / "analysis" / "steps.csv").open()))
    assert rows[0]["ran_s"] == "" and float(rows[1]["ran_s"]) == second["ran_s"]
    assert second["verdict"] != "breaks", second
    assert (sut_dir.parent / "index.html").is_file()


def test_a_sender_killed_in_its_second_step_leaves_the_next_system_analysed(tmp_path):
    """A killed sender fails its system and the campaign goes on: the analysis at the end
    covers both, the cut one first."""
    proc = _evbench(
        "run", "--sut", "direct", "--pace", "200:2,300:10", "--step-gap", "0.5",
        "--repeat", "2", "--runs-dir", str(tmp_path), "--run-id", "two",
    )  # fmt: skip
    run_dir = tmp_path / "two-200x2-300x10"
    first, second = run_dir / "direct.repeat-1", run_dir / "direct.repeat-2"
    wait_until(lambda: _in_step_two(first / "sent"), 90, "a slot of step 2 on disk")
    sender = next(
        c for c in psutil.Process(proc.pid).children() if "-m loadgen" in " ".join(c.cmdline())
    )
    sender.kill()  # by pid
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err  # an instrument failed in the first
    assert "Traceback" not in err, err
    cut = _analysed(first)
    assert cut["instrument_failures"] and "ran_s" in cut["steps"][-1], cut["steps"]
    whole = _analysed(second)
    assert whole["status"] == "completed" and whole["instrument_failures"] == []
    assert [s["target_rate_per_s"] for s in whole["steps"]] == [200, 300]
    assert (run_dir / "index.html").is_file()
