"""HTML reports: runs/<run>/<sut>/analysis/report.html per SUT and runs/<run>/index.html.

Works offline: plotly.js is written once per runs/ directory and every report refers to it by a
relative path, so a runs/ directory can be copied, zipped or served as it is.

Names of runs and SUTs come from users and are never trusted: every string is escaped for where
it lands (analysis.pages), and element ids are derived from positions, never from names.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from analysis.fanout_cost import cost_figure, cost_lines, cost_row, fanned_systems
from analysis.fault_report import faults_brief, faults_section
from analysis.figures import (
    latency_points,
    resource_samples,
    search_probes,
    sender_health,
    six_series,
)
from analysis.insight_html import system_sections
from analysis.memory_report import write_memory_report as write_memory_report
from analysis.objectives import objectives_section
from analysis.pages import cell, figure_html, href, page, plotly_js, plotly_text
from analysis.repeats import repeats_html, shown_name
from analysis.spectrum import spectrum_section, systems_spectrum
from analysis.summary import latency_text, read_summary, significant
from analysis.window_report import windows_section
from contract.documents import RunDoc, schedule_start_ns
from contract.figures import TailDoc
from contract.layout import SutDir, run_index_html
from contract.summarydocs import FaultSummaryDoc, HostLoadDoc, StepSummaryDoc, SummaryDoc
from contract.units import NS_PER_MS
from runtime.failcause import causes_text
from runtime.files import write_text_atomically
from runtime.parquet import part_files

# A row of a table read back (a second of metrics.parquet, a point, a comparison row).
Row = dict[str, Any]
# Latencies in the tables, in ms: 3 significant digits (summary.json has them exact).
LATENCY_COLUMNS = frozenset(
    {"sender_lag_p99_ms", "p9999_e2e_ms", "p50", "p99", "p999", "p9999", "max"}
)


def _figure(column: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return cell(value)
    if column in LATENCY_COLUMNS and math.isfinite(value):
        return cell(significant(value))
    return cell(value)


def _host_cell(host: HostLoadDoc | None) -> str:
    """The host's load over a step: `99% busy, 52% others` (-: not sampled)."""
    if not host:
        return "-"
    return f"{host['busy_ratio']:.0%} busy, {host['others_ratio']:.0%} others"


def _with_causes(failures: int, causes: Mapping[str, int] | None) -> object:
    """A failures cell: the count, and by cause when there are any (runtime.failcause)."""
    text = causes_text(causes or {})
    return f"{failures} ({text})" if text else failures


def _load(layout: SutDir) -> tuple[SummaryDoc, list[Row], list[Row], list[Row]]:
    summary = read_summary(layout.summary_json)
    metrics = pq.read_table(layout.metrics_parquet).to_pylist()
    cumulative = pq.read_table(layout.cumulative_parquet).to_pylist()
    points = pq.read_table(layout.points_parquet).to_pylist()
    return summary, metrics, cumulative, points


def headline(summary: SummaryDoc) -> str:
    """The run's verdict as the analysis wrote it (analysis.summary): one wording of it, in the
    summary, the console, the report and the index alike."""
    return summary["verdict"]


def status_banner(summary: SummaryDoc) -> str:
    """What a reader must know before any figure: the instruments failed, or the run was
    interrupted (empty when neither)."""
    if failures := summary.get("instrument_failures"):
        return (
            "<div class='banner failed'><b>Instrument failed</b>: "
            f"{html.escape('; '.join(failures))}. No breaking point is named: the losses and "
            "failures below may be the instrument's, not the system's.</div>"
        )
    if summary.get("status") == "interrupted":
        return (
            "<div class='banner interrupted'><b>Interrupted</b>: the run was stopped before its "
            "pace ended; the figures cover what was recorded until then.</div>"
        )
    return ""


def _index_banners(summaries: list[SummaryDoc]) -> str:
    """The index's top: one banner per system whose run failed or was interrupted."""
    return "".join(
        f"<h3>{html.escape(shown_name(summary))}</h3>{banner}"
        for summary in summaries
        if (banner := status_banner(summary))
    )


def _verdict_class(summary: SummaryDoc) -> str:
    if summary.get("instrument_failures"):
        return "instrument-failed"
    return "breaks" if summary["breaking_point_per_s"] else "holds"


