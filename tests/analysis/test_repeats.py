"""Repeats of a pace: each figure's median and spread, and compare's calls from the repeats'
ranges (analysis.repeats). Pure: rows and summaries written here."""

from __future__ import annotations

import html

import pytest

from analysis.changes import BREAKING, SUSTAINABLE, capacity_ranges, capacity_texts
from analysis.comparison import regressions, run_labels, with_changes
from analysis.confidence import BETTER, SAME, WORSE
from analysis.repeats import (
    merged_rows,
    merged_steps,
    repeat_table,
    repeats_html,
    shown_name,
    spread,
    spread_text,
)

INF = float("inf")


@pytest.mark.parametrize(
    ("values", "absent_rank", "expected"),
    [
        ([], None, None),
        ([None, None], None, None),
        ([5], None, {"median": 5.0, "lo": 5.0, "hi": 5.0, "n": 1, "of": 1}),
        ([3, 1, 2], None, {"median": 2.0, "lo": 1.0, "hi": 3.0, "n": 3, "of": 3}),
        # the middle repeat's own figure: the lower of two, never a figure no repeat had
        ([4, None, 1, 2, 3], None, {"median": 2.0, "lo": 1.0, "hi": 4.0, "n": 4, "of": 5}),
        ([1500, 2000], None, {"median": 1500.0, "lo": 1500.0, "hi": 2000.0, "n": 2, "of": 2}),
        # a breaking point of None: held through the pace, above every rate
        ([None, 2000, None], INF, {"median": None, "lo": 2000.0, "hi": 2000.0, "n": 1, "of": 3}),
        ([None, 2000, 1500], INF, {"median": 2000.0, "lo": 1500.0, "hi": 2000.0, "n": 2, "of": 3}),
        # a max sustainable rate of None: no step held, below every rate
        ([None, 1000, None], -INF, {"median": None, "lo": 1000.0, "hi": 1000.0, "n": 1, "of": 3}),
        ([None], -INF, {"median": None, "lo": None, "hi": None, "n": 0, "of": 1}),
    ],
)
def test_spread_is_the_middle_repeat_and_its_range(values, absent_rank, expected):
    assert spread(values, absent_rank) == expected


@pytest.mark.parametrize(
    ("values", "absent_rank", "unit", "absent", "text"),
    [
        ([11.7, 42.8, 14.1], None, " ms", "none", "14.1 ms (11.7-42.8)"),
        ([None, 2000, None], INF, "/s", "held", "held (2000-2000; held in 2 of 3)"),
        ([2000, 2000, None], INF, "/s", "held", "2000/s (2000-2000; held in 1 of 3)"),
        ([None], -INF, "/s", "none held", "none held"),
        ([None, None], INF, "/s", "held", "held"),
        ([7.68671, 5.66312, 7.73641], None, " ms", "none", "7.687 ms (5.663-7.736)"),
    ],
)
def test_spread_text(values, absent_rank, unit, absent, text):
    assert spread_text(spread(values, absent_rank), unit, absent) == text
    assert spread_text(None) == "-"


def _summary(sut, index=None, of=3, p99=10.0, point=None, sustainable=1000, lost=0, failed=()):
    doc = {
        "instrument_failures": list(failed),
        "sut": sut,
        "latency_ms": {"e2e": {"p99": p99, "p9999": p99 * 2}},
        "counts": {"lost": lost, "send_failures": 0},
        "breaking_point_per_s": point,
        "max_sustainable_rate_per_s": sustainable,
    }
    if index is not None:
        doc["repeat"] = {"index": index, "of": of}
    return doc


def test_the_index_names_a_repeat_and_groups_only_repeated_systems():
    summaries = [
        _summary("direct"),
        _summary("broker-imc", 2, of=4, p99=30.0, lost=2),
        _summary("broker-imc", 1, of=4, p99=12.0, point=2000),
        _summary("broker-imc", 3, of=4, p99=14.0),
        _summary("broker-imc", 4, of=4, p99=900.0, failed=["the receiver died"]),
    ]
    assert shown_name(summaries[0]) == "direct"
    assert shown_name(summaries[1]) == "broker-imc, repeat 2 of 4"
    (row,) = repeat_table(summaries)
    assert row["sut"] == "broker-imc" and row["repeats"] == 4 and row["judged"] == 3
    assert row["e2e_p99_ms"] == {"median": 14.0, "lo": 12.0, "hi": 30.0, "n": 3, "of": 3}
    assert row["breaking_point_per_s"]["median"] is None  # two of three held
    assert row["lost"]["hi"] == 2.0
    page = repeats_html(summaries, lambda v: html.escape(str(v)))
    assert "14 ms (12-30)" in page and "held (2000-2000; held in 2 of 3)" in page
    assert "4 (1 left out: instrument failed)" in page
    assert repeats_html(summaries[:1], str) == ""


