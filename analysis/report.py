"""HTML reports: runs/<run>/<sut>/analysis/report.html per SUT and runs/<run>/index.html.

Works offline: plotly.js is written once per runs/ directory and every report refers to it by a
relative path, so a runs/ directory can be copied, zipped or served as it is.

Names of runs and SUTs come from users (and from directories made by hand or by older versions,
so they are never trusted): every string is escaped for where it lands (HTML text, attributes,
URLs, Plotly's text), and element ids are derived from positions, never from names.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from urllib.parse import quote

import plotly
import plotly.offline
import pyarrow.parquet as pq

from analysis.figures import (
    comparison,
    latency_points,
    memory_over_time,
    resource_samples,
    search_probes,
    sender_health,
    six_series,
)
from analysis.memory import (
    PLATEAU_S,
    RETURN_SLACK_BYTES,
    RETURN_TOLERANCE,
    describe_lines,
    peak_table,
)
from analysis.verdicts import verdict_text
from contract.documents import schedule_start_ns
from contract.errors import EvbenchError
from contract.layout import SutDir, analysed_summaries, run_index_html

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f3f3f3; } td.text { text-align: left; min-width: 28rem; }
.holds { background: #e6f4ea; } .breaks { background: #fde7e7; }
.sender-limited, .insufficient-data { background: #eee; }
.instrument-failed { background: #fff3cd; }
.banner { padding: 0.6rem 1rem; margin: 0.5rem 0 1rem; border-left: 0.4rem solid; }
.banner.failed { background: #fde7e7; border-color: #d62728; }
.banner.interrupted { background: #fff3cd; border-color: #e0a800; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 1rem; }
.note { color: #555; font-size: 0.85rem; max-width: 60rem; }
"""


def plotly_js(runs_root: Path) -> Path:
    """The one offline copy of plotly.js for every report under `runs_root`."""
    path = runs_root / f"plotly-{plotly.__version__}.min.js"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(plotly.offline.get_plotlyjs())
        tmp.replace(path)
    return path


def _page(title: str, script: Path, at: Path, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style><script src='{_href(script, at)}'></script></head>"
        f"<body>{body}</body></html>"
    )


def _href(target: Path, base: Path) -> str:
    """A relative URL for an attribute: percent-encoded, so a directory named `javascript:x`
    or holding quotes stays a path."""
    return html.escape(quote(os.path.relpath(target, base)))


def _cell(value: object) -> str:
    return html.escape(str(value))


def _plotly_text(text: str) -> str:
    """Plotly renders a subset of HTML in titles and legends; escaped, a name shows as typed."""
    return html.escape(text, quote=False)


def _figure_html(figure, div_id: str) -> str:
    """`div_id` is a fixed name or one derived from a position: Plotly pastes it unescaped
    into the page's HTML and script."""
    return figure.to_html(full_html=False, include_plotlyjs=False, div_id=div_id)


def _load(layout: SutDir) -> tuple[dict, list[dict], list[dict], list[dict]]:
    summary = json.loads(layout.summary_json.read_text())
    metrics = pq.read_table(layout.metrics_parquet).to_pylist()
    cumulative = pq.read_table(layout.cumulative_parquet).to_pylist()
    points = pq.read_table(layout.points_parquet).to_pylist()
    return summary, metrics, cumulative, points


def headline(summary: dict) -> str:
    return verdict_text(
        summary["breaking_point_per_s"],
        summary["max_sustainable_rate_per_s"],
        summary.get("instrument_failures", ()),
    )


def status_banner(summary: dict) -> str:
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


def _index_banners(summaries: list[dict]) -> str:
    """The index's top: one banner per system whose run failed or was interrupted."""
    return "".join(
        f"<h3>{html.escape(summary['sut'])}</h3>{banner}"
        for summary in summaries
        if (banner := status_banner(summary))
    )


def _verdict_class(summary: dict) -> str:
    if summary.get("instrument_failures"):
        return "instrument-failed"
    return "breaks" if summary["breaking_point_per_s"] else "holds"


def _latency_cell(figures: dict) -> str:
    if not figures or not figures.get("n"):
        return "-"
    label = "max" if figures.get("p9999_is_max") else "P99.99"
    return f"{figures['p9999']} ms ({label}, n={figures['n']})"


