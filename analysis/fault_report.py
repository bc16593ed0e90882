"""The report's Faults section: each fault injected (`--fault`, `--fault-exec`) as its ledger
tells it (analysis.faultsteps), and, when faults came at more than one rate (`every@...` over a
staircase), what a fault cost against the rate: the time to recover, and the events failed, lost
and duplicated."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from analysis.pages import figure_html
from contract.summarydocs import FaultSummaryDoc, SummaryDoc


def cost_against_rate(faults: Sequence[FaultSummaryDoc], rates: Mapping[int, int]) -> go.Figure:
    """Recovery time (left axis) and the events each fault cost (right axis) at its step's
    rate, for the faults that were done. Pure."""
    done = sorted(
        (f for f in faults if f["at_s"] is not None and f["step"] in rates),
        key=lambda f: rates[f["step"]],
    )
    x = [rates[f["step"]] for f in done]
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=x,
            y=[f["recovered_after_s"] for f in done],  # None (never recovered): a gap
            name="time to recover (s)",
            mode="lines+markers",
            line={"color": "#9467bd", "width": 2},
        )
    )
    for key, name, colour in (
        ("window_send_failures", "send failures in its window", "#d62728"),
        ("window_lost", "lost in its window", "#8c564b"),
        ("step_duplicates", "duplicates in its step", "#ff7f0e"),
        ("window_late", "late in its window", "#17becf"),
    ):
        figure.add_trace(
            go.Scatter(
                x=x,
                y=[f.get(key) for f in done],
                name=name,
                mode="lines+markers",
                line={"color": colour, "width": 1, "dash": "dot"},
                yaxis="y2",
            )
        )
    figure.update_layout(
        title="What a fault cost, against the rate",
        xaxis={"title": "the step's rate (events/s)"},
        yaxis={"title": "time to recover (s)", "rangemode": "tozero"},
        yaxis2={"title": "events", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.25},
    )
    return figure


def faults_brief(faults: Sequence[FaultSummaryDoc]) -> str:
    """One cell for the index and `compare`: how many faults were done, how soon the system
    recovered from them, and what they cost (of the events due in their windows, summed over
    the faults: two faults whose windows overlap count those events twice; duplicates in their
    steps, each step once). `-` for a run without faults. Pure."""
    if not faults:
        return "-"
    done = [f for f in faults if f["at_s"] is not None]
    if not done:
        return f"{len(faults)} given, none done"
    times = sorted(t for f in done if (t := f["recovered_after_s"]) is not None)
    span = "" if not times else f"{times[0]:.1f}" + (f"-{times[-1]:.1f}" if len(times) > 1 else "")
    if len(times) == len(done):
        recovered = f"recovered in {span} s"
    else:
        recovered = f"{len(times)} of {len(done)} recovered" + (f" (in {span} s)" if times else "")
    failed = sum(f["window_send_failures"] or 0 for f in done)
    lost = sum(f["window_lost"] or 0 for f in done)
    duplicates = sum({f["step"]: f["step_duplicates"] or 0 for f in done}.values())
    late = sum(f.get("window_late") or 0 for f in done)
    noun = "fault" if len(done) == 1 else "faults"
    return (
        f"{len(done)} {noun}: {recovered}; {failed:,} failed, {lost:,} lost, "
        f"{duplicates:,} duplicates, {late:,} late"
    )


def faults_section(summary: SummaryDoc) -> str:
    """The Faults section, or nothing for a run without faults."""
    faults = summary.get("faults") or []
    if not faults:
        return ""
    items = "".join(f"<li>{html.escape(f['text'])}</li>" for f in faults)
    body = f"<h2>Faults</h2><ul>{items}</ul>"
    rates = {step["step"]: step["target_rate_per_s"] for step in summary["steps"]}
    if len({rates.get(f["step"]) for f in faults if f["at_s"] is not None}) > 1:
        body += figure_html(cost_against_rate(faults, rates), "fault-costs")
    return body
