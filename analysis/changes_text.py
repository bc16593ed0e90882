"""`compare`'s calls as people read them (analysis.changes): for each later run of a system, a
headline, its capacity beside the baseline's, and each shared step's e2e P50, P99 and P99.99
with both values, the change with its interval and the call; the same as HTML tables for the
page, and the regressions the gate says. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from analysis.changes import (
    FAILED,
    LATENCIES,
    NOT_CALLED,
    SEARCHES,
    STAIRCASES,
    CapacityChange,
    LatencyChange,
    PairComparison,
    StepChange,
)
from analysis.confidence import BETTER, WORSE
from analysis.summary import latency_text
from contract.searchdocs import SearchProbeDoc

NOT_COUNTED = (
    "not counted: a step that did not hold or break in both runs (sender-limited, host "
    "saturated, too few events, faulted) decides nothing"
)


def signed_ms(ms: float) -> str:
    """A change of latency: `+0.110 ms`, `-1.20 s`, `0 ms`."""
    return f"+{latency_text(ms)}" if ms > 0 else latency_text(ms)


def change_text(change: LatencyChange) -> str:
    """The change and its 95 % interval: `+0.110 ms (+0.050 ms to +0.170 ms)`; an open end as
    `at least` / `at most`; without either end, the change alone."""
    if change.delta_ms is None:
        return "-"
    delta = signed_ms(change.delta_ms)
    lo, hi = change.lo_ms, change.hi_ms
    if lo is None and hi is None:  # no interval, or neither end bounded
        return delta
    if hi is None:
        return f"{delta} (at least {signed_ms(lo or 0.0)})"
    if lo is None:
        return f"{delta} (at most {signed_ms(hi)})"
    return f"{delta} ({signed_ms(lo)} to {signed_ms(hi)})"


def call_text(change: LatencyChange, counted: bool) -> str:
    if change.call == NOT_CALLED:
        return f"{NOT_CALLED} ({change.why})"
    return change.call if counted else f"{change.call}, not counted"


def headline(p: PairComparison) -> str:
    """`channel-imc: c4 against c256: worse (breaking point, max sustainable, e2e at 5 of 11
    steps both judged)`: the system, the runs and the verdict."""
    return f"{p.sut}: {p.after_run} against {p.before_run}: {verdict_text(p)}"


def verdict_text(p: PairComparison) -> str:
    """The verdict and what made it: `worse (...)`, `worse (...); better (...)`, `better
    (...)`, `indistinguishable`, `not called`, `not compared`."""
    if p.kind == FAILED:
        return p.verdict
    parts = [f"{call} ({what})" for call in (WORSE, BETTER) if (what := _what(p, call))]
    return "; ".join(parts) or p.verdict


def _what(p: PairComparison, call: str) -> str:
    called = p.called(call)
    found = [c.name for step, c in called if step is None]
    steps = len({id(step) for step, _ in called if step is not None})
    if steps:
        found.append(f"e2e at {steps} of {sum(s.counted for s in p.steps)} steps both judged")
    return ", ".join(found)


def regression_lines(p: PairComparison) -> list[str]:
    """Each call that makes `p` a regression, with both figures: `broker-imc in run-2: step 3
    (1200/s) e2e P99 2.10 ms -> 9.50 ms, worse than in run-1`."""
    lines = []
    for step, change in p.worse():
        if isinstance(change, CapacityChange):
            what = f"{change.name} {change.before_text} -> {change.after_text}"
        else:
            where = (
                f"step {step.after['step']} ({step.rate_per_s}/s)" if step and step.after else ""
            )
            what = (
                f"{where} e2e {LATENCIES[change.name]} {latency_text(change.before_ms)} -> "
                f"{latency_text(change.after_ms)}, {change_text(change)}"
            )
        lines.append(f"{p.sut} in {p.after_run}: {what}: worse than in {p.before_run}")
    return lines


def capacity_rows(p: PairComparison) -> list[list[str]]:
    head = ["capacity", p.before_run, p.after_run, "change", "call"]
    return [head] + [
        [
            c.name,
            c.before_text,
            c.after_text,
            "-" if c.delta_per_s is None else f"{c.delta_per_s:+d}/s",
            c.call,
        ]
        for c in p.capacity
    ]


def step_rows(p: PairComparison) -> list[list[str]]:
    """A line per figure of each shared step, its rate and both verdicts on the first; a step
    of one run only on one line, said so."""
    head = ["step", "rate", "verdicts", "e2e", p.before_run, p.after_run, "change (95 %)", "call"]
    rows = [head]
    for step in p.steps:
        rows += _step_lines(p, step)
    return rows


def _step_lines(p: PairComparison, step: StepChange) -> list[list[str]]:
    shown = step.after or step.before
    number = str(shown["step"]) if shown else "-"
    rate = f"{step.rate_per_s}/s"
    if step.before is None or step.after is None:
        alone = p.after_run if step.before is None else p.before_run
        return [[number, rate, f"only in {alone}", "", "", "", "", ""]]
    verdicts = f"{step.before['verdict']} -> {step.after['verdict']}"
    lines = []
    for index, change in enumerate(step.latencies):
        lead = [number, rate, verdicts] if index == 0 else ["", "", ""]
        before, after = latency_text(change.before_ms), latency_text(change.after_ms)
        said = [change_text(change), call_text(change, step.counted)]
        lines.append([*lead, LATENCIES[change.name], before, after, *said])
    return lines


def probe_rows(p: PairComparison) -> list[list[str]]:
    """Two searches' probes, rate by rate: each probe's e2e P99 and verdict."""
    head = ["probed", f"{p.before_run}: e2e P99", f"{p.after_run}: e2e P99"]
    return [head] + [
        [f"{rate}/s", _probes_text(before), _probes_text(after)] for rate, before, after in p.probes
    ]


def _probes_text(probes: Sequence[SearchProbeDoc]) -> str:
    if not probes:
        return "-"
    return "; ".join(
        f"{latency_text(probe['e2e_p99_ms'])} {probe['verdict']}"
        + (" (confirming)" if probe["confirm"] else "")
        for probe in probes
    )


def tails_text(p: PairComparison) -> str:
    """The whole-run tails of two staircases, told as information only."""
    shown = ", ".join(
        f"{label} {latency_text(before)} -> {latency_text(after)}"
        for label, before, after in p.tails
    )
    return (
        f"whole run, information only (it mixes every step's rate, so it is never the call): "
        f"e2e {shown}"
    )


def aligned(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """A plain table for the terminal, each column as wide as its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def pair_lines(p: PairComparison) -> list[str]:
    """Everything `compare` prints of one later run of a system."""
    lines = [headline(p)]
    if p.kind == FAILED:
        return lines + [f"  {note}" for note in p.notes]
    lines += aligned(capacity_rows(p))
    if p.kind == SEARCHES and p.probes:
        lines += aligned(probe_rows(p))
    if p.kind == STAIRCASES:
        lines += aligned(step_rows(p))
        lines += [f"  {note}" for note in [*_not_counted(p), tails_text(p)]]
    return lines + [f"  {note}" for note in p.notes]


def _not_counted(p: PairComparison) -> list[str]:
    return [NOT_COUNTED] if any(not s.counted and s.latencies for s in p.steps) else []


def pair_html(p: PairComparison, cell: Callable[[object], str]) -> str:
    """The same for the page: a heading, the tables, the notes (`cell` escapes a value)."""
    tables = [] if p.kind == FAILED else [capacity_rows(p)]
    if p.kind == SEARCHES and p.probes:
        tables.append(probe_rows(p))
    if p.kind == STAIRCASES:
        tables.append(step_rows(p))
    notes = list(p.notes)
    if p.kind == STAIRCASES:
        notes = [*_not_counted(p), tails_text(p), *notes]
    return (
        f"<h2>{cell(headline(p))}</h2>"
        + "".join(_html_table(rows, cell) for rows in tables)
        + "".join(f"<p class='note'>{cell(note)}</p>" for note in notes)
    )


def _html_table(rows: Sequence[Sequence[str]], cell: Callable[[object], str]) -> str:
    head = "".join(f"<th>{cell(c)}</th>" for c in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(c)}</td>" for c in row) + "</tr>" for row in rows[1:]
    )
    return f"<table><tr>{head}</tr>{body}</table>"