def _steps_table(steps: list[dict]) -> str:
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
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "<th>why</th>"
    rows = []
    for step in steps:
        cells = "".join(f"<td>{_cell(step.get(c))}</td>" for c in columns)
        why = html.escape("; ".join(step.get("reasons", [])))
        rows.append(f"<tr class='{_cell(step['verdict'])}'>{cells}<td class='text'>{why}</td></tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _counts_table(summary: dict) -> str:
    counts = summary["counts"]
    head = "".join(f"<th>{_cell(k)}</th>" for k in counts)
    cells = "".join(f"<td>{_cell(v)}</td>" for v in counts.values())
    lat = summary["latency_ms"]
    lat_head = "<th>latency</th>" + "".join(
        f"<th>{k}</th>" for k in ("p50", "p99", "p999", "p9999", "max", "n")
    )
    lat_rows = "".join(
        f"<tr><td class='text'>{_cell(name)}</td>"
        + "".join(
            f"<td>{_cell(fig.get(k))}</td>" for k in ("p50", "p99", "p999", "p9999", "max", "n")
        )
        + "</tr>"
        for name, fig in lat.items()
    )
    return (
        f"<table><tr>{head}</tr><tr>{cells}</tr></table>"
        f"<table><tr>{lat_head}</tr>{lat_rows}</table>"
    )


def _samples(directory: Path, prefix: str) -> list[dict]:
    paths = sorted(directory.glob(f"{prefix}-*.parquet"))
    rows: list[dict] = []
    for path in paths:
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def _resources_html(sut_dir: Path) -> str:
    """Process samples (and consumer lag), when the run recorded them (imports have none)."""
    layout = SutDir(sut_dir)
    processes = _samples(layout.samples, "processes")
    if not processes:
        return ""
    lag = _samples(layout.consumer_lag, "lag")
    run = json.loads(layout.run_json.read_text())
    start_ns = schedule_start_ns(run) or min(r["t_ns"] for r in processes)
    figure = resource_samples(processes, lag, start_ns, "Processes of the run")
    return "<h2>Resources</h2>" + _figure_html(figure, "resources")


def clock_note(summary: dict) -> str:
    """What the analysis did about the sender's and receiver's clocks, and within what bound;
    nothing for summaries from before clock offsets were measured."""
    clock = summary.get("clock")
    if not clock:
        return ""
    text = clock["note"]
    if workers := clock["workers"]:
        text += "; offsets " + ", ".join(
            f"worker {w}: {c['offset_ns'] / 1e6:+.3f} ms ± {c['bound_ns'] / 1e6:.3f}, "
            f"drift {c['drift_ns'] / 1e6:+.3f} ms"
            for w, c in workers.items()
        )
    if clock["negative_e2e"]:
        text += f"; {clock['negative_e2e']} events arrived before they were due (clock error)"
    return f"<p class='note clock'>Clocks: {html.escape(text)}</p>"


def _search_html(summary: dict) -> str:
    """A capacity search's probes and result; nothing for other runs."""
    search = summary.get("search")
    if not search or not search.get("probes"):
        return ""
    result = search.get("result") or {}
    text = result.get("why") or "the search did not finish"
    return f"<h2>Capacity search</h2><p>{html.escape(text)}</p>" + _figure_html(
        search_probes(search["probes"], "Probes"), "search-probes"
    )


def write_report(sut_dir: Path, runs_root: Path | None = None) -> Path:
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
        _plotly_text(f"{summary['sut']}: {headline(summary)}"),
    )
    trimmed = f"<p class='note'>{html.escape(summary['trimmed'])}</p>" if summary["trimmed"] else ""
    trimmed += clock_note(summary)
    body = (
        f"<h1>{html.escape(name)}</h1>{status_banner(summary)}"
        f"<p><b>{html.escape(headline(summary))}</b>; end-to-end "
        f"{html.escape(_latency_cell(summary['latency_ms']['e2e']))}</p>{trimmed}"
        + _counts_table(summary)
        + _figure_html(six, "six-series")
        + "<p class='note'>The latency lines are cumulative, as in 2019: at each second, the "
        "P99.99 of every event sent up to then, from T-Digests, so an early spike dominates the "
        "start and the right end is the whole run. The tables' tail figures are exact where "
        "the kept top values reach (see <code>exact</code> in summary.json).</p>"
        "<h2>Steps</h2>"
        + _steps_table(summary["steps"])
        + _figure_html(latency_points(points, "Latency of every event"), "latency-points")
        + _figure_html(sender_health(summary["steps"], "Sender health"), "sender-health")
        + _search_html(summary)
        + _resources_html(sut_dir)
        + "<h2>Thresholds</h2><pre>"
        + html.escape(json.dumps(summary["thresholds"], indent=2))
        + "</pre>"
    )
    path = layout.report_html
    path.write_text(_page(name, plotly_js(runs_root), analysis_dir, body))
    return path


