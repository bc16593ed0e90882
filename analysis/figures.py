"""Report figures: pure functions from small aggregated tables (lists of dicts) to Plotly figures.

The main graph is the 2019 one: cumulative P99.99 publish and end-to-end latency on the left axis,
send, delivery, send-failure and delivery-failure (lost) throughput on the right, here with the
pace's steps as bands coloured by verdict and the breaking point marked.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.downsample import thinned
from contract.searchdocs import SearchProbeDoc
from contract.summarydocs import FaultSummaryDoc, StepSummaryDoc
from contract.units import NS_PER_S

VERDICT_COLOURS = {
    "holds": "rgba(46, 160, 67, 0.08)",
    "breaks": "rgba(214, 39, 40, 0.12)",
    "sender-limited": "rgba(127, 127, 127, 0.15)",
    "insufficient-data": "rgba(127, 127, 127, 0.06)",
    "instrument-failed": "rgba(224, 168, 0, 0.15)",
    "system-died": "rgba(140, 86, 75, 0.15)",
    "faulted": "rgba(148, 103, 189, 0.15)",  # a fault injected in the step (--fault)
    "host-saturated": "rgba(255, 127, 14, 0.12)",  # others saturated the host: inconclusive
}
THROUGHPUT_SERIES = (
    ("sent", "send throughput", "#1f77b4"),
    ("delivered", "delivery throughput", "#2ca02c"),
    ("send_failures", "send failures", "#d62728"),
    ("lost", "delivery failures (lost)", "#9467bd"),
)
LATENCY_SERIES = (
    ("publish", "P99.99 publish latency", "#ff7f0e"),
    ("e2e", "P99.99 end-to-end latency", "#8c564b"),
)


def step_spans(metrics: list[dict]) -> dict[int, tuple[int, int]]:
    """Step -> (first second, last second) in which the step scheduled events."""
    spans: dict[int, tuple[int, int]] = {}
    for row in metrics:
        if not row.get("scheduled") or row.get("step") is None:
            continue
        first, last = spans.get(row["step"], (row["second"], row["second"]))
        spans[row["step"]] = (min(first, row["second"]), max(last, row["second"]))
    return spans


def six_series(
    metrics: list[dict],
    cumulative: list[dict],
    steps: Sequence[StepSummaryDoc],
    breaking_point_per_s: int | None,
    title: str,
    faults: Sequence[FaultSummaryDoc] = (),
) -> go.Figure:
    figure = go.Figure()
    for metric, name, colour in LATENCY_SERIES:
        line = sorted((r for r in cumulative if r["metric"] == metric), key=lambda r: r["second"])
        # a day's seconds thinned to their envelope (analysis.downsample), as numpy arrays:
        # Plotly embeds those as typed arrays, far smaller than lists
        x, y, n = thinned(*([r[k] for r in line] for k in ("second", "p9999_ms", "n")))
        figure.add_trace(
            go.Scatter(
                x=x,
                y=y,
                name=name,
                mode="lines",
                line={"color": colour, "width": 2},
                yaxis="y",
                customdata=n,
                hovertemplate="%{y:.2f} ms at %{x} s<br>n=%{customdata}<extra>" + name + "</extra>",
            )
        )
    ordered = sorted(metrics, key=lambda r: r["second"])
    for column, name, colour in THROUGHPUT_SERIES:
        x, y = thinned([r["second"] for r in ordered], [r[column] for r in ordered])
        figure.add_trace(
            go.Scatter(
                x=x,
                y=y,
                name=name,
                mode="lines",
                line={"color": colour, "width": 1, "shape": "hv"},
                yaxis="y2",
                hovertemplate="%{y}/s at %{x} s<extra>" + name + "</extra>",
            )
        )
    _step_bands(figure, step_spans(metrics), steps, breaking_point_per_s)
    mark_faults(figure, faults)
    figure.update_layout(
        title=title,
        xaxis={"title": "seconds since the schedule start"},
        yaxis={"title": "latency (ms), cumulative P99.99", "rangemode": "tozero"},
        yaxis2={"title": "events/s", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.2},
        hovermode="x",
        margin={"t": 60},
    )
    return figure


def _step_bands(
    figure: go.Figure,
    spans: dict[int, tuple[int, int]],
    steps: Sequence[StepSummaryDoc],
    breaking_point_per_s: int | None,
) -> None:
    """A band per step in its verdict's colour, labelled with its pace, and a dashed line at the
    breaking point. Set in one layout update: plotly's add_vrect copies every shape so far on
    each call (measured: 1.2 s of a 6-system index page's 1.8)."""
    shapes: list[dict] = []
    notes: list[dict] = []
    marked = False
    for step in steps:
        span = spans.get(step["step"])
        if span is None:
            continue
        first, last = span
        shapes.append(_band(first, last + 1, VERDICT_COLOURS.get(step["verdict"], "white")))
        notes.append(_note(first, 1, f"{step['target_rate_per_s']}/s", "top", size=10))
        breaks = step["target_rate_per_s"] == breaking_point_per_s and step["verdict"] == "breaks"
        if breaks and not marked:
            shapes.append(_vline(first, {"color": "#d62728", "dash": "dash"}))
            notes.append(_note(first, 0, f"breaking point {breaking_point_per_s}/s", "bottom"))
            marked = True
    figure.update_layout(
        shapes=[*figure.layout.shapes, *shapes], annotations=[*figure.layout.annotations, *notes]
    )


FAULT_COLOUR = "#9467bd"


def mark_faults(figure: go.Figure, faults: Sequence[FaultSummaryDoc]) -> None:
    """Each fault done (--fault, --fault-exec) on a seconds-since-the-schedule-start axis: a
    dotted line at its instant, named, and a band to where the system recovered (or its target
    was back, when recovery was not found), over every subplot."""
    shapes: list[dict] = []
    notes: list[dict] = []
    for fault in faults:
        if fault["at_s"] is None:
            continue
        at_s = fault["at_s"]
        line = _vline(at_s, {"color": FAULT_COLOUR, "dash": "dot", "width": 2})
        shapes.append({**line, "yref": "paper"})
        until_s = (
            at_s + fault["recovered_after_s"]
            if fault["recovered_after_s"] is not None
            else fault["back_s"]
        )
        if until_s is not None and until_s > at_s:
            band = _band(at_s, until_s, "rgba(148, 103, 189, 0.18)")
            shapes.append({**band, "yref": "paper"})
        what = f"{fault['action']} {fault['target']}"[:40]
        notes.append({**_note(at_s, 1, what, "bottom", size=10), "yref": "paper"})
    if shapes:
        figure.update_layout(
            shapes=[*figure.layout.shapes, *shapes],
            annotations=[*figure.layout.annotations, *notes],
        )


def _band(x0: float, x1: float, colour: str) -> dict:
    """A full-height rectangle behind the traces (as add_vrect draws one)."""
    return {
        "type": "rect",
        "xref": "x",
        "yref": "y domain",
        "x0": x0,
        "x1": x1,
        "y0": 0,
        "y1": 1,
        "fillcolor": colour,
        "line": {"width": 0},
        "layer": "below",
    }


def _vline(x: float, line: dict) -> dict:
    """A full-height vertical line (as add_vline draws one)."""
    return {
        "type": "line",
        "xref": "x",
        "yref": "y domain",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": line,
    }


def _note(x: float, y: float, text: str, anchor: str, size: int | None = None) -> dict:
    """Text at the left edge of `x`, at the top (y=1) or bottom (y=0) of the plot."""
    return {
        "x": x,
        "xref": "x",
        "y": y,
        "yref": "y domain",
        "text": text,
        "showarrow": False,
        "xanchor": "left",
        "yanchor": anchor,
        **({"font": {"size": size}} if size else {}),
    }


def latency_points(points: list[dict], title: str) -> go.Figure:
    """Every event's latency (or each time bucket's maximum, for long runs), WebGL-drawn."""
    start = min((p["t_ns"] for p in points), default=0)
    figure = go.Figure()
    for column, name, colour in (
        ("publish_ms", "publish latency", "#ff7f0e"),
        ("e2e_ms", "end-to-end latency", "#8c564b"),
    ):
        shown = [p for p in points if p[column] is not None]
        # numpy arrays: Plotly embeds them as typed arrays, far smaller and faster than lists
        figure.add_trace(
            go.Scattergl(
                # float32: a day's 100,000 points in half the bytes, to a millisecond
                x=np.fromiter(((p["t_ns"] - start) / NS_PER_S for p in shown), np.float32),
                y=np.fromiter((p[column] for p in shown), np.float32, len(shown)),
                mode="markers",
                name=name,
                marker={"size": 3, "color": colour, "opacity": 0.6},
            )
        )
    bucketed = any(p["events"] > 1 for p in points)
    figure.update_layout(
        title=title + (" (per time bucket: the maximum)" if bucketed else ""),
        xaxis={"title": "seconds since the first event"},
        yaxis={"title": "latency (ms)", "type": "log"},
        legend={"orientation": "h", "y": -0.2},
    )
    return figure


def sender_health(steps: Sequence[StepSummaryDoc], title: str) -> go.Figure:
    """Did the instrument keep the pace? Achieved vs target rate, and lag p99, per step."""
    labels = [f"{s['step']}: {s['target_rate_per_s']}/s" for s in steps]
    figure = go.Figure()
    figure.add_trace(
        go.Bar(
            x=labels,
            y=[s["target_rate_per_s"] for s in steps],
            name="target",
            marker_color="#c7c7c7",
        )
    )
    figure.add_trace(
        go.Bar(
            x=labels,
            y=[s["achieved_send_rate_per_s"] for s in steps],
            name="achieved send rate",
            marker_color="#1f77b4",
        )
    )
    figure.add_trace(
        go.Scatter(
            x=labels,
            y=[s["sender_lag_p99_ms"] for s in steps],
            name="sender lag p99 (ms)",
            yaxis="y2",
            mode="lines+markers",
            line={"color": "#d62728"},
        )
    )
    figure.update_layout(
        title=title,
        barmode="group",
        yaxis={"title": "events/s"},
        yaxis2={"title": "lag p99 (ms)", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.3},
    )
    return figure


def comparison(rows: list[dict]) -> go.Figure:
    """The same SUTs across runs: max sustainable rate (bars) and e2e P99.99 (markers)."""
    runs = list(dict.fromkeys(r["run"] for r in rows))
    suts = sorted({r["sut"] for r in rows})
    figure = go.Figure()
    for run in runs:
        by_sut = {r["sut"]: r for r in rows if r["run"] == run}
        figure.add_trace(
            go.Bar(
                x=suts,
                y=[(by_sut.get(s) or {}).get("max_sustainable_rate_per_s") for s in suts],
                name=f"{run}: max sustainable rate",
                customdata=[(by_sut.get(s) or {}).get("breaking_point_per_s") for s in suts],
                hovertemplate="%{y}/s, breaks at %{customdata}/s<extra>" + run + "</extra>",
            )
        )
        figure.add_trace(
            go.Scatter(
                x=suts,
                y=[(by_sut.get(s) or {}).get("p9999_e2e_ms") for s in suts],
                yaxis="y2",
                mode="markers",
                marker={"size": 11, "symbol": "diamond"},
                name=f"{run}: e2e P99.99 (ms)",
            )
        )
    figure.update_layout(
        title="Runs compared",
        barmode="group",
        yaxis={"title": "max sustainable rate (events/s)"},
        yaxis2={
            "title": "e2e P99.99 (ms)",
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
        },
        legend={"orientation": "h", "y": -0.2},
    )
    return figure


def resource_samples(
    processes: list[dict],
    lag: list[dict],
    start_ns: int,
    title: str,
    faults: Sequence[FaultSummaryDoc] = (),
) -> go.Figure:
    """RSS and CPU of every process of the run and, for Kafka SUTs, the consumer lag, on the
    same seconds-since-start axis as the main graph, so a latency rise can be matched with a
    process growing, saturating a core or falling behind."""
    rows = 3 if lag else 2
    titles = ["RSS (MB)", "CPU (% of one core)", "consumer lag (records, all partitions)"]
    figure = make_subplots(
        rows=rows, cols=1, shared_xaxes=True, subplot_titles=titles[:rows], vertical_spacing=0.08
    )
    by_process: dict[str, list[dict]] = {}
    for row in processes:
        by_process.setdefault(row["process"], []).append(row)
    for number, (name, samples) in enumerate(sorted(by_process.items())):
        samples.sort(key=lambda r: r["t_ns"])
        x = [(r["t_ns"] - start_ns) / NS_PER_S for r in samples]
        colour = PROCESS_COLOURS[number % len(PROCESS_COLOURS)]
        common = {"mode": "lines", "legendgroup": name, "line": {"color": colour}}
        rss_x, rss = thinned(x, [r["rss_bytes"] / 1e6 for r in samples])
        cpu_x, cpu = thinned(x, [r["cpu_percent"] for r in samples])
        figure.add_trace(go.Scatter(x=rss_x, y=rss, name=name, **common), row=1, col=1)
        figure.add_trace(go.Scatter(x=cpu_x, y=cpu, showlegend=False, **common), row=2, col=1)
    if lag:
        totals: dict[int, int] = {}
        for row in lag:
            totals[row["t_ns"]] = totals.get(row["t_ns"], 0) + row["lag"]
        times = sorted(totals)
        lag_x, lag_y = thinned(
            [(t - start_ns) / NS_PER_S for t in times], [totals[t] for t in times]
        )
        figure.add_trace(
            go.Scatter(
                x=lag_x,
                y=lag_y,
                name="consumer lag",
                mode="lines+markers",
                line={"color": "#111111"},
            ),
            row=3,
            col=1,
        )
    figure.update_xaxes(title_text="seconds since the schedule start", row=rows, col=1)
    figure.update_layout(title=title, height=260 * rows + 120, legend={"orientation": "h"})
    mark_faults(figure, faults)
    return figure


PROCESS_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
)


