"""The percentile spectrum: latency against percentile on a log 1/(1-q) axis, the chart latency
comparisons are read from (HdrHistogram's plotter, wrk2, OpenMessaging Benchmark draw it), where
P99.99 is as far from P99.9 as P99.9 from P99 and the tail is not squeezed against the right edge.

Each point comes from the step's (or the run's) kept top values where they reach its rank, an
exact order statistic, and from its T-Digest elsewhere; the point says which (summary.json's
`spectrum`, and the hover). A percentile beyond the samples (q past 1 - 1/n: P99.999 of 10,000
events) is left out rather than read off the digest's last centroid; the max closes each line at
1/(1-q) = n. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import fastdigest
import numpy as np
import plotly.graph_objects as go

from analysis.digests import quantile, union_sketch
from analysis.pages import figure_html, plotly_text
from analysis.repeats import shown_name
from contract.figures import SpectrumPointDoc
from contract.summarydocs import StepSummaryDoc, SummaryDoc

SPECTRUM_QUANTILES = (0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 0.99999)
SPECTRUM_METRICS = ("e2e", "publish")
RUN = "run"  # the whole run's line, beside each step's (by its number)
_TICKS = {2: "50%", 10: "90%", 100: "99%", 1000: "99.9%", 10_000: "99.99%", 100_000: "99.999%"}

Sketch = tuple[fastdigest.TDigest, np.ndarray]


def spectrum_points(digest: fastdigest.TDigest, top: np.ndarray | None) -> list[SpectrumPointDoc]:
    """The latency at each of SPECTRUM_QUANTILES the samples reach, then the max."""
    n = int(digest.n_values)
    if n == 0:
        return []
    points: list[SpectrumPointDoc] = []
    for q in SPECTRUM_QUANTILES:
        if q <= 1 - 1 / n:
            value, exact = quantile(digest, top, q)
            points.append({"q": q, "ms": round(value, 4), "exact": exact, "max": False})
    highest = float(top[0]) if top is not None and len(top) else float(digest.max())
    kept = top is not None and len(top) > 0
    points.append({"q": 1 - 1 / n, "ms": round(highest, 4), "exact": kept, "max": True})
    return points


def spectrum_doc(
    sketches: Mapping[tuple[str, int], Sketch],
) -> dict[str, dict[str, list[SpectrumPointDoc]]]:
    """summary.json's `spectrum`: metric -> the run's line and each step's (by its number)."""
    found: dict[str, dict[str, list[SpectrumPointDoc]]] = {}
    for metric in SPECTRUM_METRICS:
        parts = sorted((step, s) for (m, step), s in sketches.items() if m == metric and step >= 1)
        if not parts:
            continue
        lines = {str(step): spectrum_points(*sketch) for step, sketch in parts}
        lines[RUN] = spectrum_points(*union_sketch([sketch for _, sketch in parts]))
        found[metric] = {key: points for key, points in lines.items() if points}
    return found


def spectrum_figure(
    lines: Mapping[str, Sequence[SpectrumPointDoc]],
    names: Mapping[str, str],
    title: str,
) -> go.Figure:
    """One line per key of `lines` (named by `names`), latency (ms, log) against 1/(1-q)
    (log), labelled in percentiles; each point's source on hover."""
    figure = go.Figure()
    for key, points in lines.items():
        figure.add_trace(
            go.Scatter(
                x=[1 / (1 - p["q"]) for p in points],
                y=[p["ms"] for p in points],
                name=names.get(key, key),
                mode="lines+markers",
                line={"width": 3 if key == RUN else 1.5},
                text=[_hover(p) for p in points],
                hovertemplate="%{text}: %{y:.4g} ms<extra>%{fullData.name}</extra>",
            )
        )
    figure.update_layout(
        title=title,
        xaxis={
            "type": "log",
            "title": "percentile (1/(1-q), log)",
            "tickvals": list(_TICKS),
            "ticktext": list(_TICKS.values()),
        },
        yaxis={"type": "log", "title": "latency (ms, log)"},
        legend={"orientation": "h", "y": -0.25},
    )
    return figure


def line_names(steps: Sequence[StepSummaryDoc]) -> dict[str, str]:
    """The lines' names: the run, and each step with its rate."""
    return {RUN: "the run", **{str(s["step"]): f"step {s['step']} ({s['target_rate_per_s']}/s)"
                               for s in steps}}  # fmt: skip


def _hover(point: SpectrumPointDoc) -> str:
    if point["max"]:
        return "max (exact)" if point["exact"] else "max"
    percent = f"P{point['q'] * 100:.5g}"
    return f"{percent} ({'exact' if point['exact'] else 'T-Digest'})"


def spectrum_section(summary: SummaryDoc) -> str:
    """The report's spectra, e2e then publish: the run's line and each step's."""
    spectrum = summary.get("spectrum") or {}
    names = line_names(summary["steps"])
    return "".join(
        figure_html(
            spectrum_figure(spectrum[metric], names, f"{metric} latency by percentile"),
            f"spectrum-{metric}",
        )
        for metric in SPECTRUM_METRICS
        if spectrum.get(metric)
    )


def systems_spectrum(summaries: Sequence[SummaryDoc], metric: str = "e2e") -> go.Figure | None:
    """The index's spectrum: each system's whole-run line, side by side (None: no system has
    one)."""
    lines = {
        plotly_text(shown_name(s)): points  # a name is the user's: shown, never markup
        for s in summaries
        if (points := (s.get("spectrum") or {}).get(metric, {}).get(RUN))
    }
    if not lines:
        return None
    return spectrum_figure(lines, {}, f"{metric} latency by percentile, each system's run")