def write_index(run_dir: Path, sut_dirs: list[Path]) -> Path:
    """All SUTs of a run side by side: the verdict table, then each SUT's main graph."""
    runs_root = run_dir.parent
    rows, graphs, summaries = [], [], []
    for sut_dir in sut_dirs:
        layout = SutDir(sut_dir)
        summary, metrics, cumulative, _ = _load(layout)
        summaries.append(summary)
        counts = summary["counts"]
        link = _href(layout.report_html, run_dir)
        rows.append(
            f"<tr class='{_verdict_class(summary)}'>"
            f"<td class='text'><a href='{link}'>{_cell(summary['sut'])}</a></td>"
            f"<td class='text'>{_cell(headline(summary))}</td>"
            f"<td>{_cell(_latency_cell(summary['latency_ms']['e2e']))}</td>"
            f"<td>{_cell(counts['send_failures'])}</td><td>{_cell(counts['lost'])}</td>"
            f"<td>{_cell(counts['duplicates'])}</td></tr>"
        )
        figure = six_series(
            metrics,
            cumulative,
            summary["steps"],
            summary["breaking_point_per_s"],
            _plotly_text(summary["sut"]),
        )
        figure.update_layout(height=420)
        graphs.append(f"<div>{_figure_html(figure, f'six-{len(graphs)}')}</div>")
    body = (
        f"<h1>{html.escape(run_dir.name)}</h1>{_index_banners(summaries)}"
        "<table><tr><th>SUT</th><th>verdict</th>"
        "<th>end-to-end</th><th>send failures</th><th>lost</th><th>duplicates</th></tr>"
        + "".join(rows)
        + "</table><div class='grid'>"
        + "".join(graphs)
        + "</div>"
    )
    path = run_index_html(run_dir)
    path.write_text(_page(run_dir.name, plotly_js(runs_root), run_dir, body))
    return path


def comparison_rows(run_dirs: list[Path]) -> list[dict]:
    """One row per (run, SUT) from each analysed summary.json."""
    rows = []
    for run_dir in run_dirs:
        summaries = analysed_summaries(run_dir)
        if not summaries:
            raise EvbenchError(
                f"{run_dir}: no analysed SUTs; run `evbench analyze {run_dir}` first"
            )
        for path in summaries:
            summary = json.loads(path.read_text())
            e2e = summary["latency_ms"]["e2e"]
            rows.append(
                {
                    "run": run_dir.name,
                    "sut": summary["sut"],
                    "breaking_point_per_s": summary["breaking_point_per_s"],
                    "max_sustainable_rate_per_s": summary["max_sustainable_rate_per_s"],
                    "instrument_failures": summary.get("instrument_failures", []),
                    "p9999_e2e_ms": e2e["p9999"],
                    "e2e_n": e2e["n"],
                    "p9999_is_max": e2e["p9999_is_max"],
                    "send_failures": summary["counts"]["send_failures"],
                    "lost": summary["counts"]["lost"],
                    "searched": "search" in summary,
                    "verdict": summary["verdict"],
                    "report": SutDir(path.parent.parent).report_html,
                }
            )
    return rows