def _row(run, sut, p99, p9999=None, n=10_000, is_max=False, lost=0, of=2, failed=(), held=1000):
    """A repeat's comparison row: one step at 1000/s, its figures those of the whole run."""
    p9999 = p9999 if p9999 is not None else p99 * 2
    ci95 = {"p99": {"lo_ms": p99 * 0.99, "hi_ms": p99 * 1.01, "exact": True, "n": n}}
    step = {
        "step": 1,
        "rate_per_s": 1000,
        "verdict": "holds",
        "judged": True,
        "n": n,
        "is_max": is_max,
        "ms": {"p50": p99 / 4, "p99": p99, "p9999": p9999},
        "ci95": ci95,
    }
    return {
        "repeat": {"index": 1, "of": of},
        "run": run,
        "sut": sut,
        "verdict": f"held every judged step; max sustainable {held}/s",
        "searched": False,
        "probes": [],
        "steps": [step],
        "p99_e2e_ms": p99,
        "p9999_e2e_ms": p9999,
        "p9999_is_max": is_max,
        "e2e_n": n,
        "breaking_point_per_s": None,
        "max_sustainable_rate_per_s": held,
        "capacity": capacity_ranges(None, held),
        "capacity_text": capacity_texts(None, held),
        "send_failures": 0,
        "lost": lost,
        "instrument_failures": list(failed),
        "ci95": ci95,
    }


def _group(run, values, **kw):
    return [_row(run, "broker-imc", v, **kw) for v in values]


def _calls(a_values, b_values, tolerance=0.0, **kw):
    rows = with_changes(merged_rows(_group("a", a_values, **kw) + _group("b", b_values, **kw)),
                        tolerance)  # fmt: skip
    assert [r["run"] for r in rows] == ["a", "b"]
    (step,) = rows[1]["compared"].steps
    return {c.name: c.call for c in step.latencies}


@pytest.mark.parametrize(
    ("a", "b", "tolerance", "p99"),
    [
        # the same system's repeats, twice: never a change
        ([11.7, 42.8, 14.1], [11.7, 42.8, 14.1], 0.0, SAME),
        ([10.0, 10.0], [10.0, 10.0], 0.0, SAME),
        # each run's intervals would part (10 vs 14 ms, ~1 % wide); the repeats' ranges overlap
        ([10.0, 15.0, 12.0], [14.0, 13.0, 16.0], 0.0, SAME),
        ([10.0, 11.0, 12.0], [14.0, 13.0, 16.0], 0.0, WORSE),
        ([14.0, 13.0, 16.0], [10.0, 11.0, 12.0], 0.0, BETTER),
        # apart by less than the tolerance
        ([10.0, 11.0, 12.0], [12.5, 13.0, 13.5], 0.1, SAME),
    ],
)
def test_compare_calls_repeats_from_their_ranges(a, b, tolerance, p99):
    assert _calls(a, b, tolerance)["p99"] == p99


def test_a_merged_group_is_one_row_of_its_middle_repeat_and_ranges():
    (row,) = merged_rows(_group("a", [12.0, 30.0, 14.0], lost=1, of=3))
    assert row["repeats"] == row["judged"] == 3 and row["lost"] == 1 and row["e2e_n"] == 30_000
    assert row["p99_e2e_ms"] == 14.0  # the middle repeat's row stands for the group
    assert row["ci95"]["p99"] == {"lo_ms": 12.0, "hi_ms": 30.0, "exact": True, "n": 30_000}
    assert row["ci95"]["p9999"]["hi_ms"] == 60.0


def test_a_repeat_whose_instruments_failed_is_left_out_and_all_failed_is_failed():
    rows = [*_group("a", [12.0, 14.0], of=3), _row("a", "broker-imc", 900.0, of=3, failed=["x"])]
    (row,) = merged_rows(rows)
    assert row["judged"] == 2 and row["ci95"]["p99"]["hi_ms"] == 14.0
    (failed,) = merged_rows([_row("a", "s", 1.0, failed=["x"]), _row("a", "s", 2.0, failed=["y"])])
    assert failed["judged"] == 0 and failed["instrument_failures"] == ["x"]


