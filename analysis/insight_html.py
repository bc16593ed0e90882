"""The report's "System metrics" and "Profiles" sections (analysis.report): what the run saw
inside the system, from run.json's `scrapes` and `profiles` (contract.insight) and the samples
under samples/metrics/. A run without either has neither section (no empty boxes).

Everything shown comes from the system under test or from run.json (endpoint names, URLs,
label values, error texts, file names): escaped for where it lands. A profile's file is linked
only when it lies inside the system's directory and exists; links are relative, so a copied or
served runs/ directory keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

from analysis.figures import step_spans
from analysis.insight import read_samples, system_metrics
from analysis.insight_figures import metric_plot, x_range
from analysis.pages import cell, figure_html, href
from contract.documents import RunDoc, read_document
from contract.errors import RecordFileError
from contract.insight import ProfileDoc, ScrapeDoc
from contract.layout import SutDir
from contract.summarydocs import StepSummaryDoc, SummaryDoc

Row = dict[str, Any]  # a second of metrics.parquet

RULES_NOTE = (
    "Scraped from the system's Prometheus endpoints during the run. Counters (and histograms' "
    "and summaries' _count and _sum) are per-second rates between consecutive scrapes; a "
    "counter that went down was reset, and its line has a gap there instead of a negative "
    "rate. Gauges are as scraped. Histogram buckets are not plotted."
)
SPEEDSCOPE = "https://www.speedscope.app"
# What each kind of profile file is, by how its name ends (evbench.profiles names them).
FILE_NOTES = (
    (".svg", "flame graph (below; opened alone, each frame names its samples on hover)"),
    (
        ".speedscope.json",
        f"open in <a href='{SPEEDSCOPE}' target='_blank' rel='noopener'>{SPEEDSCOPE}</a>",
    ),
    (".raw.txt", "collapsed stacks, one line per stack (flamegraph.pl reads them)"),
    (".pb.gz", "pprof profile"),
)


def system_sections(
    layout: SutDir, summary: SummaryDoc, metrics: list[Row], plot_metrics: Sequence[str] = ()
) -> str:
    """Both sections of one system's report (each empty when the run has nothing for it)."""
    run: RunDoc | dict[str, Any] = (
        read_document(layout.run_json, RunDoc) if layout.run_json.is_file() else {}
    )
    scrapes: list[ScrapeDoc] = run.get("scrapes") or []
    profiles: list[ProfileDoc] = run.get("profiles") or []
    return metrics_section(layout, scrapes, summary, metrics, plot_metrics) + profiles_section(
        layout, profiles, summary["steps"]
    )


def metrics_section(
    layout: SutDir,
    scrapes: list[ScrapeDoc],
    summary: SummaryDoc,
    metrics: list[Row],
    plot_metrics: Sequence[str],
) -> str:
    """The chosen series, one plot per sample name, over the steps; then the endpoints."""
    try:
        table = read_samples(layout.scraped_metrics)
    except RecordFileError as exc:  # the rest of the report stands without them
        return (
            f"<h2>System metrics</h2><p class='note'>{cell(exc)}</p>"
            f"<h3>Scrape endpoints</h3>{scrape_table(scrapes)}"
        )
    if not scrapes and table.num_rows == 0:
        return ""
    failed = {s["name"] for s in scrapes if s["failures"]}
    found = system_metrics(table, summary["schedule_start_ns"], plot_metrics, failed)
    spans = step_spans(metrics)
    shared_range = x_range(found.plots, spans)
    plots = "".join(
        figure_html(metric_plot(lines, summary["steps"], spans, shared_range), f"system-metric-{i}")
        for i, lines in enumerate(found.plots)
    )
    chosen = (
        "Plotted: what --plot-metric " + ", ".join(plot_metrics) + " named."
        if plot_metrics
        else "Plotted by default: the families named like consumed, dispatched, queue, lag or "
        "gc (choose others with --plot-metric NAME, a name or a glob)."
    )
    if found.failed:
        chosen += (
            " up and scrape_duration_seconds are shown for the endpoints that failed: "
            + ", ".join(found.failed)
            + "."
        )
    notes = "".join(f"<p class='note'>{cell(note)}</p>" for note in found.notes)
    return (
        f"<h2>System metrics</h2><p class='note'>{cell(RULES_NOTE)} {cell(chosen)}</p>"
        f"{notes}{plots}<h3>Scrape endpoints</h3>{scrape_table(scrapes)}"
    )