def comparison_text(rows: list[dict]) -> str:
    """A plain table for the terminal: one line per SUT, one column per run."""
    runs = list(dict.fromkeys(r["run"] for r in rows))
    cells = {(r["sut"], r["run"]): _comparison_cell(r) for r in rows}
    suts = sorted({r["sut"] for r in rows})
    table = [["sut", *runs]] + [
        [sut, *(cells.get((sut, run), "-") for run in runs)] for sut in suts
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return "\n".join(
        " | ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def _comparison_cell(row: dict) -> str:
    point = row["breaking_point_per_s"]
    if row.get("instrument_failures"):
        return "instrument failed"  # no figure of that run speaks for the system
    tail = "max" if row["p9999_is_max"] else "p99.99"
    if row.get("searched"):  # a bracket found by probing, or why none was, in the search's words
        return f"{row['verdict']}, e2e {tail} {row['p9999_e2e_ms']} ms"
    verdict = f"breaks at {point}/s" if point else "held"
    return (
        f"{verdict}, max sustainable {row['max_sustainable_rate_per_s'] or '-'}/s, "
        f"e2e {tail} {row['p9999_e2e_ms']} ms"
    )


def _rates(row: dict) -> tuple[str, str]:
    """The two rate cells of a comparison row; a run whose instrument failed has neither."""
    if row.get("instrument_failures"):
        return "instrument failed", "instrument failed"
    return (
        str(row["breaking_point_per_s"] or "-"),
        str(row["max_sustainable_rate_per_s"] or "-"),
    )


def write_comparison(rows: list[dict], out: Path) -> Path:
    runs_root = out.parent
    table = "".join(
        f"<tr class='{'instrument-failed' if r.get('instrument_failures') else ''}'>"
        f"<td class='text'>{_cell(r['run'])}</td><td class='text'>"
        f"<a href='{_href(r['report'], runs_root)}'>"
        f"{_cell(r['sut'])}</a></td><td>{_cell(_rates(r)[0])}</td>"
        f"<td>{_cell(_rates(r)[1])}</td>"
        f"<td>{_cell(r['p9999_e2e_ms'])} ms{' (max)' if r['p9999_is_max'] else ''}"
        f" (n={_cell(r['e2e_n'])})</td><td>{_cell(r['send_failures'])}</td>"
        f"<td>{_cell(r['lost'])}</td></tr>"
        for r in rows
    )
    shown = [{**r, "run": _plotly_text(r["run"]), "sut": _plotly_text(r["sut"])} for r in rows]
    body = (
        "<h1>Runs compared</h1><table><tr><th>run</th><th>SUT</th><th>breaking point</th>"
        "<th>max sustainable</th><th>e2e P99.99</th><th>send failures</th><th>lost</th></tr>"
        + table
        + "</table>"
        + _figure_html(comparison(shown), "comparison")
    )
    out.write_text(_page("Runs compared", plotly_js(runs_root), runs_root, body))
    return out


def write_memory_report(root: Path, rows: list[dict], series: dict[str, list[dict]]) -> Path:
    """One page for a memory run: memory over time per scenario, seed 000's peak table, and
    each scenario's lag as kafka-consumer-groups prints it."""
    phases = {r["scenario"]: r for r in rows}
    figure = memory_over_time(series, phases, "Consumer memory while draining the backlog")
    lag = "".join(
        f"<h3>{html.escape(r['scenario'])}</h3><pre>"
        + html.escape(
            "\n".join(
                describe_lines(
                    f"memory-{r['consumer']}-p{r['partitions']}",
                    "backlog",
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
        + _figure_html(figure, "memory-over-time")
        + "<h2>Peaks</h2><pre>"
        + html.escape("\n".join(peak_table(rows)))
        + "</pre><p class='note'>Back to idle: the median of the last "
        f"{PLATEAU_S:g} s after the drain within {RETURN_TOLERANCE:.0%} of the idle baseline or "
        f"{RETURN_SLACK_BYTES // 2**20} MiB, whichever is larger. Predicted: the client's "
        "buffer bound from its settings (suts/consumers/predict.py), the idle footprint not "
        "included.</p><h2>Lag at the end</h2>" + lag
    )
    path = root / "report.html"
    path.write_text(_page(root.name, plotly_js(root.parent), root, body))
    return path