def test_a_system_run_once_and_repeated_in_one_run_stays_two_rows():
    once = {**_row("a", "broker-imc", 10.0), "repeat": None}
    rows = merged_rows([once, *_group("a", [11.0, 12.0])])
    assert [r.get("repeats") for r in rows] == [None, 2]


def test_no_p9999_interval_where_a_repeat_had_it_as_its_max():
    (row,) = merged_rows(_group("a", [12.0, 30.0], is_max=True))
    assert set(row["ci95"]) == {"p99"}


def test_rows_of_systems_run_once_pass_unchanged_and_a_regression_is_named():
    once = [_row("a", "direct", 5.0), _row("b", "direct", 50.0)]
    assert merged_rows(once) == once
    rows = with_changes(merged_rows(once + _group("a", [10, 11]) + _group("b", [20, 21])))
    assert regressions(rows) == [
        # its P99.99 has no interval here: not called
        "direct in b: step 1 (1000/s) e2e P99 5.00 ms -> 50.0 ms, +45.0 ms (+44.5 ms to "
        "+45.5 ms): worse than in a",
        # the repeats' ranges part on each figure: 2.5-2.75 against 5-5.25 ms, ...
        "broker-imc in b: step 1 (1000/s) e2e P50 2.50 ms -> 5.00 ms, +2.50 ms (+2.25 ms to "
        "+2.75 ms): worse than in a",
        "broker-imc in b: step 1 (1000/s) e2e P99 10.0 ms -> 20.0 ms, +10.0 ms (+9.00 ms to "
        "+11.0 ms): worse than in a",
        "broker-imc in b: step 1 (1000/s) e2e P99.99 20.0 ms -> 40.0 ms, +20.0 ms (+18.0 ms "
        "to +22.0 ms): worse than in a",
    ]


def _steps(*figures, rates=(1000, 100, 1100), verdict="holds"):
    """A repeat's steps: (p50, p99) each, at `rates`."""
    return [
        {
            "step": number,
            "rate_per_s": rate,
            "verdict": verdict,
            "judged": verdict in ("holds", "breaks"),
            "n": 1000,
            "is_max": True,
            "ms": {"p50": p50, "p99": p99, "p9999": p99 * 2},
            "ci95": {},
        }
        for number, (rate, (p50, p99)) in enumerate(zip(rates, figures, strict=False), 1)
    ]


def test_repeats_steps_merge_into_middle_figures_and_the_repeats_ranges():
    merged = merged_steps(
        [
            _steps((1.0, 10.0), (0.5, 3.0), (2.0, 30.0)),
            _steps((1.2, 14.0), (0.4, 3.3), rates=(1000, 100)),  # it never reached 1100/s
            _steps((1.1, 12.0), (0.6, 2.7), (2.5, 90.0)),
        ]
    )
    assert [(s["step"], s["rate_per_s"]) for s in merged] == [(1, 1000), (2, 100)]
    first = merged[0]
    assert first["ms"] == {"p50": 1.1, "p99": 12.0, "p9999": 24.0}
    assert first["ci95"]["p99"] == {"lo_ms": 10.0, "hi_ms": 14.0, "exact": True, "n": 3000}
    # P99.99 of fewer than 10^4 events each is their maximum: no interval from them
    assert set(first["ci95"]) == {"p50", "p99"} and first["judged"]
    mixed = merged_steps([_steps((1.0, 10.0)), _steps((1.0, 10.0), verdict="sender-limited")])
    assert mixed[0]["verdict"] == "holds/sender-limited" and not mixed[0]["judged"]
    assert merged_steps([]) == []


def test_repeats_capacity_is_the_middle_repeats_with_their_range():
    (row,) = merged_rows([_row("a", "s", 10.0, held=h, of=3) for h in (1000, 1200, 1100)])
    assert row["capacity"] == {BREAKING: (1001, INF), SUSTAINABLE: (1000, 1200)}
    assert row["capacity_text"] == {BREAKING: "held", SUSTAINABLE: "1100/s (1000-1200)"}


def test_runs_of_one_name_are_told_apart_by_the_directory_above(tmp_path):
    runs = [tmp_path / "ci" / "run-1-p", tmp_path / "new" / "run-1-p", tmp_path / "run-2-p"]
    assert run_labels(runs) == ["ci/run-1-p", "new/run-1-p", "run-2-p"]
