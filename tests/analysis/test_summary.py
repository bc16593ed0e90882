"""summary.json from what the chain found, without Spark (analysis.summary): tables of cases."""

from pathlib import Path

import numpy as np
import pytest

from analysis.digests import digest_of, top_values
from analysis.inputs import AnalyzeOptions, SutInputs
from analysis.stepjudge import StepInput, judged_rows, tail
from analysis.steprule import StepTails, StepTotals
from analysis.summary import (
    SutFindings,
    _run_verdict,
    headline,
    latency_text,
    strict_json,
    summary,
)
from analysis.verdicts import Thresholds, Verdict
from contract.documents import problems
from contract.summarydocs import SummaryDoc

S = 1_000_000_000
T0 = 1_750_000_000 * S


def _totals(step=1, rate=100, seconds=10, **changes) -> StepTotals:
    scheduled = rate * seconds
    totals: StepTotals = {
        "step": step,
        "target_rate_per_s": rate,
        "scheduled": scheduled,
        "sent": scheduled,
        "inflight_cap_refused": 0,
        "acked": scheduled,
        "send_failures": 0,
        "lost": 0,
        "delivered": scheduled,
        "duplicates": 0,
        "decoys": 0,
        "filtered": 0,
        "leaked": 0,
        "start_ns": T0,
        "last_intended_ns": T0 + (scheduled - 1) * S // rate,
        "last_sent_ns": T0 + (scheduled - 1) * S // rate,
        "first_received_ns": T0,
        "last_received_ns": T0 + seconds * S,
        "negative_e2e": 0,
    }
    totals.update(changes)  # type: ignore[typeddict-item]
    return totals


def _sketch(values_ms):
    values = np.asarray(values_ms, dtype=float)
    return digest_of(values), top_values(values)


def _run(**changes):
    run = {
        "run_id": "run-1",
        "sut": "direct",
        "status": "completed",
        "pace": {
            "name": "p",
            "spec": "100/s@10s",
            "steps": [{"rate_per_s": 100, "duration_s": 10}],
        },
        "schedule": {"start_ns": T0, "step_gap_s": 0},
        "payload_bytes": 8192,
    }
    return {**run, **changes}


def _inputs(run) -> SutInputs:
    return SutInputs(Path("x"), run, T0, "run.json", (Path("a.parquet"),), (Path("b.parquet"),))


def _findings(totals, e2e_ms=2.0, foreign=0) -> SutFindings:
    sketches = {}
    points = []
    for t in totals:
        n = t["delivered"]
        if n:
            sketches[("e2e", t["step"])] = _sketch(np.full(n, e2e_ms))
            points += [{"step": t["step"], "second": s, "p50_ms": e2e_ms} for s in range(10)]
        sketches[("sender_lag", t["step"])] = _sketch(np.full(t["sent"], 0.1))
    return SutFindings(totals, foreign, sketches, points)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # the slots the cap refused were handled at their own time: the pace was kept
        ({"sent": 900, "inflight_cap_refused": 100, "send_failures": 100}, "breaks"),
        ({"lost": 5}, "breaks"),
        ({"lost": 1}, "holds"),
        # decoys are expected to be filtered: delivering the rest is keeping up
        ({"decoys": 100, "filtered": 100, "delivered": 900}, "holds"),
        ({"decoys": 100, "filtered": 100, "delivered": 850}, "breaks"),
        ({"sent": 800, "last_sent_ns": T0 + 10 * S}, "sender-limited"),
        ({"rate": 5}, "insufficient-data"),  # 50 events
    ],
)
def test_a_step_row_is_judged_by_the_step_rule(changes, expected):
    total = _totals(**changes)
    found = _findings([total])
    tails = StepTails(
        e2e=_tail(found, "e2e"),
        sender_lag=_tail(found, "sender_lag"),
        e2e_medians=[(float(s), 2.0) for s in range(10)],
    )
    ((row, verdict),), _ = judged_rows([StepInput(total, 10, tails)], Thresholds())
    assert verdict.verdict == expected == row["verdict"], verdict.reasons
    assert row["inflight_cap_refused"] == total["inflight_cap_refused"]
    assert row["delivered_rate_per_s"] == round((total["delivered"] - total["leaked"]) / 10, 2)


def _tail(found, metric):
    return tail(found.sketches, metric, 1)


def _verdict(kind, rate, step=1):
    return Verdict(step, rate, kind)


