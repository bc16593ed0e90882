"""`evbench compare`: the same systems across analysed runs, side by side, and each later run of
a system against its first: capacity and every step both share (analysis.changes, its calls;
analysis.changes_text, as said). A staircase's whole-run tails are shown, never called. A
system repeated in a run (`run --repeat N`) is one row there, its intervals the repeats' ranges
(analysis.repeats.merged_rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.changes import capacity_ranges, capacity_texts, compare_pair, compared_step
from analysis.changes_text import pair_html, pair_lines, regression_lines, verdict_text
from analysis.fault_report import faults_brief
from analysis.figures import comparison
from analysis.pages import cell, figure_html, href, page, plotly_js, plotly_text
from analysis.repeats import left_out, system_name
from analysis.spectrum import RUN, spectrum_figure
from analysis.summary import latency_text, read_summary
from contract.errors import EvbenchError
from contract.layout import SutDir
from runtime.files import write_text_atomically
from runtime.runs import analysed_summaries

Row = dict[str, Any]  # a comparison row: one (run, SUT)


def run_labels(run_dirs: list[Path]) -> list[str]:
    """How each run is named in the table: its directory's name, or with the directory above
    where two runs share a name (a CI baseline kept apart from a new run of the same id)."""
    names = [d.resolve().name for d in run_dirs]
    return [
        f"{d.resolve().parent.name}/{name}" if names.count(name) > 1 else name
        for d, name in zip(run_dirs, names, strict=True)
    ]


def comparison_rows(run_dirs: list[Path]) -> list[Row]:
    """One row per (run, SUT) from each analysed summary.json."""
    rows = []
    for run_dir, label in zip(run_dirs, run_labels(run_dirs), strict=True):
        summaries = analysed_summaries(run_dir)
        if not summaries:
            raise EvbenchError(
                f"{run_dir}: no analysed SUTs; run `evbench analyze {run_dir}` first"
            )
        for path in summaries:
            summary = read_summary(path)
            e2e = summary["latency_ms"]["e2e"]
            point, held = summary["breaking_point_per_s"], summary["max_sustainable_rate_per_s"]
            rows.append(
                {
                    "run": label,
                    "run_dir": str(run_dir.resolve()),
                    "sut": system_name(summary),  # a fan-out's N apart
                    "breaking_point_per_s": summary["breaking_point_per_s"],
                    "max_sustainable_rate_per_s": summary["max_sustainable_rate_per_s"],
                    "instrument_failures": summary.get("instrument_failures") or [],
                    "p99_e2e_ms": e2e["p99"],
                    "p9999_e2e_ms": e2e["p9999"],
                    "repeat": summary.get("repeat"),
                    "e2e_n": e2e["n"],
                    "p9999_is_max": e2e["p9999_is_max"],
                    "send_failures": summary["counts"]["send_failures"],
                    "lost": summary["counts"]["lost"],
                    "searched": "search" in summary,
                    "steps": [compared_step(step) for step in summary["steps"]],
                    "probes": summary["search"]["probes"] if "search" in summary else [],
                    "capacity": capacity_ranges(point, held),
                    "capacity_text": capacity_texts(point, held),
                    "faults": faults_brief(summary.get("faults") or []),
                    "verdict": summary["verdict"],
                    "report": SutDir(path.parent.parent).report_html,
                    "ci95": e2e.get("ci95", {}),  # absent in summaries analysed before
                    "spectrum": (summary.get("spectrum") or {}).get("e2e", {}).get(RUN, []),
                }
            )
    return rows


def with_changes(rows: list[Row], tolerance: float = 0.0) -> list[Row]:
    """Each row with `against` (the first run that has its SUT) and `compared`: for a later
    run, analysis.changes.compare_pair against that first run's row; None for the first."""
    first: dict[str, Row] = {}
    found = []
    for row in rows:
        base = first.setdefault(row["sut"], row)
        compared = None if base is row else compare_pair(base, row, tolerance)
        found.append({**row, "compared": compared, "against": base["run"]})
    return found


def regressions(rows: list[Row]) -> list[str]:
    """What came out worse than its first run, a line per call (analysis.changes: a capacity
    figure lower, a figure of a step both judged higher), each `sut in run: ...`."""
    return [line for r in rows if r.get("compared") for line in regression_lines(r["compared"])]


def calls_text(rows: list[Row]) -> str:
    """Each later run of a system against its first, as `compare` prints it."""
    return "\n".join(line for r in rows if r.get("compared") for line in pair_lines(r["compared"]))