def _latency_cell(figures: TailDoc | None) -> str:
    if not figures or not figures.get("n"):
        return "-"
    label = "max" if figures.get("p9999_is_max") else "P99.99"
    return f"{latency_text(figures['p9999'])} ({label}, n={figures['n']})"


def _steps_table(steps: list[StepSummaryDoc]) -> str:
    columns = [
        "step",
        "target_rate_per_s",
        "achieved_send_rate_per_s",
        "delivered_rate_per_s",
        "send_failures",
        "lost",
        "duplicates",
        "sender_lag_p99_ms",
        "p9999_e2e_ms",
        "e2e_n",
        "verdict",
    ]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "<th>host</th><th>why</th>"
    rows = []
    for step in steps:
        shown: Row = dict(step)
        shown["send_failures"] = _with_causes(step["send_failures"], step.get("failures_by_cause"))
        cells = "".join(f"<td>{_figure(c, shown.get(c))}</td>" for c in columns)
        why = html.escape("; ".join(step.get("reasons", [])))
        host = f"<td class='text'>{cell(_host_cell(step.get('host')))}</td>"
        rows.append(
            f"<tr class='{cell(step['verdict'])}'>{cells}{host}<td class='text'>{why}</td></tr>"
        )
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _subscribers_html(summary: SummaryDoc) -> str:
    """A fan-out's subscribers, each on its own deliveries (analysis.fanout_summary); the
    system's figures above are their completion: an event counts as delivered once every
    subscriber that takes it has it."""
    subscribers = summary.get("subscribers")
    if not subscribers:
        return ""
    counted = ("delivered", "lost", "duplicates", "filtered", "leaked")
    head = "".join(f"<th>{c}</th>" for c in ("subscriber", "takes events", *counted))
    head += "<th>e2e p99</th><th>e2e tail</th><th>steps</th>"
    rows = []
    for one in subscribers:
        verdicts = ", ".join(f"{s['target_rate_per_s']}/s {s['verdict']}" for s in one["steps"])
        broke = any(s["verdict"] == "breaks" for s in one["steps"])
        rows.append(
            f"<tr class='{'breaks' if broke else 'holds'}'><td class='text'>"
            f"{html.escape(one['path'])}</td><td>{'yes' if one['matches'] else 'no'}</td>"
            + "".join(f"<td>{cell(value)}</td>" for value in one["counts"].values())
            + f"<td>{_figure('p99_e2e_ms', one['e2e_ms']['p99'])}</td>"
            + f"<td>{html.escape(_latency_cell(one['e2e_ms']))}</td>"
            + f"<td class='text'>{html.escape(verdicts)}</td></tr>"
        )
    return (
        f"<h2>Subscribers ({len(subscribers)})</h2><p class='note'>Each event is expected once "
        "at every subscriber that takes it. The system's figures are the events' completion: "
        "delivered when every subscriber that takes it has it, end-to-end to the slowest of "
        "them. Here each subscriber on its own deliveries, judged by the same step rule.</p>"
        f"<table><tr>{head}</tr>{''.join(rows)}</table>"
    )


def _counts_table(summary: SummaryDoc) -> str:
    # The send failures with their causes, in the one cell (not a dictionary of its own).
    counts: Row = {k: v for k, v in summary["counts"].items() if k != "failures_by_cause"}
    causes = summary["counts"].get("failures_by_cause")
    counts["send_failures"] = _with_causes(summary["counts"]["send_failures"], causes)
    head = "".join(f"<th>{cell(k)}</th>" for k in counts)
    cells = "".join(f"<td>{cell(v)}</td>" for v in counts.values())
    lat = summary["latency_ms"]
    lat_head = "<th>latency</th>" + "".join(
        f"<th>{k}</th>" for k in ("p50", "p99", "p999", "p9999", "max", "n")
    )
    lat_rows = "".join(
        f"<tr><td class='text'>{cell(name)}</td>"
        + "".join(
            f"<td>{_figure(k, dict(fig).get(k))}</td>"
            for k in ("p50", "p99", "p999", "p9999", "max", "n")
        )
        + "</tr>"
        for name, fig in lat.items()
    )
    return (
        f"<table><tr>{head}</tr><tr>{cells}</tr></table>"
        f"<table><tr>{lat_head}</tr>{lat_rows}</table>"
    )


