"""Latency per window over a run (pure): the per-second digests of digests.parquet merged into
windows of a width chosen from the run's length, each with its P50, P99, P99.99, maximum and
sample count (tests/analysis/test_windows.py holds them against exact percentiles).

The cumulative lines (analysis.digests.cumulative_line) are the 2019 view: at each second, the
quantile of everything so far, so after an hour a new spike moves them by nothing. A window's
figures are its own seconds' only: drift and a late P99.99 show where they happen.

A window is merged from its seconds' centroids rather than from digests: pooled and sorted by
mean, they are a digest of the window whose rank error is that of its seconds' digests (every
centroid keeps its weight and sits where it sat), and whose quantiles are numpy's linear
percentiles exactly when every centroid is a single value (a second of up to ~3,000 events,
the digests' size). Pooling is bounded: a window whose pooled centroids pass `COMPRESS_AT` is
compressed to about `KEEP_CENTROIDS` by the t-digest's own scale, fine in the tails (the top
10^-4 of a window keeps about 30 centroids), so a day's windows fit in tens of MB whatever
order the seconds come in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# At least this many windows over a run, so drift over an hour or a day is drawn, not smoothed.
WINDOWS_MIN = 100
# Widths people read without arithmetic; a second is the digests' own resolution.
WIDTHS_S = (1, 2, 3, 5, 10, 15, 20, 30, 60, 120, 180, 300, 600, 900, 1200, 1800, 3600)
WINDOW_QUANTILES = {"p50": 0.5, "p99": 0.99, "p9999": 0.9999}
# Under this many samples a window's P99.99 is its maximum (analysis.digests.P9999_MIN_SAMPLES).
P9999_MIN_SAMPLES = 10_000
KEEP_CENTROIDS = 5000
COMPRESS_AT = 20_000


def window_width_s(span_s: float) -> int:
    """The widest listed width that still cuts `span_s` into `WINDOWS_MIN` windows (a second
    for a run too short for that many)."""
    fitting = [w for w in WIDTHS_S if span_s / w >= WINDOWS_MIN]
    return fitting[-1] if fitting else WIDTHS_S[0]


def quantiles(
    means: np.ndarray, weights: np.ndarray, low: float, high: float, qs: Sequence[float]
) -> list[float]:
    """Quantiles of pooled centroids (any order) whose samples lie in [low, high]: a centroid
    of weight w stands for the ranks it covers, its mean at their middle; between centroids,
    and from the extremes to the outer centroids, linear. Singletons give numpy's linear
    percentiles exactly."""
    order = np.argsort(means, kind="stable")
    means, weights = means[order], weights[order]
    n = float(weights.sum())
    ranks = np.cumsum(weights) - weights + (weights - 1) / 2  # 0-based middle rank
    xs, ys = [ranks], [means]
    if ranks[0] > 0:
        xs.insert(0, np.array([0.0]))
        ys.insert(0, np.array([low]))
    if ranks[-1] < n - 1:
        xs.append(np.array([n - 1]))
        ys.append(np.array([high]))
    x, y = np.concatenate(xs), np.concatenate(ys)
    return [float(np.interp(q * (n - 1), x, y)) for q in qs]


def compress(means: np.ndarray, weights: np.ndarray, keep: int = KEEP_CENTROIDS) -> tuple:
    """About `keep` centroids from many: neighbours by mean merged within one unit of the
    t-digest's k1 scale (k = keep x (asin(2q - 1) / pi + 1/2)), whose units are narrow at both
    ends, so the tails stay nearly exact. Returns (means, weights)."""
    order = np.argsort(means, kind="stable")
    means, weights = means[order], weights[order]
    n = weights.sum()
    middle_q = (np.cumsum(weights) - weights / 2) / n
    k = np.floor(keep * (np.arcsin(2 * middle_q - 1) / np.pi + 0.5))
    starts = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
    merged_weights = np.add.reduceat(weights, starts)
    merged_means = np.add.reduceat(means * weights, starts) / merged_weights
    return merged_means, merged_weights


@dataclass
class _Window:
    means: list[np.ndarray] = field(default_factory=list)
    weights: list[np.ndarray] = field(default_factory=list)
    pooled: int = 0
    n: int = 0
    low: float = np.inf
    high: float = -np.inf

    def add(self, means: np.ndarray, weights: np.ndarray, n: int, low: float, high: float) -> None:
        self.means.append(means)
        self.weights.append(weights)
        self.pooled += len(means)
        self.n += n
        self.low, self.high = min(self.low, low), max(self.high, high)
        if self.pooled > COMPRESS_AT:
            kept = compress(np.concatenate(self.means), np.concatenate(self.weights))
            self.means, self.weights = [kept[0]], [kept[1]]
            self.pooled = len(kept[0])


@dataclass
class WindowMerger:
    """Per-second digests in (any order, any number of batches), windows out."""

    width_s: int
    _windows: dict[int, _Window] = field(default_factory=dict)

    def add(
        self,
        seconds: np.ndarray,
        counts: np.ndarray,
        lows: np.ndarray,
        highs: np.ndarray,
        offsets: np.ndarray,
        means: np.ndarray,
        weights: np.ndarray,
    ) -> None:
        """A batch of per-second rows: row i's centroids are means/weights[offsets[i]:
        offsets[i + 1]] (an Arrow list column's layout)."""
        index = np.asarray(seconds) // self.width_s
        of_centroid = np.repeat(index, np.diff(offsets))
        for window in np.unique(index):
            rows = index == window
            pick = of_centroid == window
            self._windows.setdefault(int(window), _Window()).add(
                means[pick],
                weights[pick],
                int(counts[rows].sum()),
                lows[rows].min(),
                highs[rows].max(),
            )

    def windows(self) -> list[dict]:
        """One row per window with samples, in time order: `start_s`, `width_s`, `n`,
        `p50_ms`, `p99_ms`, `p9999_ms`, `max_ms` and `p9999_is_max` (fewer than 10^4 samples:
        P99.99 is the maximum)."""
        rows = []
        for number, window in sorted(self._windows.items()):
            if window.n == 0 or window.pooled == 0:
                continue
            means, weights = np.concatenate(window.means), np.concatenate(window.weights)
            figures = quantiles(
                means, weights, window.low, window.high, list(WINDOW_QUANTILES.values())
            )
            is_max = window.n < P9999_MIN_SAMPLES
            rows.append(
                {
                    "start_s": number * self.width_s,
                    "width_s": self.width_s,
                    "n": window.n,
                    "p50_ms": figures[0],
                    "p99_ms": figures[1],
                    "p9999_ms": window.high if is_max else figures[2],
                    "max_ms": window.high,
                    "p9999_is_max": is_max,
                }
            )
        return rows
