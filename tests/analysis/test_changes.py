"""`compare`'s calls (analysis.changes) and how they are said (analysis.changes_text): steps
matched by rate, each figure called from the intervals, capacity called higher or lower, what
counts for the verdict and the gate. Pure: steps and rows written here."""

from __future__ import annotations

import math

import pytest

from analysis.changes import (
    BREAKING,
    FAILED,
    MIXED,
    NOT_CALLED,
    SEARCHES,
    SUSTAINABLE,
    capacity_call,
    capacity_ranges,
    capacity_texts,
    compare_pair,
    latency_change,
    merged_capacity,
    paired_steps,
    probe_curve,
)
from analysis.changes_text import change_text, headline, pair_lines, regression_lines
from analysis.comparison import regressions, with_changes
from analysis.confidence import BETTER, SAME, WORSE

INF = math.inf


def _step(rate, p99=(10.0, 9.0, 11.0), step=1, verdict="holds", p50=None, p9999=None, n=30_000):
    """A ComparedStep: each figure (value, lo, hi), hi None for an open end; a figure given as
    (value,) has no interval."""
    figures = {"p50": p50, "p99": p99, "p9999": p9999}
    return {
        "step": step,
        "rate_per_s": rate,
        "verdict": verdict,
        "judged": verdict in ("holds", "breaks"),
        "n": n,
        "is_max": n < 10_000,
        "ms": {name: f[0] if f else None for name, f in figures.items()},
        "ci95": {
            name: {"lo_ms": f[1], "hi_ms": f[2], "exact": True, "n": n}
            for name, f in figures.items()
            if f and len(f) == 3
        },
    }


def _rates(steps):
    return [None if s is None else (s["step"], s["rate_per_s"]) for s in steps]


def test_steps_pair_by_rate_in_order_and_a_step_of_one_run_is_alone():
    # 1k-2k's shape: the 100/s cool-down between 1500 and 1600
    before = [_step(r, step=i) for i, r in enumerate([1000, 1500, 100, 1600, 1700], 1)]
    after = [_step(r, step=i) for i, r in enumerate([1000, 1500, 100, 1600, 100, 1800], 1)]
    pairs = paired_steps(before, after)
    assert [(_rates([b])[0], _rates([a])[0]) for b, a in pairs] == [
        ((1, 1000), (1, 1000)),
        ((2, 1500), (2, 1500)),
        ((3, 100), (3, 100)),  # the first 100/s with the first
        ((4, 1600), (4, 1600)),
        ((5, 1700), None),  # only in the baseline
        (None, (5, 100)),  # the later run's second 100/s has no partner
        (None, (6, 1800)),
    ]


@pytest.mark.parametrize(
    ("before", "after", "tolerance", "call", "interval"),
    [
        # overlapping intervals
        ((10.0, 9.0, 11.0), (10.5, 9.5, 11.5), 0.0, SAME, (-1.5, 2.5)),
        # apart: worse, the change's interval above 0
        ((10.0, 9.0, 11.0), (14.0, 13.0, 15.0), 0.0, WORSE, (2.0, 6.0)),
        ((14.0, 13.0, 15.0), (10.0, 9.0, 11.0), 0.0, BETTER, (-6.0, -2.0)),
        # apart by less than 25 % of the baseline's bound (13 < 11 x 1.25)
        ((10.0, 9.0, 11.0), (14.0, 13.0, 15.0), 0.25, SAME, (2.0, 6.0)),
        # the later run's upper end open (past its samples): at least 2 ms worse
        ((10.0, 9.0, 11.0), (14.0, 13.0, None), 0.0, WORSE, (2.0, None)),
        # the baseline's upper end open: never worse, however high, and not "indistinguishable"
        ((10.0, 9.0, None), (90.0, 80.0, 99.0), 0.0, NOT_CALLED, (None, 90.0)),
        ((10.0, 9.0, None), (10.0, 9.0, None), 0.0, NOT_CALLED, (None, None)),
        # ... but better where the later run lies wholly below it
        ((10.0, 9.0, None), (5.0, 4.0, 6.0), 0.0, BETTER, (None, -3.0)),
    ],
)
def test_a_step_figure_is_called_from_both_intervals(before, after, tolerance, call, interval):
    found = latency_change("p99", _step(1000, before), _step(1000, after), tolerance)
    assert (found.before_ms, found.after_ms) == (before[0], after[0])
    assert found.call == call and (found.lo_ms, found.hi_ms) == interval
    assert found.delta_ms == pytest.approx(after[0] - before[0])