def _samples(directory: Path, prefix: str) -> list[Row]:
    """A sampler's rows: its files by the records' rule (rolled files, and the parts none of
    them holds), so a roll cut short counts nothing twice."""
    paths = [p for p in part_files(directory) if p.name.startswith(f"{prefix}-")]
    rows: list[Row] = []
    for path in paths:
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def _resources_html(sut_dir: Path, faults: Sequence[FaultSummaryDoc] = ()) -> str:
    """Process samples (and consumer lag), when the run recorded them (imports have none)."""
    layout = SutDir(sut_dir)
    processes = _samples(layout.samples, "processes")
    if not processes:
        return ""
    lag = _samples(layout.consumer_lag, "lag")
    run: RunDoc = json.loads(layout.run_json.read_text())
    start_ns = schedule_start_ns(run) or min(r["t_ns"] for r in processes)
    figure = resource_samples(processes, lag, start_ns, "Processes of the run", faults)
    return "<h2>Resources</h2>" + figure_html(figure, "resources")


def clock_note(summary: SummaryDoc) -> str:
    """What the analysis did about the sender's and receiver's clocks, and within what bound;
    nothing for summaries from before clock offsets were measured."""
    clock = summary.get("clock")
    if not clock:
        return ""
    text = clock["note"]
    if workers := clock["workers"]:
        text += "; offsets " + ", ".join(
            f"worker {w}: {c['offset_ns'] / NS_PER_MS:+.3f} ms "
            f"± {c['bound_ns'] / NS_PER_MS:.3f}, drift {c['drift_ns'] / NS_PER_MS:+.3f} ms"
            for w, c in workers.items()
        )
    if clock["negative_e2e"]:
        text += f"; {clock['negative_e2e']} events arrived before they were due (clock error)"
    return f"<p class='note clock'>Clocks: {html.escape(text)}</p>"


def _search_html(summary: SummaryDoc) -> str:
    """A capacity search's probes and result; nothing for other runs."""
    search = summary.get("search")
    if not search or not search.get("probes"):
        return ""
    result = search.get("result")
    text = (result and result.get("why")) or "the search did not finish"
    return f"<h2>Capacity search</h2><p>{html.escape(text)}</p>" + figure_html(
        search_probes(search["probes"], "Probes"), "search-probes"
    )


def write_report(
    sut_dir: Path, runs_root: Path | None = None, plot_metrics: Sequence[str] = ()
) -> Path:
    """One system's report; `plot_metrics` chooses its scraped series (analysis.insight)."""
    layout = SutDir(sut_dir)
    analysis_dir = layout.analysis
    summary, metrics, cumulative, points = _load(layout)
    runs_root = runs_root or sut_dir.parent.parent
    name = f"{summary['run_id']} · {summary['sut']} · {summary['pace']}"
    six = six_series(
        metrics,
        cumulative,
        summary["steps"],
        summary["breaking_point_per_s"],
        plotly_text(f"{summary['sut']}: {headline(summary)}"),
        summary.get("faults", []),
    )
    trimmed = f"<p class='note'>{html.escape(summary['trimmed'])}</p>" if summary["trimmed"] else ""
    trimmed += clock_note(summary)
    body = (
        f"<h1>{html.escape(name)}</h1>{status_banner(summary)}"
        f"<p><b>{html.escape(headline(summary))}</b>; end-to-end "
        f"{html.escape(_latency_cell(summary['latency_ms']['e2e']))}</p>{trimmed}"
        + objectives_section(summary)
        + _counts_table(summary)
        + _subscribers_html(summary)
        + figure_html(six, "six-series")
        + spectrum_section(summary)
        + "<p class='note'>The latency lines are cumulative, as in 2019: at each second, the "
        "P99.99 of every event sent up to then, from T-Digests, so an early spike dominates the "
        "start and the right end is the whole run. The tables' tail figures are exact where "
        "the kept top values reach (see <code>exact</code> in summary.json).</p>"
        + faults_section(summary)
        + windows_section(layout, summary["steps"], metrics, cumulative)
        + "<h2>Steps</h2>"
        + _steps_table(summary["steps"])
        + figure_html(latency_points(points, "Latency of every event"), "latency-points")
        + figure_html(sender_health(summary["steps"], "Sender health"), "sender-health")
        + _search_html(summary)
        + _resources_html(sut_dir, summary.get("faults", []))
        + system_sections(layout, summary, metrics, plot_metrics)
        + "<h2>Thresholds</h2><pre>"
        + html.escape(json.dumps(summary["thresholds"], indent=2))
        + "</pre>"
    )
    path = layout.report_html
    write_text_atomically(path, page(name, plotly_js(runs_root), analysis_dir, body))
    return path


