"""A memory run's page (`evbench memory`, analysis.memory): memory over time per scenario, seed
000's peak table, and each scenario's lag as kafka-consumer-groups prints it."""

from __future__ import annotations

import html
from functools import partial
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from analysis.figures import PROCESS_COLOURS
from analysis.memory import (
    PLATEAU_S,
    RETURN_SLACK_BYTES,
    RETURN_TOLERANCE,
    describe_lines,
    peak_table,
)
from analysis.pages import figure_html, page, plotly_js
from contract.memorydocs import MemorySummaryRowDoc
from runtime.files import write_text_atomically

Row = dict[str, Any]


def memory_over_time(
    series: dict[str, list[dict]], phases: dict[str, dict], title: str
) -> go.Figure:
    """Memory per scenario over seconds since its consumer started (the backlog was filled
    before): RSS as a line and USS dotted, one colour per scenario, and each scenario's first
    message and end of drain marked on its line."""
    figure = go.Figure()
    for number, (name, samples) in enumerate(sorted(series.items())):
        colour = PROCESS_COLOURS[number % len(PROCESS_COLOURS)]
        x = [s["second"] for s in samples]
        figure.add_trace(
            go.Scatter(
                x=x,
                y=[s["rss_bytes"] / 2**20 for s in samples],
                name=f"{name} RSS",
                mode="lines",
                legendgroup=name,
                line={"color": colour},
            )
        )
        if any(s.get("uss_bytes") is not None for s in samples):
            figure.add_trace(
                go.Scatter(
                    x=x,
                    y=[
                        None if s.get("uss_bytes") is None else s["uss_bytes"] / 2**20
                        for s in samples
                    ],
                    name=f"{name} USS",
                    mode="lines",
                    legendgroup=name,
                    line={"color": colour, "dash": "dot"},
                )
            )
        marks = phases.get(name, {})
        for key, symbol in (("first_message_s", "triangle-up"), ("drained_s", "square")):
            at = marks.get(key)
            if at is None or not samples:
                continue
            nearest = min(samples, key=partial(_distance, at=at))
            figure.add_trace(
                go.Scatter(
                    x=[at],
                    y=[nearest["rss_bytes"] / 2**20],
                    name=f"{name}: {'first message' if key == 'first_message_s' else 'drained'}",
                    mode="markers",
                    legendgroup=name,
                    showlegend=False,
                    marker={"color": colour, "symbol": symbol, "size": 10},
                )
            )
    figure.update_xaxes(title_text="seconds since the consumer started (backlog filled before)")
    figure.update_yaxes(title_text="MiB")
    figure.update_layout(title=title, legend={"orientation": "h"})
    return figure


def _group_and_topic(row: MemorySummaryRowDoc) -> tuple[str, str]:
    """Where a scenario's backlog was (a scenario written before names were recorded used the
    fresh broker's)."""
    if "kafka" in row:
        return row["kafka"]["group"], row["kafka"]["topic"]
    return f"memory-{row['consumer']}-p{row['partitions']}", "backlog"


def write_memory_report(
    root: Path, rows: list[MemorySummaryRowDoc], series: dict[str, list[Row]]
) -> Path:
    """One page for a memory run: memory over time per scenario, seed 000's peak table, and
    each scenario's lag as kafka-consumer-groups prints it."""
    phases: dict[str, dict[str, Any]] = {r["scenario"]: dict(r) for r in rows}
    figure = memory_over_time(series, phases, "Consumer memory while draining the backlog")
    lag = "".join(
        f"<h3>{html.escape(r['scenario'])}</h3><pre>"
        + html.escape(
            "\n".join(
                describe_lines(
                    *_group_and_topic(r),
                    [(x["partition"], x["committed"], x["end"]) for x in r["lag"]],
                )
            )
        )
        + "</pre>"
        + (
            f"<p class='note'>never consumed: {html.escape(str(r['never_consumed']))}; "
            f"consumer {html.escape(r['exit'])}; errors: {len(r['errors'])}</p>"
        )
        + (
            "<p class='note'>the consumer logged:</p><pre>"
            + html.escape("\n".join(r.get("logged_errors") or []))
            + "</pre>"
            if r.get("logged_errors")
            else ""
        )
        for r in rows
    )
    body = (
        f"<h1>{html.escape(root.name)}</h1>"
        + figure_html(figure, "memory-over-time")
        + "<h2>Peaks</h2><pre>"
        + html.escape("\n".join(peak_table(rows)))
        + "</pre><p class='note'>Back to idle: the median of the last "
        f"{PLATEAU_S:g} s after the drain within {RETURN_TOLERANCE:.0%} of the idle baseline or "
        f"{RETURN_SLACK_BYTES // 2**20} MiB, whichever is larger. Predicted: the client's "
        "buffer bound from its settings (suts/consumers/predict.py), the idle footprint not "
        "included.</p><h2>Lag at the end</h2>" + lag
    )
    path = root / "report.html"
    write_text_atomically(path, page(root.name, plotly_js(root.parent), root, body))
    return path


def _distance(sample: dict[str, Any], at: float) -> float:
    """How far a sample lies from the instant `at`, in seconds."""
    return abs(sample["second"] - at)
