"""Sent records lost while `evbench run` runs (issue 51, items 9.2 and 9.5): a sender whose
writes fail is an instrument failure, said by the sender and recorded by the run; and the
deliveries of the events its records lack are this run's sends, not foreign ones. Real
processes on loopback; the sender's writes fail for real, with EFBIG, under a file-size limit
(the tests run as root, where a read-only mode would not stop a write)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from runtime.parquet import read_parts
from runtime.procs import die_with_parent

pytestmark = pytest.mark.e2e

# A second of 20 slots is a part of 3.8 KB, one of 400 of 12-14 KB (measured, no roll): the
# first step's parts fit under the limit, the second's never do, however often retried; the
# sender's own small files (its log, _sender-w0.json) still do, as on a disk nearly full.
LIMIT_BYTES = 8 * 1024
PACE = "20:2,400:2"

# Loaded by every Python process of the run (PYTHONPATH); it limits the sender's alone: evbench
# starts it as `python -m loadgen`. Python ignores SIGXFSZ, so a write past the limit fails
# with EFBIG instead of killing the process.
_SITECUSTOMIZE = f"""
import resource, sys
if sys.orig_argv[1:3] == ["-m", "loadgen"]:
    resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT_BYTES}, {LIMIT_BYTES}))
"""


def _limited_sender_env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "EVBENCH_RECORD_ROLL_S": "0"}


def test_a_sender_that_cannot_write_its_records_fails_the_run(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "evbench", "run", "--sut", "direct", "--pace", PACE,
         "--step-gap", "0.2", "--runs-dir", str(tmp_path), "--run-id", "full"],
        capture_output=True, text=True, timeout=300, preexec_fn=die_with_parent,
        env=_limited_sender_env(tmp_path),
    )  # fmt: skip
    err = done.stderr
    assert done.returncode == 1, err
    sut_dir = tmp_path / "full-20x2-400x2" / "direct"
    run = json.loads((sut_dir / "run.json").read_text())
    assert run["status"] == "failed", run
    (failure,) = run["instrument_failures"]
    sender = run["sender"]["summary"]
    assert sender["unwritten_rows"] > 0, sender
    assert sender["rows_written"] + sender["unwritten_rows"] == sender["sent"] == 840
    assert failure.startswith(f"sender could not write {sender['unwritten_rows']} of its sent ")
    assert "File too large" in failure
    assert f"instrument failed: {failure}" in err, err
    assert "sent records could not be written" in (sut_dir / "logs" / "sender.log").read_text()

    # Analysed as the run's failure, never a break of the system.
    summary = json.loads((sut_dir / "analysis" / "summary.json").read_text())
    assert summary["verdict"].startswith("instrument failed: sender could not write"), summary
    assert summary["breaking_point_per_s"] is None
    assert "breaks at" not in err
    sent_ids = {r["event_id"] for r in read_parts(sut_dir / "sent", SENT_FIELDS).to_pylist()}
    received = read_parts(sut_dir / "received", RECEIVED_FIELDS).column("event_id").to_pylist()
    assert len(sent_ids) == sender["rows_written"]
    unrecorded = set(received) - sent_ids
    assert len(unrecorded) > 0
    # Their deliveries are the run's own sends whose records were lost, not foreign ones.
    counts = summary["counts"]
    assert (counts["unrecorded_sends"], counts["foreign"]) == (len(unrecorded), 0), counts
    assert f"foreign 0, unrecorded sends {len(unrecorded)}" in err
