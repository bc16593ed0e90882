"""Plots that stay light over a day (pure): a line of 86,400 seconds becomes at most
`PLOT_POINTS` points that keep its envelope, so a 24-hour run's report stays a few MB and draws
in seconds, and a short run's lines are drawn whole.

docs/design.md §4: never hide oscillation behind averaging. So a bucket of seconds is never
averaged: it keeps the points where the line was lowest and highest in it, in time order (what a
screen's column of pixels would show anyway), and a bucket with no value keeps one empty point,
so a gap stays a gap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# Per line: 2,000 buckets of a low and a high point, about a screen's width twice over.
PLOT_POINTS = 4000


def envelope(x: np.ndarray, y: np.ndarray, points: int = PLOT_POINTS) -> np.ndarray:
    """Indices into (x, y) (x ascending; y may hold NaN for no value) that keep each bucket's
    lowest and highest point, and the first and last: every index when there are no more than
    `points`."""
    count = len(x)
    if count <= points:
        return np.arange(count)
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    buckets = points // 2
    width = (x[-1] - x[0]) / buckets or 1.0
    bucket = np.minimum(((x - x[0]) // width).astype(np.int64), buckets - 1)
    missing = np.isnan(y)
    lowest = np.lexsort((np.where(missing, np.inf, y), bucket))
    highest = np.lexsort((np.where(missing, -np.inf, y), bucket))
    sorted_buckets = bucket[lowest]
    firsts = np.flatnonzero(np.concatenate([[True], sorted_buckets[1:] != sorted_buckets[:-1]]))
    lasts = np.append(firsts[1:] - 1, count - 1)
    keep = np.concatenate([lowest[firsts], highest[lasts], [0, count - 1]])
    return np.unique(keep)


def thinned(
    x: Sequence[Any] | np.ndarray, *ys: Sequence[Any] | np.ndarray, by: int = 0
) -> list[np.ndarray]:
    """`x` and each of `ys` as float arrays (None as NaN), kept at the envelope of `ys[by]`."""
    arrays = [np.array(x, dtype=float)] + [np.array(y, dtype=float) for y in ys]
    keep = envelope(arrays[0], arrays[1 + by])
    return [a[keep] for a in arrays]
