"""The capacity search against real processes on loopback: hops of known capacity, the bare
instruments (a rate no single sender holds), and a system left with a backlog."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from analysis.job import AnalyzeOptions, analyze
from contract.documents import problems
from contract.records import SENT_FIELDS
from contract.summarydocs import SummaryDoc
from evbench.options import SearchOptions
from evbench.search import search
from evbench.searchplan import Resolution, SearchPlan
from loadgen.settings import SendKnobs
from runtime.parquet import part_files, read_parts
from runtime.procs import die_with_parent
from suts.drivers import known_capacity
from suts.lab import make_sut
from tests.conftest import WITHOUT_HOST_RULE, wait_until

pytestmark = pytest.mark.e2e


def test_a_rate_no_sender_holds_ends_the_search_with_the_instrument_as_the_limit(tmp_path):
    # 100,000 events/s from one process is beyond any Python sender (this one holds about
    # 20,000/s on two cores): the instruments alone cannot keep the pace, and the search must
    # say so rather than name a breaking point.
    opts = SearchOptions(
        sut="direct",
        plan=SearchPlan(100_000, 100_000, Resolution(fraction=0.1), probe_s=1, confirm_s=1),
        runs_dir=tmp_path,
        run_id="s",
        send=SendKnobs(payload_bytes=256),
        grace_s=2.0,
        thresholds=WITHOUT_HOST_RULE,
    )
    lines: list[str] = []
    searched = search(opts, lines.append, make=make_sut)
    result = searched.result
    assert searched.status == "completed" and result is not None, lines
    assert result.max_sustainable_per_s is None and result.lowest_break_per_s is None, lines
    assert "the instrument is the limit" in result.why and "instrument is the limit" in lines[-1]
    # Short of the rate, it names the workers that would hold it; on the rate but late (its
    # lag over the rule's 10 ms), it says its host is short of CPU: either is the instrument.
    if result.workers_needed is not None:
        assert result.workers_needed >= 2 and f"--workers {result.workers_needed}" in lines[-1]
    else:
        assert "host is short of CPU" in result.why
    run = json.loads(searched.sut_dir.run_json.read_text())
    assert [p["verdict"] for p in run["search"]["probes"]] == ["sender-limited"]


def test_a_system_still_delivering_a_backlog_is_restarted_before_the_next_probe(tmp_path):
    # 40/s of capacity and 1,000 events of queue: a 3 s probe at 400/s leaves a backlog that
    # takes about 20 s to deliver, far beyond the 3 s cap on settling.
    opts = SearchOptions(
        sut="capacity",
        plan=SearchPlan(400, 400, Resolution(per_s=1), probe_s=3, confirm_s=3, max_probes=2),
        runs_dir=tmp_path,
        run_id="s",
        send=SendKnobs(payload_bytes=256),
        settle_s=1.0,
        grace_s=1.0,
        grace_cap_s=3.0,
        thresholds=WITHOUT_HOST_RULE,
    )
    lines: list[str] = []
    searched = search(opts, lines.append, make=known_capacity(40, queue_limit=1000))
    assert searched.status == "completed", lines
    run = json.loads(searched.sut_dir.run_json.read_text())
    probes = run["search"]["probes"]
    assert [p["verdict"] for p in probes] == ["breaks", "breaks"], lines
    assert probes[0]["restarted"] is None
    assert probes[1]["restarted"] == "still delivering a backlog after 3 s", lines
    assert any("restarting it" in line for line in lines)
    assert "gave up after 2 probes" in searched.result.why


@pytest.mark.alone  # "max sustainable 200/s" needs the sender on its slots (lag p99 <= 10 ms)
def test_evbench_search_two_systems_analysed_and_compared(tmp_path):
    # The command a user types: each system searched in turn under one run id, then one
    # analysis of both and `compare`, every figure naming the search's bracket.
    evbench = [sys.executable, "-m", "evbench"]
    search_cmd = [
        *evbench, "search", "--sut", "direct,channel-imc", "--from", "200", "--max", "200",
        "--hold", "1", "--confirm", "2", "--settle", "1", "--payload-bytes", "512",
        "--runs-dir", str(tmp_path), "--run-id", "s",
    ]  # fmt: skip
    done = subprocess.run(search_cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "[2/2] channel-imc" in done.stderr
    run_root = tmp_path / "s-search"
    for sut in ("direct", "channel-imc"):
        summary = json.loads((run_root / sut / "analysis" / "summary.json").read_text())
        assert problems(summary, SummaryDoc) == []
        assert summary["verdict"].startswith("searched: max sustainable 200/s"), summary["verdict"]
        assert summary["max_sustainable_rate_per_s"] == 200
        assert summary["breaking_point_per_s"] is None
        # Spark's verdicts of the probes (from digests) agree with the search's (exact)
        probes = summary["search"]["probes"]
        assert [s["verdict"] for s in summary["steps"]] == [p["verdict"] for p in probes]
    assert (run_root / "index.html").is_file()
    compared = subprocess.run(
        [*evbench, "compare", str(run_root), "--out", str(tmp_path / "c.html")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compared.returncode == 0, compared.stderr
    rows = [line for line in compared.stdout.splitlines() if "searched" in line]
    assert len(rows) == 2 and all("max sustainable 200/s" in row for row in rows), compared.stdout


def test_a_probe_and_the_final_analysis_agree_when_the_receivers_clock_is_shifted(tmp_path, spark):
    # The receiver stamps 400 ms ahead of the sender: each probe must be judged with the clock
    # correction the run's analysis applies (the same step reader), not on raw stamps that
    # would read as 400 ms of latency, and both must reach the same figures.
    shift_ms = 400.0
    opts = SearchOptions(
        sut="direct",
        plan=SearchPlan(200, 400, Resolution(per_s=100), probe_s=2, confirm_s=2, max_probes=2),
        runs_dir=tmp_path,
        run_id="s",
        send=SendKnobs(payload_bytes=256),
        settle_s=0.5,
        grace_s=1.0,
        receiver_clock_shift_ms=shift_ms,
    )
    lines: list[str] = []
    searched = search(opts, lines.append, make=make_sut)
    assert searched.status == "completed", lines
    run = json.loads(searched.sut_dir.run_json.read_text())
    probes = run["search"]["probes"]
    assert len(probes) == 2, lines
    # run.json keeps the offsets that span the probes, as the analysis reads them
    (clock,) = run["clock"]["senders"].values()
    assert abs(clock["before"]["offset_ns"] / 1e6 - shift_ms) < 5 and clock["after"], clock
    (summary,) = analyze(spark, [searched.sut_dir.root], AnalyzeOptions())
    for probe, step in zip(probes, summary["steps"], strict=True):
        assert probe["e2e_p99_ms"] < shift_ms / 4, probe  # corrected, not the shift
        assert step["p99_e2e_ms"] == pytest.approx(probe["e2e_p99_ms"], abs=1.0), (probe, step)
        assert step["verdict"] == probe["verdict"], (probe, step)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_search_stops_its_probe_as_run_stops_its_sender(tmp_path, sig):
    # One interrupt strategy (evbench.interrupts): mid-probe the signal is the sender's to take,
    # so the probe under way flushes its records and the search ends interrupted (130), with
    # run.json and every record kept.
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "evbench", "search", "--sut", "direct", "--from", "300",
            "--max", "300", "--hold", "60", "--payload-bytes", "256", "--runs-dir",
            str(tmp_path), "--run-id", "i", "--no-analyze",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent,
    )  # fmt: skip
    sut_dir = tmp_path / "i-search" / "direct"
    wait_until(lambda: len(part_files(sut_dir / "sent")) >= 2, 60, "the probe's records on disk")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "stopping the sender; every record written so far is kept" in err, err
    run = json.loads((sut_dir / "run.json").read_text())
    assert run["status"] == "interrupted", run["status"]
    assert [s["rate_per_s"] for s in run["pace"]["steps"]] == [300]  # the probe under way
    sent = read_parts(sut_dir / "sent", SENT_FIELDS)
    assert 300 < sent.num_rows < 300 * 60  # flushed up to the interrupt, not the whole hold
    assert run["records"]["sent_rows"] == sent.num_rows
    # The probe cut short is listed, not judged, and its sends are counted in the summary.
    (probe,) = run["search"]["probes"]
    assert probe["cut_short"] and probe["verdict"] == "not-judged", probe
    assert probe["rate_per_s"] == 300 and "cut short" in "; ".join(probe["reasons"]), probe
    summary = run["sender"]["summary"]
    assert summary["sent"] == sent.num_rows, (summary["sent"], sent.num_rows)
    assert [p["interrupted"] for p in summary["probes"]] == [True], summary["probes"]
    assert run["schedule"]["start_ns"] == probe["start_ns"] == summary["start_ns"], run
