"""How sure a tail figure is, and whether two runs' differ (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.confidence import (
    BETTER,
    SAME,
    WORSE,
    change,
    intervals,
    quantile_interval,
    rank_interval,
)
from analysis.digests import digest_of


@pytest.mark.parametrize(
    ("n", "q", "ranks"),
    [
        (10_000, 0.99, (9880, 9921)),  # 9,900 -/+ 1.96 x 9.95
        (1_000_000, 0.9999, (999_880, 999_921)),  # 999,900 -/+ 1.96 x 9.9995
        (20_000, 0.9999, (19_995, None)),  # past the samples: no upper bound
        (10, 0.5, (1, 10)),  # 5 -/+ 1.96 x 1.58: the whole sample
    ],
)
def test_the_ranks_that_bound_a_quantile(n, q, ranks):
    assert rank_interval(n, q) == ranks


def test_the_interval_holds_the_true_quantile_about_95_times_in_100():
    # exponential latencies: the true P99 is 5 x ln(100); 400 runs of 3,000 samples
    rng = np.random.default_rng(11)
    truth = 5.0 * np.log(100)
    low, high = rank_interval(3000, 0.99)
    inside = 0
    for _ in range(400):
        ordered = np.sort(rng.exponential(5.0, 3000))
        inside += ordered[low - 1] <= truth <= ordered[high - 1]
    assert 0.90 <= inside / 400 <= 0.99, inside


def _sketch(values, kept=1024):
    values = np.asarray(values, dtype=float)
    return digest_of(values), np.sort(values)[::-1][:kept]


def test_an_interval_is_exact_where_the_kept_values_reach_and_open_past_the_samples():
    values = np.random.default_rng(5).exponential(5.0, 20_000)
    ordered = np.sort(values)
    p99 = quantile_interval(*_sketch(values), 0.99)
    low, high = rank_interval(20_000, 0.99)
    assert p99["exact"] and p99["n"] == 20_000
    assert (p99["lo_ms"], p99["hi_ms"]) == (
        pytest.approx(ordered[low - 1], abs=1e-4), pytest.approx(ordered[high - 1], abs=1e-4)
    )  # fmt: skip
    p9999 = quantile_interval(*_sketch(values), 0.9999)
    assert p9999["hi_ms"] is None and p9999["lo_ms"] <= ordered[-1]
    # without kept values, the digest's estimates at those ranks
    assert not quantile_interval(*_sketch(values, kept=0), 0.99)["exact"]
    assert set(intervals(*_sketch(values))) == {"p50", "p99", "p9999"}
    assert set(intervals(*_sketch(values[:5000]))) == {"p50", "p99"}  # P99.99 is the max there


def test_the_median_interval_is_the_digests_estimate_at_its_ranks():
    """Below the kept top values, P50's ends are the T-Digest's (compare calls each step's P50
    from them): around the sample's median, as wide as its ranks allow."""
    values = np.random.default_rng(7).lognormal(1.0, 0.6, 60_000)
    ordered = np.sort(values)
    p50 = quantile_interval(*_sketch(values), 0.5)
    low, high = rank_interval(60_000, 0.5)
    assert not p50["exact"]
    assert p50["lo_ms"] < np.median(values) < p50["hi_ms"]
    # each end within 0.2 % of the order statistic at its rank (the digest's resolution there)
    assert p50["lo_ms"] == pytest.approx(ordered[low - 1], rel=2e-3)
    assert p50["hi_ms"] == pytest.approx(ordered[high - 1], rel=2e-3)


def _interval(lo, hi):
    return {"lo_ms": lo, "hi_ms": hi, "exact": True, "n": 1000}


@pytest.mark.parametrize(
    ("before", "after", "tolerance", "call"),
    [
        (_interval(10, 12), _interval(11, 13), 0.0, SAME),  # overlapping
        (_interval(10, 12), _interval(13, 15), 0.0, WORSE),
        (_interval(10, 12), _interval(7, 9), 0.0, BETTER),
        (_interval(10, 12), _interval(13, 15), 0.1, SAME),  # within 10 % of 12
        (_interval(10, None), _interval(50, 60), 0.0, SAME),  # no upper bound: never worse
        (_interval(10, 12), _interval(13, None), 0.0, WORSE),  # at least 13: above 12
        (None, _interval(13, 15), 0.0, SAME),
    ],
)
def test_a_change_is_called_only_when_the_intervals_part(before, after, tolerance, call):
    assert change(before, after, tolerance) == call


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_two_runs_of_the_same_system_are_indistinguishable(seed):
    rng = np.random.default_rng(seed)
    first, second = (rng.lognormal(1.0, 0.6, 50_000) for _ in range(2))
    for name in ("p50", "p99", "p9999"):
        a, b = intervals(*_sketch(first))[name], intervals(*_sketch(second))[name]
        assert change(a, b) == SAME, (name, a, b)
    # and a system twice as slow is called worse
    slower = intervals(*_sketch(2 * rng.lognormal(1.0, 0.6, 50_000)))
    for name in ("p50", "p99"):
        assert change(intervals(*_sketch(first))[name], slower[name]) == WORSE
