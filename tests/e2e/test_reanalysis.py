"""A run analysed again, as a user does it: `evbench run --slo`, then `evbench analyze` with
and without objectives of its own and with `--export-hdr`, each a real process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.documents import RunDoc, problems
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from runtime.parquet import read_parts
from tests.analysis.test_hdr import processor_count, read_back

pytestmark = pytest.mark.e2e

PACE = "300:2,600:1"  # 1,200 events
KEPT = "e2e-p99<=10s,lost<=10%"  # met on loopback by a wide margin


def _evbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evbench", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _summary(sut_dir):
    return json.loads((sut_dir / "analysis" / "summary.json").read_text())


def test_a_reanalysis_keeps_the_runs_objectives_and_exports_each_event_once(tmp_path):
    where = ["--runs-dir", str(tmp_path), "--run-id", "o"]
    ran = _evbench("run", "--sut", "direct", "--pace", PACE, *where, "--slo", KEPT)
    assert ran.returncode == 0, ran.stderr
    sut_dir = tmp_path / "o-300x2-600x1" / "direct"
    run = json.loads((sut_dir / "run.json").read_text())
    assert problems(run, RunDoc) == []
    assert run["objectives"] == KEPT.split(",")
    assert _summary(sut_dir)["objectives_from"] == "--slo"

    # Again, given no --slo: the run's own, said, and the HDR logs said where they went.
    again = _evbench("analyze", str(sut_dir), "--export-hdr")
    assert again.returncode == 0, again.stderr
    assert f"direct: objectives {KEPT} (from run.json, as the run was given them)" in again.stderr
    summary = _summary(sut_dir)
    assert summary["objectives_from"] == "run.json"
    assert [o["objective"] for o in summary["objectives"]] == KEPT.split(",")
    assert all(o["met"] for o in summary["objectives"]), summary["objectives"]
    assert "The run's own" in (sut_dir / "analysis" / "report.html").read_text()
    hdr = sut_dir / "analysis" / "hdr"
    assert f"  -> {hdr}/{{e2e,publish}}.hlog (the whole run)" in again.stderr
    assert f"  -> {hdr}/step-N/{{e2e,publish}}.hlog (steps 1-2)" in again.stderr

    # Each event once in each log, as the Python package and HdrHistogram's processor read it.
    sent = read_parts(sut_dir / "sent", SENT_FIELDS).to_pylist()
    acked = {r["event_id"] for r in sent if r["status"] == 202}
    ids = read_parts(sut_dir / "received", RECEIVED_FIELDS).column("event_id").to_pylist()
    events = {"publish": len(acked), "e2e": len(set(ids) & acked)}
    assert len(sent) == 1200 and events["e2e"] > 1000
    for metric, count in events.items():
        assert read_back(hdr / f"{metric}.hlog")[0].get_total_count() == count
        steps = [read_back(hdr / f"step-{n}" / f"{metric}.hlog")[0] for n in (1, 2)]
        assert sum(h.get_total_count() for h in steps) == count

    # New objectives replace the run's: this one cannot be met, so the analysis exits 3.
    judged = _evbench("analyze", str(sut_dir), "--slo", "e2e-p99<=0.001ms")
    assert judged.returncode == 3, judged.stderr
    assert "direct: objectives e2e-p99<=0.001ms (from --slo)" in judged.stderr
    summary = _summary(sut_dir)
    assert summary["objectives_from"] == "--slo"
    assert [o["objective"] for o in summary["objectives"]] == ["e2e-p99<=0.001ms"]
    assert "The run's own" not in (sut_dir / "analysis" / "report.html").read_text()
    assert json.loads((sut_dir / "run.json").read_text()) == run  # never edited

    # Last, as it skips where Debian's libhdrhistogram-java is not installed.
    assert processor_count(hdr / "e2e.hlog") == events["e2e"]
