"""The drift rule, once, beside the step rule (analysis.steprule): does a long step's end-to-end
latency creep over its hours? Pure and table-tested (tests/analysis/test_drift.py).

The step rule's rise (analysis.verdicts) is sized for 30-second steps of a staircase: a queue
growing without bound shows there as tens of milliseconds in seconds, and its 20 ms floor keeps
a 30-second step's noise from reading as growth. Over an hour that floor hides what soaks are
run for: a median creeping from 2 to 12 ms (a leak, a growing index, a compaction falling
behind) rose 10 ms, under the floor, and the step "held". Here a long step is read so:

1. its per-second e2e P50 and P99 (from each second's digest) are cut into windows of a width
   chosen from the step's length (about `DRIFT_WINDOWS` of them, never under 10 s);
2. each window is summarised by the median of its seconds' figures: a spike that lasts a few
   seconds moves no window, a creep moves them all;
3. the trend is the Theil-Sen slope of the window medians over time (the median of the slopes
   between every pair of windows): a third of the windows can be outliers (a GC storm, a
   rebalance) and the slope still follows the rest, where least squares would follow them;
4. the fitted rise over the step (slope x the time the windows span) is compared with the
   step's own level (the median of its window medians): *drifting* when P50 or P99 rose by
   more than max(`drift_min_ms`, `drift_ratio` x that level), else *stable*. A falling latency
   (a cache warming) is stable: it is not what a soak hunts.

The thresholds live with the others in `analysis.verdicts.Thresholds` (overridable, printed in
summary.json), where their sizes are justified.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from analysis.verdicts import Thresholds
from contract.summarydocs import DriftDoc

STABLE = "stable"
DRIFTING = "drifting"
# About this many windows over a step: each window's median then rests on enough seconds (60
# of them in an hour) and the slope on enough windows (1,770 pairs) to be steady.
DRIFT_WINDOWS = 60
# Window widths people read without arithmetic; the smallest is 10 s so that a window's median
# stands on ten seconds at least.
DRIFT_WIDTHS_S = (10, 15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600)
# A window counts when at least this share of its seconds had deliveries: a step's last,
# partial window (or one in an outage) would otherwise stand on a second or two.
WINDOW_MIN_SHARE = 0.5
S_PER_H = 3600.0


def drift_window_s(span_s: float) -> int:
    """The widest listed width that still cuts `span_s` into `DRIFT_WINDOWS` windows."""
    fitting = [w for w in DRIFT_WIDTHS_S if span_s / w >= DRIFT_WINDOWS]
    return fitting[-1] if fitting else DRIFT_WIDTHS_S[0]


def window_medians(
    points: Sequence[Mapping[str, float]], width_s: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(window centres in seconds, median P50 per window, median P99 per window) of a step's
    per-second rows, windows counted from its first second; thin windows left out."""
    seconds = np.array([p["second"] for p in points], dtype=float)
    p50 = np.array([_number(p.get("p50_ms")) for p in points])
    p99 = np.array([_number(p.get("p99_ms")) for p in points])
    index = ((seconds - seconds.min()) // width_s).astype(int)
    centres, medians50, medians99 = [], [], []
    for window in np.unique(index):
        mine = index == window
        if mine.sum() < WINDOW_MIN_SHARE * width_s:
            continue
        centres.append(seconds.min() + (window + 0.5) * width_s)
        medians50.append(float(np.nanmedian(p50[mine])) if np.isfinite(p50[mine]).any() else np.nan)
        medians99.append(float(np.nanmedian(p99[mine])) if np.isfinite(p99[mine]).any() else np.nan)
    return np.array(centres), np.array(medians50), np.array(medians99)


def theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """(slope, intercept) of the Theil-Sen line through the finite points: the median of the
    pairwise slopes, and the median of y - slope x. None under 3 points."""
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3:
        return None
    first, second = np.triu_indices(len(x), k=1)
    run = x[second] - x[first]
    usable = run != 0
    if not usable.any():
        return None
    slope = float(np.median((y[second] - y[first])[usable] / run[usable]))
    return slope, float(np.median(y - slope * x))


def drift_of(points: Sequence[Mapping[str, float]], t: Thresholds) -> DriftDoc | None:
    """A step's drift from its per-second e2e rows (`{"second", "p50_ms", "p99_ms", ...}`), or
    None when the seconds it covers are fewer than `t.drift_min_step_s` (or too few windows)."""
    if not points:
        return None
    seconds = [p["second"] for p in points]
    span_s = max(seconds) - min(seconds) + 1
    if span_s < t.drift_min_step_s:
        return None
    width_s = drift_window_s(span_s)
    centres, p50, p99 = window_medians(points, width_s)
    fit50, fit99 = theil_sen(centres, p50), theil_sen(centres, p99)
    if fit50 is None or fit99 is None:
        return None
    fits = (fit50, fit99)
    covered_s = float(centres.max() - centres.min())
    rises = [slope * covered_s for slope, _ in fits]
    levels = [float(np.nanmedian(p50)), float(np.nanmedian(p99))]
    allowed = [max(t.drift_min_ms, t.drift_ratio * level) for level in levels]
    drifting = any(rise > limit for rise, limit in zip(rises, allowed, strict=True))
    doc: DriftDoc = {
        "window_s": width_s,
        "windows": len(centres),
        "ms_per_h": {"p50": round(fit50[0] * S_PER_H, 4), "p99": round(fit99[0] * S_PER_H, 4)},
        "rise_ms": {"p50": round(rises[0], 4), "p99": round(rises[1], 4)},
        "allowed_rise_ms": {"p50": round(allowed[0], 4), "p99": round(allowed[1], 4)},
        "verdict": DRIFTING if drifting else STABLE,
        "text": "",
    }
    doc["text"] = drift_text(doc, [(intercept, slope) for slope, intercept in fits], centres)
    return doc


def drift_text(doc: DriftDoc, lines: Sequence[tuple[float, float]], centres: np.ndarray) -> str:
    """ "e2e P50 rose 10.1 ms per hour (2.04 -> 12.1 ms), P99 rose 10.3 ms per hour: drifting"."""
    parts = []
    for name, (intercept, slope) in zip(("P50", "P99"), lines, strict=True):
        per_h = slope * S_PER_H
        verb = "rose" if per_h >= 0 else "fell"
        start, end = (intercept + slope * c for c in (centres.min(), centres.max()))
        parts.append(
            f"{name} {verb} {_figure(abs(per_h))} ms per hour "
            f"({_figure(start)} -> {_figure(end)} ms)"
        )
    return (
        f"e2e {', '.join(parts)} over {len(centres)} windows of {doc['window_s']} s: "
        + (doc["verdict"])
    )


def _figure(value: float) -> str:
    """3 significant digits, as the report's latencies read (analysis.summary.significant)."""
    return f"{value:.3g}"


def _number(value: float | None) -> float:
    return np.nan if value is None else float(value)