@pytest.mark.parametrize(
    ("before", "after", "why"),
    [
        # under 10^4 events P99.99 is their maximum: it has no interval
        (
            _step(100, p9999=(5.0, 4.0, 6.0)),
            _step(100, p9999=(50.0,), n=3000),
            "no interval: the P99.99 of 3000 events is their maximum",
        ),
        # a summary analysed before intervals were kept
        (
            _step(100, p9999=(5.0,)),
            _step(100, p9999=(50.0, 40.0, 60.0)),
            "no interval: a summary analysed before intervals were kept",
        ),
        # a summary analysed before steps kept P50: no figure at all
        (_step(100), _step(100, p9999=(1.0, 0.9, 1.1)), "a summary analysed before it was kept"),
    ],
)
def test_a_figure_without_an_interval_is_not_called_and_says_why(before, after, why):
    name = "p9999" if before["ms"]["p9999"] is not None else "p50"
    found = latency_change(name, before, after)
    assert (found.call, found.why) == (NOT_CALLED, why)


@pytest.mark.parametrize(
    ("point", "held", "ranges", "texts"),
    [
        (1500, 1400, {BREAKING: (1500, 1500), SUSTAINABLE: (1400, 1400)}, ("1500/s", "1400/s")),
        # held every judged step: it breaks somewhere above the highest that held
        (
            None,
            2000,
            {BREAKING: (2001, INF), SUSTAINABLE: (2000, 2000)},
            ("none: held to 2000/s", "2000/s"),
        ),
        # broke at its first step: nothing sustained
        (1000, None, {BREAKING: (1000, 1000), SUSTAINABLE: (0, 0)}, ("1000/s", "none held")),
        # no step judged, an instrument failed, a search that did not finish
        (None, None, {BREAKING: None, SUSTAINABLE: None}, ("-", "-")),
    ],
)
def test_a_runs_capacity_as_ranges(point, held, ranges, texts):
    assert capacity_ranges(point, held) == ranges
    assert tuple(capacity_texts(point, held).values()) == texts


@pytest.mark.parametrize(
    ("before", "after", "call"),
    [
        ((100, 100), (1400, 1400), BETTER),  # issue 51's run-1 against run-2
        ((1400, 1400), (100, 100), WORSE),
        ((1400, 1400), (1400, 1400), SAME),
        ((1500, 1500), (2001, INF), BETTER),  # held beyond where the baseline broke
        ((2001, INF), (1500, 1500), WORSE),
        ((2001, INF), (2001, INF), SAME),  # held in both
        ((1401, INF), (2000, 2000), SAME),  # held to 1400/s only: 2000/s is not below that
        ((1300, 1500), (1400, 1600), SAME),  # repeats' ranges overlapping
        ((1300, 1500), (1600, 1700), BETTER),
        ((1400, 1400), None, NOT_CALLED),  # no capacity: said, not called
        (None, (1400, 1400), NOT_CALLED),
    ],
)
def test_capacity_is_called_higher_better_where_the_ranges_part(before, after, call):
    assert capacity_call(before, after) == call


def test_repeats_capacity_is_the_range_over_those_with_one():
    found = merged_capacity(
        [capacity_ranges(1500, 1400), capacity_ranges(None, 1600), capacity_ranges(None, None)]
    )
    assert found == {BREAKING: (1500, INF), SUSTAINABLE: (1400, 1600)}
    assert merged_capacity([capacity_ranges(None, None)]) == {BREAKING: None, SUSTAINABLE: None}


def _row(run, steps=(), point=1500, held=1400, searched=False, probes=(), failed=()):
    return {
        "run": run,
        "sut": "broker-imc",
        "verdict": f"breaks at {point}/s" if point else "no step could be judged",
        "instrument_failures": list(failed),
        "searched": searched,
        "steps": list(steps),
        "probes": list(probes),
        "breaking_point_per_s": point,
        "max_sustainable_rate_per_s": held,
        "capacity": capacity_ranges(point, held),
        "capacity_text": capacity_texts(point, held),
        "p99_e2e_ms": 40.0,
        "p9999_e2e_ms": 90.0,
    }


SLOW, FAST = (20.0, 19.0, 21.0), (10.0, 9.0, 11.0)


