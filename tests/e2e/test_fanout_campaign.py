"""`evbench search --triggers 1,3` as a user runs it: each fan-out searched in turn under one run
id, every event delivered once per trigger at each, and the index's cost of the fan-out against
N: the capacity each search found, the deliveries, the broker's own processes' CPU and memory.
Real processes, Spark, Chromium. (`run`'s campaign builds its items by the same rule:
tests/analysis/test_fanout_cost.py.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.browser import console_errors, drawn, render

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.browser]


@pytest.mark.alone  # "200/s" held needs the sender on its slots
def test_a_brokers_triggers_are_searched_in_turn_and_the_index_draws_their_cost(tmp_path):
    argv = [
        sys.executable, "-m", "evbench", "search", "--sut", "broker-imc", "--triggers", "1,3",
        "--from", "200", "--max", "200", "--hold", "1", "--confirm", "2", "--settle", "1",
        "--payload-bytes", "512", "--runs-dir", str(tmp_path), "--run-id", "f",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "f-search"
    assert "[1/2] broker-imc.fanout-1" in done.stderr and "[2/2] broker-imc.fanout-3" in done.stderr
    received = {}
    for fanout in (1, 3):
        system = run_dir / f"broker-imc.fanout-{fanout}"
        described = json.loads((system / "run.json").read_text())["sut_settings"].get("subscribers")
        assert (len(described) if described else 1) == fanout and (fanout > 1) == bool(described)
        summary = json.loads((system / "analysis" / "summary.json").read_text())
        assert summary["search"]["result"]["max_sustainable_per_s"] == 200, summary["verdict"]
        counts = summary["counts"]
        assert counts["lost"] == counts["duplicates"] == 0 and counts["received"] > 0, counts
        received[fanout] = counts["received"]
        delivered = [s["counts"]["delivered"] for s in summary.get("subscribers", [])]
        assert delivered == ([counts["received"]] * 3 if fanout == 3 else []), delivered
    index = (run_dir / "index.html").read_text()
    assert "The cost of fan-out" in index
    # A row per N: the capacity found, the deliveries N x the events, and the broker's own
    # processes (its filter) costed; the instruments are not.
    rows = re.findall(
        r"<tr><td class='text'>broker-imc[^<]*</td><td class='text'>(\d+)</td>"
        r"<td class='text'>([^<]*)</td><td class='text'>([\d,]+)</td>"
        r"<td class='text'>([^<]*)</td></tr>", index,
    )  # fmt: skip
    assert [(n, rate) for n, rate, _, _ in rows] == [
        ("1", "200/s"), ("3", "200/s (600 deliveries/s)"),
    ], rows  # fmt: skip
    assert [int(d.replace(",", "")) for _, _, d, _ in rows] == [received[1], 3 * received[3]]
    assert all("filter:" in costs and "receiver" not in costs for *_, costs in rows), rows
    assert "broker-imc (3 subscribers)" in index  # the verdict table tells the two apart
    dom, console = render(run_dir / "index.html", tmp_path)
    assert console_errors(console) == []
    assert drawn(dom, "fanout-cost")
