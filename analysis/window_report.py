"""The report's view of a run over time (analysis.report): latency per window beside the
cumulative lines, and each long step's drift verdict.

The windows are merged from digests.parquet's per-second digests (analysis.windows), read a
batch at a time for one metric: what is held is the windows, never a run's seconds.
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from analysis.downsample import thinned
from analysis.pages import figure_html
from analysis.summary import latency_text
from analysis.windows import WindowMerger, window_width_s
from contract.layout import SutDir
from contract.summarydocs import StepSummaryDoc

Row = dict[str, Any]
# The metrics drawn per window: those of the cumulative lines (analysis.digests).
WINDOW_METRICS = (("e2e", "end-to-end"), ("publish", "publish"))
WINDOW_LINES = (
    ("p50_ms", "P50", "#2ca02c"),
    ("p99_ms", "P99", "#1f77b4"),
    ("p9999_ms", "P99.99", "#d62728"),
)
BATCH_ROWS = 2048  # seconds per batch read: a few MB of centroids at 1,000 events/s


def digest_batches(path: Path, metric: str) -> Iterator[pa.RecordBatch]:
    """digests.parquet's per-second rows of `metric` (a file or a directory of files), a batch
    at a time; none when it is missing (a run analysed before it was kept)."""
    if not path.exists():
        return
    dataset = ds.dataset(path, format="parquet")
    wanted = (ds.field("metric") == metric) & ds.field("second").is_valid()
    columns = ["second", "n", "min_ms", "max_ms", "centroids"]
    yield from dataset.to_batches(columns=columns, filter=wanted, batch_size=BATCH_ROWS)


def read_windows(path: Path, metric: str, width_s: int) -> list[Row]:
    """`metric`'s latency per window of `width_s` (analysis.windows.WindowMerger.windows)."""
    merger = WindowMerger(width_s)
    for batch in digest_batches(path, metric):
        if batch.num_rows == 0:
            continue
        centroids = batch.column("centroids")
        offsets = centroids.offsets.to_numpy()
        pairs = pc.list_flatten(centroids)
        merger.add(
            batch.column("second").to_numpy(),
            batch.column("n").to_numpy(),
            batch.column("min_ms").to_numpy(zero_copy_only=False),
            batch.column("max_ms").to_numpy(zero_copy_only=False),
            offsets - offsets[0],
            pairs.field("m").to_numpy(zero_copy_only=False),
            pairs.field("c").to_numpy(zero_copy_only=False),
        )
    return merger.windows()


def windows_figure(windows: dict[str, list[Row]], cumulative: list[Row], title: str) -> go.Figure:
    """P50, P99 and P99.99 per window (end-to-end solid, publish dotted), each point with its
    sample count, and the cumulative P99.99 lines beside them (grey): where the cumulative line
    flattens over hours, the windows show what each stretch of the run did."""
    figure = go.Figure()
    for metric, label in WINDOW_METRICS:
        rows = windows.get(metric) or []
        dash = "solid" if metric == "e2e" else "dot"
        mid = np.array([r["start_s"] + r["width_s"] / 2 for r in rows], dtype=float)
        for column, name, colour in WINDOW_LINES:
            if column == "p9999_ms" and rows and all(r["p9999_is_max"] for r in rows):
                name = "max (under 10<sup>4</sup> samples)"
            tail = np.array(
                ["max" if r["p9999_is_max"] and column == "p9999_ms" else name for r in rows]
            )
            figure.add_trace(
                go.Scatter(
                    x=mid,
                    y=np.array([r[column] for r in rows], dtype=float),
                    name=f"{label} {name} per window",
                    mode="lines+markers",
                    marker={"size": 3},
                    line={"color": colour, "width": 1.5, "dash": dash},
                    customdata=np.stack([np.array([r["n"] for r in rows]), tail], axis=-1)
                    if rows
                    else None,
                    hovertemplate="%{y:.3f} ms (%{customdata[1]}) in the window at %{x} s, "
                    "n=%{customdata[0]}<extra>" + f"{label} {name}</extra>",
                )
            )
        line = sorted((r for r in cumulative if r["metric"] == metric), key=lambda r: r["second"])
        x, y = thinned([r["second"] for r in line], [r["p9999_ms"] for r in line])
        figure.add_trace(
            go.Scatter(
                x=x,
                y=y,
                name=f"{label} cumulative P99.99",
                mode="lines",
                line={"color": "#7f7f7f", "width": 1.5, "dash": dash},
                hovertemplate="%{y:.3f} ms at %{x} s<extra>cumulative</extra>",
            )
        )
    width = next((rows[0]["width_s"] for rows in windows.values() if rows), None)
    figure.update_layout(
        title=title + (f" (windows of {width} s)" if width else ""),
        xaxis={"title": "seconds since the schedule start"},
        yaxis={"title": "latency (ms), log", "type": "log"},
        legend={"orientation": "h", "y": -0.2},
        margin={"t": 60},
    )
    return figure


def drift_html(steps: Sequence[StepSummaryDoc]) -> str:
    """Each long step's drift verdict, in its own words; nothing when no step was long."""
    judged = [s for s in steps if s.get("drift")]
    if not judged:
        return ""
    items = "".join(
        f"<li class='{'breaks' if d['verdict'] == 'drifting' else 'holds'}'>step {s['step']} "
        f"({s['target_rate_per_s']}/s): {html.escape(d['text'])}</li>"
        for s in judged
        if (d := s.get("drift"))
    )
    return (
        f"<h3>Drift</h3><ul class='drift'>{items}</ul><p class='note'>A step of ten minutes or "
        "more is cut into about 60 windows; each window's median of the per-second e2e P50 and "
        "P99, and the Theil-Sen slope through them, say whether latency creeps (drifting: it "
        "rose over the step by more than a quarter of its level and at least 1 ms; "
        "the thresholds are in summary.json).</p>"
    )


def windows_section(layout: SutDir, steps: Sequence[StepSummaryDoc], metrics: list[Row],
                    cumulative: list[Row]) -> str:  # fmt: skip
    """The report's "Over time" section: drift verdicts, then latency per window beside the
    cumulative lines, the window's width chosen from the run's length (at least ~100)."""
    seconds = [r["second"] for r in metrics]
    if not seconds:
        return ""
    width_s = window_width_s(max(seconds) - min(seconds) + 1)
    windows = {m: read_windows(layout.digests_parquet, m, width_s) for m, _ in WINDOW_METRICS}
    if not any(windows.values()):
        return drift_html(steps)
    e2e = windows.get("e2e") or []
    worst = max((r["p9999_ms"] for r in e2e), default=None)
    note = (
        f"<p class='note'>Latency per window of {width_s} s, {len(e2e)} windows, from the "
        f"per-second digests: each window's own P50, P99 and P99.99 (its maximum where it holds "
        f"fewer than 10<sup>4</sup> samples; hover for n). The worst window's end-to-end "
        f"P99.99: {html.escape(latency_text(worst))}.</p>"
    )
    figure = windows_figure(windows, cumulative, "Latency per window")
    return "<h2>Over time</h2>" + drift_html(steps) + figure_html(figure, "windows") + note