@pytest.mark.parametrize(
    ("before", "after", "verdict", "worse"),
    [
        # the same capacity, every step alike
        ([_step(1000)], [_step(1000)], SAME, []),
        # one step slower where both judged it: a regression
        ([_step(1000, FAST)], [_step(1000, SLOW)], WORSE, ["step 1 (1000/s) e2e P99"]),
        ([_step(1000, SLOW)], [_step(1000, FAST)], BETTER, []),
        # slower where the later run was sender-limited: said, not counted
        ([_step(1000, FAST)], [_step(1000, SLOW, verdict="sender-limited")], SAME, []),
        ([_step(1000, FAST)], [_step(1000, SLOW, verdict="insufficient-data")], SAME, []),
        # a step only one run had decides nothing
        ([_step(1000), _step(2000, FAST, 2)], [_step(1000)], SAME, []),
    ],
)
def test_two_staircases_are_called_step_by_step(before, after, verdict, worse):
    compared = compare_pair(_row("a", before), _row("b", after))
    assert compared.verdict == verdict
    said = [
        f"step {s.after['step']} ({s.rate_per_s}/s) e2e {c.name.upper()}"
        for s, c in compared.worse()
    ]
    assert said == worse


def test_a_capacity_drop_is_a_regression_whatever_the_steps_and_the_whole_run_is_told():
    compared = compare_pair(
        _row("a", [_step(1000, SLOW)]), _row("b", [_step(1000, FAST)], point=1200, held=1100)
    )
    assert compared.verdict == WORSE
    assert headline(compared) == (
        "broker-imc: b against a: worse (breaking point, max sustainable); better (e2e at 1 "
        "of 1 steps both judged)"
    )
    assert regression_lines(compared) == [
        "broker-imc in b: breaking point 1500/s -> 1200/s: worse than in a",
        "broker-imc in b: max sustainable 1400/s -> 1100/s: worse than in a",
    ]
    lines = pair_lines(compared)
    assert " ".join(lines[1].split()) == "capacity a b change call"
    assert " ".join(lines[2].split()) == "breaking point 1500/s 1200/s -300/s worse"
    assert (
        lines[-1].startswith("  whole run, information only")
        and "P99 40.0 ms -> 40.0 ms" in lines[-1]
    )


def test_a_run_without_capacity_is_said_plainly():
    compared = compare_pair(_row("a", [_step(1000)]), _row("b", [_step(1000)], None, None))
    assert [c.call for c in compared.capacity] == [NOT_CALLED, NOT_CALLED]
    assert compared.notes == ("b has no capacity to compare: no step could be judged",)
    assert compared.verdict == SAME  # its one step still compared
    lines = [" ".join(line.split()) for line in pair_lines(compared)]
    assert "breaking point 1500/s - - not called" in lines


def test_an_instrument_failure_compares_nothing():
    compared = compare_pair(
        _row("a", [_step(1000, FAST)]), _row("b", [_step(1000, SLOW)], failed=["receiver died"])
    )
    assert (compared.kind, compared.verdict, compared.worse()) == (FAILED, "not compared", [])
    assert pair_lines(compared) == [
        "broker-imc: b against a: not compared",
        "  not compared: an instrument failed in b",
    ]


def _probe(rate, p99, verdict="holds", confirm=False):
    return {
        "step": 1,
        "rate_per_s": rate,
        "hold_s": 10,
        "confirm": confirm,
        "start_ns": 0,
        "verdict": verdict,
        "reasons": [],
        "e2e_p99_ms": p99,
        "sender_ratio": 1.0,
    }


def test_a_search_and_a_staircase_compare_capacity_only():
    search = _row("s", point=1500, held=1400, searched=True, probes=[_probe(1400, 11_900.0)])
    staircase = _row("t", [_step(1000)], point=1100, held=1000)
    compared = compare_pair(staircase, search)
    assert compared.kind == MIXED and compared.steps == () and compared.tails == ()
    assert [c.call for c in compared.capacity] == [BETTER, BETTER]
    assert "capacity only: s is a search" in compared.notes[-1]