def _fanout_html(summaries: list[SummaryDoc], sut_dirs: list[Path]) -> str:
    """The cost of fan-out (analysis.fanout_cost), for the systems run at several N."""
    fanned = fanned_systems(summaries)
    if not fanned:
        return ""
    rows = []
    for summary, layout in zip(summaries, map(SutDir, sut_dirs), strict=True):
        if summary["sut"] in fanned:
            run: RunDoc = json.loads(layout.run_json.read_text())
            samples = _samples(layout.samples, "processes")
            rows.append(cost_row(summary, samples, schedule_start_ns(run)))
    head = "".join(f"<th>{h}</th>" for h in ("SUT", "N", "sustained", "deliveries", "processes"))
    body = "".join(
        "<tr>" + "".join(f"<td class='text'>{cell(c)}</td>" for c in cost_lines(row)) + "</tr>"
        for row in sorted(rows, key=lambda r: (r.sut, r.fanout, r.shown))
    )
    return f"<h2>The cost of fan-out</h2><table><tr>{head}</tr>{body}</table>" + figure_html(
        cost_figure(rows), "fanout-cost"
    )


def write_index(run_dir: Path, sut_dirs: list[Path]) -> Path:
    """All SUTs of a run side by side: the verdict table, then each SUT's main graph."""
    runs_root = run_dir.parent
    rows: list[str] = []
    graphs: list[str] = []
    summaries: list[SummaryDoc] = []
    # A faults column only where a system had faults: the index of a plain run is as it was.
    # (Summaries first: each system's series are loaded in turn, one at a time in memory.)
    faulted = any(read_summary(SutDir(d).summary_json).get("faults") for d in sut_dirs)
    for layout in map(SutDir, sut_dirs):
        summary, metrics, cumulative, _ = _load(layout)
        summaries.append(summary)
        counts = summary["counts"]
        link = href(layout.report_html, run_dir)
        faults = summary.get("faults") or []
        rows.append(
            f"<tr class='{_verdict_class(summary)}'>"
            f"<td class='text'><a href='{link}'>{cell(shown_name(summary))}</a></td>"
            f"<td class='text'>{cell(headline(summary))}</td>"
            f"<td>{cell(_latency_cell(summary['latency_ms']['e2e']))}</td>"
            f"<td>{cell(_with_causes(counts['send_failures'], counts.get('failures_by_cause')))}"
            f"</td><td>{cell(counts['lost'])}</td>"
            f"<td>{cell(counts['duplicates'])}</td>"
            + (f"<td class='text'>{cell(faults_brief(faults))}</td>" if faulted else "")
            + "</tr>"
        )
        figure = six_series(
            metrics,
            cumulative,
            summary["steps"],
            summary["breaking_point_per_s"],
            plotly_text(shown_name(summary)),
            summary.get("faults", []),
        )
        figure.update_layout(height=420)
        graphs.append(f"<div>{figure_html(figure, f'six-{len(graphs)}')}</div>")
    spectrum = systems_spectrum(summaries)  # below the systems' columns, the whole width
    below = "" if spectrum is None else figure_html(spectrum, "spectrum-systems")
    body = (
        f"<h1>{html.escape(run_dir.name)}</h1>{_index_banners(summaries)}"
        "<table><tr><th>SUT</th><th>verdict</th>"
        "<th>end-to-end</th><th>send failures</th><th>lost</th><th>duplicates</th>"
        + ("<th>faults</th>" if faulted else "")
        + "</tr>"
        + "".join(rows)
        + "</table>"
        + repeats_html(summaries, cell)
        + _fanout_html(summaries, sut_dirs)
        + "<div class='grid'>"
        + "".join(graphs)
        + "</div>"
        + below
    )
    path = run_index_html(run_dir)
    write_text_atomically(path, page(run_dir.name, plotly_js(runs_root), run_dir, body))
    return path
