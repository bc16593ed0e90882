"""Plots thinned to their envelope (analysis.downsample): short lines whole, long ones at most
PLOT_POINTS points, every bucket's low and high kept, gaps kept."""

import numpy as np

from analysis.downsample import PLOT_POINTS, envelope, thinned
from analysis.insight import Series
from analysis.insight_figures import metric_plot


def test_a_short_line_is_drawn_whole():
    x = np.arange(PLOT_POINTS)
    assert (envelope(x, x * 2.0) == x).all()


def test_a_days_line_keeps_every_buckets_low_and_high_and_its_ends():
    seconds = np.arange(86_400)
    # an oscillation of 7 s period: averaging would flatten it, the envelope keeps 0 and 100
    y = np.where(seconds % 7 == 0, 100.0, 0.0)
    y[50_000] = 5000.0  # one second's burst
    keep = envelope(seconds, y)
    assert len(keep) <= PLOT_POINTS + 2
    assert keep[0] == 0 and keep[-1] == seconds[-1] and (np.diff(keep) > 0).all()
    assert 50_000 in keep
    per_bucket = seconds[-1] / (PLOT_POINTS // 2)
    kept = y[keep]
    for bucket in range(0, PLOT_POINTS // 2, 97):
        mine = (seconds[keep] >= bucket * per_bucket) & (seconds[keep] < (bucket + 1) * per_bucket)
        assert kept[mine].min() == 0.0 and kept[mine].max() >= 100.0


def test_a_gap_stays_a_gap():
    x, y = thinned(np.arange(20_000), [None if 5000 <= s < 9000 else 1.0 for s in range(20_000)])
    assert np.isnan(y).any() and np.nanmax(y) == 1.0
    inside = (x >= 5000) & (x < 9000)
    assert inside.any() and np.isnan(y[inside]).all()


def test_a_day_of_scrapes_is_drawn_as_its_envelope_and_a_short_one_whole():
    day = Series("queue_depth", "gauge", "api", "", "value", [float(s) for s in range(86_400)],
                 [float(s % 60) for s in range(86_400)])  # fmt: skip
    figure = metric_plot([day], [], {}, None)
    drawn = figure.data[0]
    assert len(drawn.x) <= PLOT_POINTS + 2 and min(drawn.y) == 0 and max(drawn.y) == 59
    short = Series("queue_depth", "gauge", "api", "", "value", [0.0, 1.0], [None, 5.0])
    assert list(metric_plot([short], [], {}, None).data[0].y) == [None, 5.0]
