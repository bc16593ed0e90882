"""The host's load measured and said (issue 51, part 1): a run beside processes that take the
CPU is inconclusive where it fell short, never a capacity; the same run on a quiet host breaks
where the system does. A lab system of a known capacity (40/s) at 400/s, as real processes,
analysed with Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.job import AnalyzeOptions, analyze
from analysis.verdicts import Thresholds
from evbench.options import RunOptions
from evbench.runner import run
from loadgen.pace import resolve_pace
from loadgen.settings import SendKnobs
from runtime.procs import die_with_parent
from suts.drivers import known_capacity

pytestmark = [pytest.mark.e2e, pytest.mark.alone]  # the hogs take the machine; a quiet run needs it


def _run_and_analyse(spark, tmp_path: Path) -> dict:
    # A system of the lab's hop of known capacity, run as a user's own ("external": `run`
    # takes the lab's names only, and this one is the tests').
    opts = RunOptions(
        sut="external",
        pace=resolve_pace("400:6"),
        runs_dir=tmp_path / "runs",
        send=SendKnobs(payload_bytes=256),
        grace_s=1.0,
        grace_cap_s=3.0,
    )
    outcome = run(opts, print, live=False, make=known_capacity(40, queue_limit=100))
    (summary,) = analyze(spark, [outcome.sut_dir.root], AnalyzeOptions())
    return summary


def _hogs(n: int) -> list[subprocess.Popen[bytes]]:
    """Processes outside the run that each keep a core busy."""
    spin = "while True:\n    pass"
    return [
        subprocess.Popen([sys.executable, "-c", spin], preexec_fn=die_with_parent) for _ in range(n)
    ]


def test_a_step_that_broke_beside_cpu_hogs_is_inconclusive_not_a_capacity(spark, tmp_path):
    hogs = _hogs(os.cpu_count() or 2)  # a core each: the host saturated by others
    try:
        summary = _run_and_analyse(spark, tmp_path)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    (step,) = summary["steps"]
    host = step["host"]
    assert host is not None and host["samples"] >= 3, step
    t = Thresholds()
    assert host["busy_ratio"] >= t.host_busy_ratio and host["others_ratio"] >= t.host_others_ratio
    assert step["verdict"] == "host-saturated", step["reasons"]
    assert step["reasons"][0].startswith("host saturated: host ")
    assert step["reasons"][1].startswith("by the step rule alone: ")  # what it would have said
    assert summary["breaking_point_per_s"] is None and summary["max_sustainable_rate_per_s"] is None
    assert summary["host_saturated_steps"] == [1]
    assert "host saturated by other processes in step 1 (host " in summary["verdict"]


def test_the_same_run_on_a_quiet_host_breaks_where_the_system_does(spark, tmp_path):
    summary = _run_and_analyse(spark, tmp_path)
    (step,) = summary["steps"]
    assert step["host"] is not None
    assert step["host"]["others_ratio"] < Thresholds().host_others_ratio, step["host"]
    assert step["verdict"] == "breaks", step["reasons"]
    assert summary["breaking_point_per_s"] == 400 and summary["host_saturated_steps"] == []
    assert "host saturated" not in summary["verdict"]


def test_a_search_places_no_break_on_a_host_others_saturate(tmp_path, monkeypatch):
    # 400/s breaks a 40/s system wherever it runs; beside the hogs, each probe is inconclusive:
    # the search waits for the host (1 s here, 30 s for users), probes the rate again, twice,
    # then ends without a break and says why.
    import evbench.search
    from evbench.options import SearchOptions
    from evbench.search import search
    from evbench.searchplan import Resolution, SearchPlan

    monkeypatch.setattr(evbench.search, "_HOST_WAIT_S", 1.0)
    opts = SearchOptions(
        sut="capacity",
        plan=SearchPlan(400, 400, Resolution(per_s=1), probe_s=3, confirm_s=3, max_probes=6),
        runs_dir=tmp_path,
        run_id="s",
        send=SendKnobs(payload_bytes=256),
        settle_s=0.5,
        grace_s=0.5,
        grace_cap_s=2.0,
        fresh=True,  # no backlog carried from one probe to the next
    )
    lines: list[str] = []
    hogs = _hogs(os.cpu_count() or 2)  # a core each: the host saturated by others
    try:
        searched = search(opts, lines.append, make=known_capacity(40, queue_limit=100))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert searched.status == "completed" and searched.result is not None, lines
    result = searched.result
    assert result.lowest_break_per_s is None and result.max_sustainable_per_s is None, lines
    assert result.why.startswith("the host stayed saturated by other processes (host "), lines
    assert "3 probes in a row inconclusive, the last at 400/s; no break placed" in result.why
    assert sum("waiting up to 1 s for it to quiet, then 400/s again" in line for line in lines) == 2