SCRAPE_COLUMNS = ("name", "origin", "url", "interval_s", "scrapes", "failures", "samples")


def scrape_table(scrapes: list[ScrapeDoc]) -> str:
    """One row per endpoint: how scraping it went; a row with failures is marked."""
    if not scrapes:
        return "<p class='note'>run.json records no scrape endpoints.</p>"
    head = "".join(f"<th>{c}</th>" for c in SCRAPE_COLUMNS) + "<th>slowest (s)</th>"
    rows = []
    for scrape in scrapes:
        shown: Row = dict(scrape)
        # Left-aligned without td.text's minimum width: ten columns must fit a window.
        cells = "".join(
            f"<td class='left'>{cell(shown.get(c))}</td>"
            if c in ("name", "origin", "url")
            else f"<td>{cell(shown.get(c))}</td>"
            for c in SCRAPE_COLUMNS
        )
        slowest = scrape.get("slowest_s")
        cells += f"<td>{cell(f'{slowest:.3f}' if slowest is not None else '-')}</td>"
        cells += f"<td class='left'>{cell(scrape.get('last_error') or '')}</td>"
        marked = " class='scrape-failed'" if scrape.get("failures") else ""
        rows.append(f"<tr{marked}>{cells}</tr>")
    return f"<table><tr>{head}<th>last error</th></tr>{''.join(rows)}</table>"


def profiles_section(
    layout: SutDir, profiles: list[ProfileDoc], steps: Sequence[StepSummaryDoc]
) -> str:
    """Under each step, its profiles: what each took, its files linked, its error."""
    if not profiles:
        return ""
    rates = {s["step"]: s["target_rate_per_s"] for s in steps}
    parts = [
        "<h2>Profiles</h2><p class='note'>Taken during each step, stored as they came under "
        f"the system's directory ({cell(layout.root.name)}/profiles/step-N/).</p>"
    ]
    ordered = sorted(profiles, key=lambda p: (p["step"], p["target"], p["kind"]))
    for step, group in groupby(ordered, key=lambda p: p["step"]):
        rate = rates.get(step)
        parts.append(f"<h3>Step {cell(step)}{f': {rate}/s' if rate else ''}</h3>")
        parts.extend(profile_html(layout, profile) for profile in group)
    return "".join(parts)


def profile_html(layout: SutDir, profile: ProfileDoc) -> str:
    facts = [profile["kind"], _timing(profile)]
    if "samples" in profile:
        facts.append(f"{profile['samples']} stacks sampled")
    if "pid" in profile:
        facts.append(f"pid {profile['pid']}")
    if "profiler_cpu_s" in profile:
        facts.append(f"py-spy itself used at least {profile['profiler_cpu_s']:.1f} CPU s")
    head = f"<p><b>{cell(profile['target'])}</b> · {cell(' · '.join(facts))}</p>"
    if profile.get("error"):
        head += f"<p class='profile-failed'>failed: {cell(profile['error'])}</p>"
    items, flames = [], []
    for name in profile["files"]:
        path = linkable(layout, name)
        if path is None:
            items.append(f"<li><code>{cell(name)}</code> (missing or outside the directory)</li>")
            continue
        link = href(path, layout.analysis)
        note = next((text for suffix, text in FILE_NOTES if name.endswith(suffix)), "")
        items.append(f"<li><a href='{link}'>{cell(Path(name).name)}</a> {note}</li>")
        if name.endswith(".svg"):
            alt = cell(f"flame graph of {profile['target']}")
            flames.append(f"<img class='flame' src='{link}' alt='{alt}'>")
    files = f"<ul>{''.join(items)}</ul>" if items else ""
    command = (
        f"<p>From the system's directory: <code>{cell(profile['open_with'])}</code></p>"
        if profile.get("open_with")
        else ""
    )
    return f"<div class='profile'>{head}{files}{command}{''.join(flames)}</div>"


def _timing(profile: ProfileDoc) -> str:
    asked = profile["duration_s"]
    what = f"{asked:g} s asked" if asked else "a snapshot"
    return f"{what}, took {profile['wall_s']:.1f} s"


def linkable(layout: SutDir, name: str) -> Path | None:
    """A file run.json names, when it exists inside the system's directory (a name from a
    hand-edited or hostile run.json, `../../x` or `/etc/x`, is shown but never linked)."""
    if not name or Path(name).is_absolute():
        return None
    path = layout.root / name
    try:
        path.resolve().relative_to(layout.root.resolve())
    except ValueError:
        return None
    return path if path.is_file() else None
