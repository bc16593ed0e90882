"""The drift rule (analysis.drift): a table of long steps, each a per-second e2e series as the job
gives it (P50 and P99 of that second's deliveries), and the verdict it must get."""

import numpy as np
import pytest

from analysis.drift import DRIFTING, STABLE, drift_of, drift_window_s, theil_sen
from analysis.verdicts import Thresholds

HOUR_S = 3600


def _seconds(rate_per_s, span_s, level_ms, seed=7, spikes=0.0, storm=None):
    """Per-second rows of a step: each second's `rate_per_s` latencies around `level_ms(t)`
    (lognormal noise), a share `spikes` of seconds with one 200 ms outlier in each tenth of
    their events, and a `storm` (first, last second) where every event is 100 ms late."""
    rng = np.random.default_rng(seed)
    rows = []
    for second in range(span_s):
        values = level_ms(second) * rng.lognormal(0.0, 0.25, rate_per_s)
        if rng.random() < spikes:
            values[::10] += 200.0
        if storm and storm[0] <= second <= storm[1]:
            values += 100.0
        p50, p99 = np.percentile(values, [50, 99])
        rows.append({"step": 1, "second": second, "n": rate_per_s, "p50_ms": p50, "p99_ms": p99})
    return rows


def _creep(start_ms, end_ms, span_s=HOUR_S):
    return lambda second: start_ms + (end_ms - start_ms) * second / span_s


CASES = {
    # the issue's case: an hour at 100/s whose median creeps from 2 to 12 ms ("holds" before)
    "median creeps 2 -> 12 ms in an hour": (_seconds(100, HOUR_S, _creep(2, 12)), DRIFTING),
    "flat noisy hour with spikes": (
        _seconds(100, HOUR_S, lambda s: 2.0, spikes=0.05),
        STABLE,
    ),
    # least squares would follow the storm's windows; Theil-Sen follows the fifty others
    "a 10-minute storm at the end": (
        _seconds(100, HOUR_S, lambda s: 2.0, storm=(3000, 3599)),
        STABLE,
    ),
    "P99 creeps, P50 does not": (
        [
            {**row, "p99_ms": row["p99_ms"] + 10.0 * row["second"] / HOUR_S}
            for row in _seconds(100, HOUR_S, lambda s: 2.0)
        ],
        DRIFTING,
    ),
    # 0.4 ms in an hour at 0.5 ms: under the 1 ms floor, a sub-millisecond system's noise
    "creeps 0.5 -> 0.9 ms (under the floor)": (
        _seconds(100, HOUR_S, _creep(0.5, 0.9)),
        STABLE,
    ),
    "falls 12 -> 2 ms (a cache warming)": (_seconds(100, HOUR_S, _creep(12, 2)), STABLE),
    # the same 0.4 ms per hour at 5 ms: nothing in an hour, 9.6 ms over a day
    "0.4 ms per hour over one hour": (_seconds(20, HOUR_S, _creep(5, 5.4)), STABLE),
    "0.4 ms per hour over a day": (
        _seconds(20, 24 * HOUR_S, _creep(5, 5 + 9.6, 24 * HOUR_S)),
        DRIFTING,
    ),
    "ten minutes, doubling": (_seconds(100, 600, _creep(4, 8, 600)), DRIFTING),
}


@pytest.mark.parametrize("name", list(CASES))
def test_drift_table(name):
    points, expected = CASES[name]
    drift = drift_of(points, Thresholds())
    assert drift is not None
    assert drift["verdict"] == expected, drift["text"]
    assert drift["text"].endswith(expected) and drift["text"].startswith("e2e P50 ")
    assert drift["windows"] >= 55


def test_the_issues_creep_reads_as_a_figure_per_hour():
    drift = drift_of(CASES["median creeps 2 -> 12 ms in an hour"][0], Thresholds())
    assert drift is not None
    assert drift["window_s"] == 60 and drift["windows"] == 60
    assert drift["ms_per_h"]["p50"] == pytest.approx(10.0, rel=0.05)
    assert drift["rise_ms"]["p50"] == pytest.approx(10.0 * 59 / 60, rel=0.05)
    assert "P50 rose 10" in drift["text"] and "ms per hour" in drift["text"]
    flat = drift_of(CASES["flat noisy hour with spikes"][0], Thresholds())
    assert flat is not None and abs(flat["ms_per_h"]["p99"]) < 0.05 * flat["allowed_rise_ms"]["p99"]


def test_falling_latency_says_it_fell():
    drift = drift_of(CASES["falls 12 -> 2 ms (a cache warming)"][0], Thresholds())
    assert drift is not None and "P50 fell 9.99 ms per hour (11.9 -> 2.09 ms)" in drift["text"]


@pytest.mark.parametrize(
    ("span_s", "judged"),
    [(599, False), (600, True), (30, False)],
)
def test_only_steps_of_ten_minutes_or_more_are_judged(span_s, judged):
    points = _seconds(10, span_s, _creep(2, 12, span_s))
    assert (drift_of(points, Thresholds()) is not None) is judged
    assert drift_of(points, Thresholds(drift_min_step_s=20)) is not None


def test_the_thresholds_move_the_verdict():
    points = CASES["creeps 0.5 -> 0.9 ms (under the floor)"][0]
    drift = drift_of(points, Thresholds(drift_min_ms=0.1))
    assert drift is not None and drift["verdict"] == DRIFTING


@pytest.mark.parametrize(
    ("span_s", "width_s"),
    [(600, 10), (3600, 60), (7200, 120), (86_400, 1200), (1_000_000, 3600), (300, 10)],
)
def test_window_width_gives_about_sixty_windows(span_s, width_s):
    assert drift_window_s(span_s) == width_s


def test_theil_sen_ignores_a_third_of_outliers_and_needs_three_points():
    x = np.arange(30, dtype=float)
    y = 2.0 * x + 1.0
    y[::3] = 1000.0
    slope, intercept = theil_sen(x, y)
    assert slope == pytest.approx(2.0) and intercept == pytest.approx(1.0)
    assert theil_sen(x[:2], y[:2]) is None
    assert theil_sen(np.full(5, 3.0), np.arange(5.0)) is None


def test_a_thin_last_window_and_missing_seconds_are_left_out():
    points = _seconds(10, 660, lambda s: 2.0)
    points = [p for p in points if not 300 <= p["second"] < 320] + [
        {"step": 1, "second": 700, "n": 1, "p50_ms": 500.0, "p99_ms": 500.0}
    ]
    drift = drift_of(points, Thresholds())
    assert drift is not None and drift["verdict"] == STABLE
    assert drift["windows"] == 64  # 71 of 10 s: 6 empty, the one at 700 s thin
