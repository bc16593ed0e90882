"""`evbench run --triggers 1,3` as a user runs it: each fan-out in turn under one run id, every
event delivered once per trigger at each, and the index's cost of the fan-out against N drawn
from each run's summary and its system's process samples. Real processes, Spark, Chromium."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.browser import console_errors, drawn, render

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.browser]


def test_a_brokers_triggers_run_in_turn_and_the_index_draws_their_cost(tmp_path):
    argv = [
        sys.executable, "-m", "evbench", "run", "--sut", "broker-imc", "--triggers", "1,3",
        "--pace", "100:3", "--grace", "3", "--runs-dir", str(tmp_path), "--run-id", "f",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "f-100x3"
    assert "[1/2] broker-imc.fanout-1" in done.stderr and "[2/2] broker-imc.fanout-3" in done.stderr
    for fanout in (1, 3):
        system = run_dir / f"broker-imc.fanout-{fanout}"
        run_doc = json.loads((system / "run.json").read_text())
        described = run_doc["sut_settings"].get("subscribers")
        assert (len(described) if described else 1) == fanout and (fanout > 1) == bool(described)
        summary = json.loads((system / "analysis" / "summary.json").read_text())
        assert summary["counts"]["lost"] == 0 and summary["counts"]["received"] == 300, summary
        delivered = [s["counts"]["delivered"] for s in summary.get("subscribers", [])]
        assert delivered == ([300] * 3 if fanout == 3 else []), delivered
    index = (run_dir / "index.html").read_text()
    assert "The cost of fan-out" in index
    # A row per N: the deliveries are N x the events, and the broker's own processes (its
    # filter) are costed; the instruments are not.
    rows = re.findall(r"<tr><td class='text'>broker-imc</td><td class='text'>(\d+)</td>"
                      r"<td class='text'>[^<]*</td><td class='text'>([\d,]+)</td>"
                      r"<td class='text'>([^<]*)</td></tr>", index)  # fmt: skip
    assert [(n, d) for n, d, _ in rows] == [("1", "300"), ("3", "900")], rows
    assert all("filter:" in processes and "receiver" not in processes for *_, processes in rows)
    assert "broker-imc (3 subscribers)" in index  # the verdict table tells the two apart
    dom, console = render(run_dir / "index.html", tmp_path)
    assert console_errors(console) == []
    assert drawn(dom, "fanout-cost")