@pytest.mark.parametrize(
    ("run", "verdicts", "failures", "expected"),
    [
        (
            _run(),
            [_verdict("holds", 100), _verdict("breaks", 200, 2)],
            (),
            (200, 100, "breaks at 200/s; max sustainable 100/s"),
        ),
        (_run(), [_verdict("holds", 100)], (), (None, 100, "held every judged step")),
        (
            _run(),
            [_verdict("breaks", 100)],
            ("the sender died",),
            (None, None, "instrument failed: the sender died"),
        ),
        (
            _run(search={"result": {"max_sustainable_per_s": 300, "lowest_break_per_s": 400}}),
            [_verdict("breaks", 100)],
            (),
            (400, 300, "searched: max sustainable 300/s (held 300/s, broke 400/s)"),
        ),
        (
            _run(status="interrupted", search={"result": None}),
            [_verdict("holds", 100)],
            (),
            (None, None, "searched: the search did not finish (interrupted)"),
        ),
    ],
)
def test_the_runs_verdict(run, verdicts, failures, expected):
    found, text = _run_verdict(run, verdicts, failures, ())
    assert (found.breaking_point_per_s, found.max_sustainable_rate_per_s) == expected[:2]
    assert text.startswith(expected[2]), text


def test_a_summary_from_findings_is_a_summary_doc():
    steps = [_totals(), _totals(step=2, rate=200, lost=50, start_ns=T0 + 12 * S)]
    doc = summary(_inputs(_run()), AnalyzeOptions(), _findings(steps, foreign=3), ({}, {}))
    assert problems(doc, SummaryDoc) == []
    assert (doc["breaking_point_per_s"], doc["max_sustainable_rate_per_s"]) == (200, 100)
    assert doc["counts"]["lost"] == 50 and doc["counts"]["foreign"] == 3
    assert [s["verdict"] for s in doc["steps"]] == ["holds", "breaks"]
    assert doc["latency_ms"]["e2e"]["n"] == 1000 + 2000
    assert "search" not in doc and doc["clock"]["applied"] is False


def _hour_at_100_per_s(median_ms):
    """The issue's soak: one hour-long step at 100/s; each second's e2e P50 is `median_ms(s)`
    (its P99 50 % above it), as the job's per-second digests give them."""
    total = _totals(rate=100, seconds=3600)
    values = np.concatenate([np.full(100, median_ms(s)) for s in range(3600)])
    points = [
        {"step": 1, "second": s, "n": 100, "p50_ms": median_ms(s), "p99_ms": 1.5 * median_ms(s)}
        for s in range(3600)
    ]
    findings = SutFindings(
        [total],
        0,
        {("e2e", 1): _sketch(values), ("sender_lag", 1): _sketch(np.full(360_000, 0.1))},
        points,
    )
    run = _run(
        pace={
            "name": "soak",
            "spec": "100:3600",
            "steps": [{"rate_per_s": 100, "duration_s": 3600}],
        }
    )
    return summary(_inputs(run), AnalyzeOptions(), findings, ({}, {}))


def test_a_creeping_hour_holds_but_says_it_drifts():
    """Issue 34: a median creeping from 2 to 12 ms over an hour was judged "holds" in silence
    (the rise rule's 20 ms floor is sized for 30 s steps)."""
    doc = _hour_at_100_per_s(lambda s: 2.0 + 10.0 * s / 3600)
    assert problems(doc, SummaryDoc) == []
    step = doc["steps"][0]
    assert step["verdict"] == "holds"  # it delivered the rate: a capacity verdict
    assert step["drift"] is not None and step["drift"]["verdict"] == "drifting"
    assert step["reasons"][0].startswith("drifting: e2e P50 rose 10 ms per hour")
    assert doc["verdict"] == (
        "held every judged step; max sustainable 100/s; "
        "e2e latency drifting in step 1 (100/s): P50 +10 ms/h, P99 +15 ms/h"
    )


def test_a_flat_hour_is_stable_and_a_short_step_has_no_drift():
    doc = _hour_at_100_per_s(lambda s: 2.0 + (30.0 if s % 97 == 0 else 0.0))
    step = doc["steps"][0]
    assert step["drift"] is not None and step["drift"]["verdict"] == "stable"
    assert step["reasons"] == [] and "drifting" not in doc["verdict"]
    short = summary(_inputs(_run()), AnalyzeOptions(), _findings([_totals()]), ({}, {}))
    assert short["steps"][0]["drift"] is None


def test_nothing_received_although_acked_is_an_instrument_failure():
    steps = [_totals(delivered=0, lost=1000)]
    doc = summary(_inputs(_run()), AnalyzeOptions(), _findings(steps), ({}, {}))
    assert doc["verdict"].startswith("instrument failed: nothing received although 1000")
    assert doc["breaking_point_per_s"] is None
    assert doc["steps"][0]["verdict"] == "instrument-failed"


def _summary_doc(e2e, counts) -> dict:
    return {"sut": "kafka", "verdict": "held", "latency_ms": {"e2e": e2e}, "counts": counts}


COUNTS = {
    "sent": 10,
    "send_failures": 1,
    "lost": 2,
    "duplicates": 3,
    "foreign": 4,
    "decoys": 0,
    "filtered": 0,
}