SEARCH_COLOURS = {
    "holds": "#2ca02c",
    "breaks": "#d62728",
    "sender-limited": "#7f7f7f",
    "not-judged": "#bcbd22",  # the probe an interrupt cut short
    "host-saturated": "#ff7f0e",  # others saturated the host: probed again
}


def search_probes(probes: Sequence[SearchProbeDoc], title: str) -> go.Figure:
    """A capacity search: each probe's rate over the probes (confirmations as squares), and
    rate against end-to-end P99 (the latency knee), coloured by verdict."""
    figure = make_subplots(
        rows=1, cols=2, subplot_titles=("probes in order", "rate vs end-to-end P99")
    )
    for verdict, colour in SEARCH_COLOURS.items():
        mine = [p for p in probes if p["verdict"] == verdict]
        if not mine:
            continue
        common = {"mode": "markers", "name": verdict, "legendgroup": verdict}
        symbols = ["square" if p["confirm"] else "circle" for p in mine]
        figure.add_trace(
            go.Scatter(
                x=[p["step"] for p in mine],
                y=[p["rate_per_s"] for p in mine],
                marker={"color": colour, "symbol": symbols, "size": 10},
                **common,
            ),
            row=1,
            col=1,
        )
        figure.add_trace(
            go.Scatter(
                x=[p["rate_per_s"] for p in mine],
                y=[p["e2e_p99_ms"] for p in mine],
                marker={"color": colour, "symbol": symbols, "size": 10},
                showlegend=False,
                **common,
            ),
            row=1,
            col=2,
        )
    figure.update_xaxes(title_text="probe", row=1, col=1)
    figure.update_yaxes(title_text="rate (events/s)", row=1, col=1)
    figure.update_xaxes(title_text="rate (events/s)", row=1, col=2)
    figure.update_yaxes(title_text="e2e P99 (ms)", type="log", row=1, col=2)
    figure.update_layout(title=title, legend={"orientation": "h"})
    return figure