def test_two_searches_compare_their_confirmed_rates_beside_the_probes():
    a = _row(
        "a",
        point=1600,
        held=1500,
        searched=True,
        probes=[
            _probe(1000, 3.0),
            _probe(2000, 900.0, "breaks"),
            _probe(1500, 4.0),
            _probe(1500, 4.5, confirm=True),
        ],
    )
    b = _row(
        "b",
        point=1300,
        held=1200,
        searched=True,
        probes=[_probe(1000, 3.1), _probe(1300, 700.0, "breaks"), _probe(1200, 5.0)],
    )

    compared = compare_pair(a, b)
    assert compared.kind == SEARCHES and compared.verdict == WORSE
    assert [rate for rate, _, _ in compared.probes] == [1000, 1200, 1300, 1500, 2000]
    lines = [" ".join(line.split()) for line in pair_lines(compared)]
    assert "max sustainable 1500/s 1200/s -300/s worse" in lines
    assert "1500/s 4.00 ms holds; 4.50 ms holds (confirming) -" in lines
    assert "1000/s 3.00 ms holds 3.10 ms holds" in lines
    assert probe_curve([], []) == []


@pytest.mark.parametrize(
    ("lo", "hi", "text"),
    [
        (2.0, 6.0, "+4.00 ms (+2.00 ms to +6.00 ms)"),
        (-1.5, 2.5, "+4.00 ms (-1.50 ms to +2.50 ms)"),
        (2.0, None, "+4.00 ms (at least +2.00 ms)"),
        (None, 2500.0, "+4.00 ms (at most +2.50 s)"),
    ],
)
def test_a_change_is_said_with_its_interval_and_units(lo, hi, text):
    from analysis.changes import LatencyChange

    assert change_text(LatencyChange("p99", 10.0, 14.0, lo, hi, WORSE)) == text


def _middle(ends):
    return None if ends is None else ends[0] if ends[1] is None else (ends[0] + ends[1]) / 2


def _interval_row(run, sut, p99=None, p9999=None):
    """A comparison row of one step at 1000/s whose figures have these intervals."""
    given = {"p99": p99, "p9999": p9999}
    ci95 = {
        name: {"lo_ms": ends[0], "hi_ms": ends[1], "exact": True, "n": 10_000}
        for name, ends in given.items()
        if ends is not None
    }
    step = {
        "step": 1,
        "rate_per_s": 1000,
        "verdict": "holds",
        "judged": True,
        "n": 10_000,
        "is_max": False,
        "ms": {"p50": None} | {name: _middle(ends) for name, ends in given.items()},
        "ci95": ci95,
    }
    return {
        "run": run,
        "sut": sut,
        "verdict": "held every judged step; max sustainable 1000/s",
        "instrument_failures": [],
        "searched": False,
        "steps": [step],
        "probes": [],
        "breaking_point_per_s": None,
        "max_sustainable_rate_per_s": 1000,
        "capacity": capacity_ranges(None, 1000),
        "capacity_text": capacity_texts(None, 1000),
        "p99_e2e_ms": None,
        "p9999_e2e_ms": None,
    }


def _calls(row):
    (step,) = row["compared"].steps
    return {c.name: c.call for c in step.latencies if c.name != "p50"}


def test_compare_calls_a_change_against_each_systems_first_run_only_when_intervals_part():
    rows = with_changes(
        [
            _interval_row("a", "imc", p99=(10, 12), p9999=(30, 40)),
            _interval_row("a", "kafka", p99=(20, 22), p9999=(50, None)),
            # P99 overlaps; P99.99 above 40
            _interval_row("b", "imc", p99=(11, 13), p9999=(45, 50)),
            # faster P99; P99.99 not bounded above in a
            _interval_row("b", "kafka", p99=(8, 9), p9999=(70, 80)),
            _interval_row("c", "imc"),  # analysed before intervals: nothing to call
        ]
    )
    assert [(r["run"], r["sut"], r["compared"] and _calls(r)) for r in rows] == [
        ("a", "imc", None),
        ("a", "kafka", None),
        ("b", "imc", {"p99": "indistinguishable", "p9999": "worse"}),
        ("b", "kafka", {"p99": "better", "p9999": "not called"}),
        ("c", "imc", {"p99": "not called", "p9999": "not called"}),
    ]
    assert regressions(rows) == [
        "imc in b: step 1 (1000/s) e2e P99.99 35.0 ms -> 47.5 ms, +12.5 ms (+5.00 ms to "
        "+20.0 ms): worse than in a"
    ]
    # within a 30 % tolerance, 45 is not beyond 40
    rows = [_interval_row("a", "imc", p9999=(30, 40)), _interval_row("b", "imc", p9999=(45, 50))]
    assert regressions(with_changes(rows, 0.3)) == []