@pytest.mark.parametrize(
    ("e2e", "counts", "line"),
    [
        (
            {"p9999": 5.0, "n": 10, "p9999_is_max": True},
            COUNTS,
            "kafka: held; e2e max 5.00 ms (n=10); sent 10, send failures 1, lost 2, "
            "duplicates 3, foreign 4",
        ),
        (
            {"p9999": 8070.4, "n": 20_000, "p9999_is_max": False},
            {**COUNTS, "decoys": 6, "filtered": 5},
            "kafka: held; e2e P99.99 8.07 s (n=20000); sent 10, send failures 1, lost 2, "
            "duplicates 3, foreign 4, decoys filtered 5 of 6",
        ),
    ],
)
def test_the_headline(e2e, counts, line):
    assert headline(_summary_doc(e2e, counts)) == line


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (8070.4, "8.07 s"),  # source-kafka's P99.99 that printed as 8070.4 ms
        (0.4213, "0.421 ms"),
        (5.0, "5.00 ms"),  # the digits are significant: trailing zeros kept
        (12, "12.0 ms"),
        (999.4, "999 ms"),
        (999.96, "1.00 s"),  # rounds to a second: said in seconds
        (99.95, "100 ms"),  # rounded up into the next power of ten: still 3 digits
        (0.9996, "1.00 ms"),
        (1000, "1.00 s"),
        (12_345.6, "12.3 s"),
        (1_234_567.8, "1230 s"),
        (0.000_123_45, "0.000123 ms"),
        (0, "0 ms"),
        (-0.4213, "-0.421 ms"),  # a clock error can make one negative
        (None, "-"),  # no deliveries
        (float("nan"), "-"),
    ],
)
def test_latencies_print_with_three_significant_digits(ms, text):
    assert latency_text(ms) == text


@pytest.mark.parametrize(
    ("doc", "text"),
    [
        ({"p99": float("nan")}, '{\n  "p99": null\n}'),
        ({"a": [float("inf"), 1.5]}, '{\n  "a": [\n    null,\n    1.5\n  ]\n}'),
    ],
)
def test_strict_json_writes_what_every_parser_reads(doc, text):
    assert strict_json(doc) == text


def test_a_step_with_a_fault_is_judged_by_it_and_left_out_of_the_baseline():
    # step 1 had a fault (its e2e P99 500 ms); step 3's 300 ms must be judged against step 2's
    # 2 ms (a standing queue), not against the faulted step's 500 ms
    totals = [_totals(1, 100), _totals(2, 200), _totals(3, 300)]
    found = _findings(totals)
    for step, e2e_ms in ((1, 500.0), (3, 300.0)):
        found.sketches[("e2e", step)] = _sketch(np.full(totals[step - 1]["delivered"], e2e_ms))
    fault = {
        "spec": "1@2s:kill:channel:1s", "step": 1, "offset_s": 2.0, "action": "kill",
        "target": "channel", "duration_s": 1.0, "due_ns": T0 + 2 * S, "at_ns": T0 + 2 * S,
        "back_ns": T0 + 3 * S, "pids": [1, 2], "error": None,
    }  # fmt: skip
    steps = [{"rate_per_s": r, "duration_s": 10} for r in (100, 200, 300)]
    run = _run(pace={"name": "p", "spec": "x", "steps": steps}, faults=[fault])
    doc = summary(_inputs(run), AnalyzeOptions(), found, ({}, {}))
    assert problems(doc, SummaryDoc) == []
    assert [s["verdict"] for s in doc["steps"]] == ["faulted", "holds", "breaks"]
    assert "over 100 ms (5x the baseline 2)" in doc["steps"][2]["reasons"][0]
    assert doc["breaking_point_per_s"] == 300 and doc["max_sustainable_rate_per_s"] == 200
    assert doc["verdict"].startswith("kill channel 2 s into step 1, back after 1.00 s")
    assert "; the other steps: breaks at 300/s" in doc["verdict"]
    assert doc["faults"][0]["at_s"] == 2.0


def test_a_run_with_no_clean_step_says_it_has_no_baseline():
    # Every step lost events: none held, so none is the bar the others' P99 is measured by.
    steps = [_totals(lost=50), _totals(step=2, rate=200, lost=50, start_ns=T0 + 12 * S)]
    doc = summary(_inputs(_run()), AnalyzeOptions(), _findings(steps), ({}, {}))
    assert doc["baseline_e2e_p99_ms"] is None
    assert "no clean step to take a latency baseline from" in doc["verdict"]
    clean = summary(_inputs(_run()), AnalyzeOptions(), _findings([_totals()]), ({}, {}))
    assert clean["baseline_e2e_p99_ms"] is not None and "no clean step" not in clean["verdict"]


def test_a_capacity_held_only_on_a_saturated_host_is_a_lower_bound():
    verdicts = [_verdict("holds", 100), _verdict("holds", 200, 2)]
    _, text = _run_verdict(_run(), verdicts, (), [2])  # step 2 held beside others' load
    assert text == "held every judged step; max sustainable at least 200/s"
    _, text = _run_verdict(_run(), verdicts, (), [1])
    assert text == "held every judged step; max sustainable 200/s"