def comparison_text(rows: list[Row]) -> str:
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


def _verdict_cell(row: Row) -> str:
    """A later run's verdict and what made it; "-" for the first."""
    compared = row.get("compared")
    return verdict_text(compared) if compared else "-"


def _comparison_cell(row: Row) -> str:
    return _repeats_text(row) + _one_cell(row)


def _repeats_text(row: Row) -> str:
    """A repeated system's figures are its middle repeat's, of those whose instruments held."""
    if not row.get("repeats"):
        return ""
    return f"median of {row['judged']} repeats{left_out(row)}: "


def _one_cell(row: Row) -> str:
    point = row["breaking_point_per_s"]
    if row.get("instrument_failures"):
        return "instrument failed"  # no figure of that run speaks for the system
    tail = f"{'max' if row['p9999_is_max'] else 'p99.99'} {latency_text(row['p9999_e2e_ms'])}"
    faults = "" if row["faults"] == "-" else f"; {row['faults']}"
    if row.get("searched"):  # a bracket found by probing, or why none was, in the search's words
        return f"{row['verdict']}, e2e {tail}{faults}"
    verdict = f"breaks at {point}/s" if point else "held"
    sustainable = f"max sustainable {row['max_sustainable_rate_per_s'] or '-'}/s"
    return f"{verdict}, {sustainable}, e2e {tail}{faults}"


def _rates(row: Row) -> tuple[str, str]:
    """The two rate cells of a comparison row; a run whose instrument failed has neither."""
    if row.get("instrument_failures"):
        return "instrument failed", "instrument failed"
    return (
        str(row["breaking_point_per_s"] or "-"),
        str(row["max_sustainable_rate_per_s"] or "-"),
    )


def _spectra(rows: list[Row]) -> str:
    """Each (run, SUT)'s e2e spectrum, one line each (nothing when no run has one)."""
    lines = {
        plotly_text(f"{r['sut']} in {r['run']}"): r["spectrum"] for r in rows if r.get("spectrum")
    }
    if not lines:
        return ""
    figure = spectrum_figure(lines, {}, "e2e latency by percentile, each system in each run")
    return figure_html(figure, "spectrum-compared")


def _repeats_note(row: Row) -> str:
    """A repeated system's run cell says its figures are the middle repeat's."""
    if not row.get("repeats"):
        return ""
    return cell(f" ({_repeats_text(row).removesuffix(': ')})")


def write_comparison(rows: list[Row], out: Path) -> Path:
    runs_root = out.parent
    faulted = any(r["faults"] != "-" for r in rows)
    table = "".join(
        f"<tr class='{'instrument-failed' if r.get('instrument_failures') else ''}'>"
        f"<td class='text'>{cell(r['run'])}{_repeats_note(r)}</td><td class='text'>"
        f"<a href='{href(r['report'], runs_root)}'>"
        f"{cell(r['sut'])}</a></td><td>{cell(_rates(r)[0])}</td>"
        f"<td>{cell(_rates(r)[1])}</td>"
        f"<td>{cell(latency_text(r['p9999_e2e_ms']))}{' (max)' if r['p9999_is_max'] else ''}"
        f" (n={cell(r['e2e_n'])})</td><td>{cell(r['send_failures'])}</td>"
        f"<td>{cell(r['lost'])}</td>"
        + f"<td class='text'>{cell(_verdict_cell(r))}</td>"
        + (f"<td class='text'>{cell(r['faults'])}</td>" if faulted else "")
        + "</tr>"
        for r in rows
    )
    shown = [{**r, "run": plotly_text(r["run"]), "sut": plotly_text(r["sut"])} for r in rows]
    body = (
        "<h1>Runs compared</h1><table><tr><th>run</th><th>SUT</th><th>breaking point</th>"
        "<th>max sustainable</th><th>e2e P99.99</th><th>send failures</th><th>lost</th>"
        "<th>against the first run: capacity and each step (95 % intervals; repeated: the "
        "repeats' ranges)</th>"
        + ("<th>faults</th>" if faulted else "")
        + "</tr>"
        + table
        + "</table>"
        + "".join(pair_html(r["compared"], cell) for r in rows if r.get("compared"))
        + figure_html(comparison(shown), "comparison")
        + _spectra(rows)
    )
    write_text_atomically(out, page("Runs compared", plotly_js(runs_root), runs_root, body))
    return out
