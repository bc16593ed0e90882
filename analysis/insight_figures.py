"""The system metrics' figures: pure functions from the series of analysis.insight (and the
summary's steps) to Plotly figures, in the style of analysis.figures.

Each plot shares the run's time axis, seconds since the schedule start, with the main graph,
and carries the steps as bands coloured by verdict, each named by its number and rate, so a
queue growing or a rate flattening can be read against the step that caused it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from analysis.downsample import PLOT_POINTS, thinned
from analysis.figures import PROCESS_COLOURS, VERDICT_COLOURS
from analysis.insight import SCRAPER_METRICS, Series
from contract.summarydocs import StepSummaryDoc

# A step band: its first and last second with events due (analysis.figures.step_spans).
Span = tuple[int, int]


def line_name(series: Series) -> str:
    """A line's legend entry: the endpoint and its labels, escaped (Plotly renders some HTML in
    legends, and label values come from the system under test)."""
    return html.escape(f"{series.endpoint} {series.labels}".strip(), quote=False)


def axis_title(series: Series) -> str:
    if series.plotted == "rate":
        return "per second (rate of the counter)"
    return "value as scraped"


def plot_title(series: Series) -> str:
    how = "per-second rate" if series.plotted == "rate" else "as scraped"
    return html.escape(f"{series.name} ({series.kind}, {how})", quote=False)


def metric_plot(
    lines: Sequence[Series],
    steps: Sequence[StepSummaryDoc],
    spans: Mapping[int, Span],
    x_range_s: tuple[float, float] | None,
) -> go.Figure:
    """One sample name's lines, one per endpoint and label set, over the run's steps. The
    scraper's own series draw every point as a marker: a failed scrape is one up=0 point."""
    figure = go.Figure()
    for number, series in enumerate(lines):
        scraper = series.name in SCRAPER_METRICS
        # a day of scrapes thinned to its envelope (a failed scrape's 0 is a low: it stays)
        x: Sequence[float | None] | np.ndarray = series.seconds
        y: Sequence[float | None] | np.ndarray = series.values
        if len(x) > PLOT_POINTS:
            x, y = thinned(x, y)
        figure.add_trace(
            go.Scatter(
                x=x,
                y=y,
                name=line_name(series),
                mode="lines+markers" if scraper else "lines",
                connectgaps=False,  # a reset or a missing value stays a gap
                line={
                    "color": PROCESS_COLOURS[number % len(PROCESS_COLOURS)],
                    "width": 1.5,
                    # a rate holds over the interval that ends at its point
                    "shape": "vh" if series.plotted == "rate" else "linear",
                },
                marker={"size": 5},
                hovertemplate="%{y:.4g} at %{x:.1f} s<extra>%{fullData.name}</extra>",
            )
        )
    step_bands(figure, steps, spans)
    first = lines[0]
    resets = sum(s.resets for s in lines)
    title = plot_title(first) + (f" · {resets} counter resets (gaps)" if resets else "")
    figure.update_layout(
        title={"text": title, "font": {"size": 14}},
        xaxis={"title": "seconds since the schedule start", "range": x_range_s},
        yaxis={"title": axis_title(first), "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.3},
        height=340,
        margin={"t": 50},
        showlegend=True,
    )
    return figure


def step_bands(
    figure: go.Figure, steps: Sequence[StepSummaryDoc], spans: Mapping[int, Span]
) -> None:
    """Each step as a band coloured by its verdict, named by its number and rate."""
    for step in steps:
        span = spans.get(step["step"])
        if span is None:
            continue
        figure.add_vrect(
            x0=span[0],
            x1=span[1] + 1,
            fillcolor=VERDICT_COLOURS.get(step["verdict"], "white"),
            line_width=0,
            layer="below",
            annotation_text=f"step {step['step']}: {step['target_rate_per_s']}/s",
            annotation_position="top left",
            annotation_font_size=10,
        )


def x_range(plots: Sequence[Sequence[Series]], spans: Mapping[int, Span]) -> tuple[float, float]:
    """One time range for every plot, so they line up under each other: the steps and every
    sample."""
    ends = [float(s) for span in spans.values() for s in (span[0], span[1] + 1)]
    ends += [t for lines in plots for series in lines for t in series.seconds]
    low, high = min(ends, default=0.0), max(ends, default=1.0)
    return (low, high if high > low else low + 1.0)
