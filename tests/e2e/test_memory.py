"""`evbench memory` as a user runs it: a short scenario on a real broker, a real consumer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evbench.shared.parquet import read_parts
from evbench.shared.records import CONSUMER_LAG_FIELDS, MEMORY_SAMPLE_FIELDS
from tests.browser import console_errors, drawn, render

pytestmark = pytest.mark.e2e


@pytest.mark.browser
@pytest.mark.spark  # the run ends by analysing
def test_a_short_scenario_records_series_figures_and_lag(tmp_path):
    done = subprocess.run(
        [
            sys.executable, "-m", "evbench", "memory", "--partitions", "2",
            "--consumers", "source,confluent", "--fill-events", "400", "--consume", "8",
            "--runs-dir", str(tmp_path), "--run-id", "m",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("source-p2", "confluent-p2"):
        scenario = tmp_path / "m-memory" / name
        result = json.loads((scenario / "scenario.json").read_text())
        assert result["produced"] == 400 == result["consumed"], name
        assert result["never_consumed"] == [] and result["first_message_s"] > 0, name
        figures = result["figures"]
        assert figures["peak_bytes"] >= figures["plateau_bytes"] > 0, name
        assert "fetch.max.bytes" in result["predicted_formula"], name  # both are librdkafka
        samples = read_parts(scenario / "samples" / "memory", MEMORY_SAMPLE_FIELDS).to_pylist()
        assert len(samples) >= 5 and all(s["rss_bytes"] > 0 for s in samples), name
        assert samples[-1]["consumed"] == 400, name
        lag = read_parts(scenario / "samples" / "consumer-lag", CONSUMER_LAG_FIELDS).to_pylist()
        assert sorted(r["partition"] for r in lag) == [0, 1], name
        assert all(r["lag"] == 0 for r in lag), name  # drained and committed
    assert "GROUP" in done.stderr and "LOG-END-OFFSET" in done.stderr  # the describe table
    assert "back to idle" in done.stderr  # the peak table
    # analysed like every run: the series through Spark, then the report
    summary = json.loads((tmp_path / "m-memory" / "memory-summary.json").read_text())
    assert [row["scenario"] for row in summary["scenarios"]] == ["source-p2", "confluent-p2"]
    assert all(row["figures"]["peak_bytes"] > 0 for row in summary["scenarios"])
    dom, console = render(tmp_path / "m-memory" / "report.html", tmp_path)
    assert console_errors(console) == []
    assert drawn(dom, "memory-over-time")
    assert "LOG-END-OFFSET" in dom and "back to idle" in dom
