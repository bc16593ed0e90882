"""Repeats of a pace (`evbench run --repeat N`): each figure's median and spread across them, and
the interval `compare` calls changes from. Pure.

N runs of the same pace give each figure N values. Their range [min, max] is its interval
across runs: it covers the median of the run-to-run distribution with probability 1 - 2^(1-N)
(75 % for 3 repeats, 94 % for 5), whatever that distribution's shape, and it holds what one
run's sampling interval cannot: how much the system differs from run to run (broker-imc's P99
was 11.7, 42.8 and 14.1 ms in three runs of one pace, each run's interval ~1 ms wide:
docs/analysis.md). `compare` calls a change where two groups' ranges part; with 3 repeats a
side, two groups of the same system do that by chance 1 time in 10 (2 / C(6, 3), either way).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from analysis.changes import (
    BREAKING,
    CAPACITY_KEYS,
    LATENCIES,
    ComparedStep,
    merged_capacity,
    paired_steps,
)
from analysis.fanout import summary_fanout
from contract.figures import IntervalDoc
from contract.summarydocs import SummaryDoc


class Spread(TypedDict):
    """One figure across the judged repeats (those whose instruments held)."""

    median: float | None  # the middle repeat's (the lower of two); None: that repeat had none
    lo: float | None  # the lowest and highest value among the repeats that had one
    hi: float | None
    n: int  # repeats with a value
    of: int  # repeats judged


@dataclass(frozen=True)
class Figure:
    """A figure given across repeats: how a summary says it, and what a repeat without a
    value means for the median (`absent_rank`: where it sorts, None: left out)."""

    label: str
    unit: str
    get: Callable[[SummaryDoc], float | None]
    absent: str = "none"
    absent_rank: float | None = None


FIGURES: dict[str, Figure] = {
    # No step held: below every rate.
    "max_sustainable_rate_per_s": Figure(
        "max sustainable", "/s", lambda s: s["max_sustainable_rate_per_s"], "none held", -math.inf
    ),
    # Held through the pace: above every rate.
    "breaking_point_per_s": Figure(
        "breaking point", "/s", lambda s: s["breaking_point_per_s"], "held", math.inf
    ),
    "e2e_p99_ms": Figure("e2e P99", " ms", lambda s: s["latency_ms"]["e2e"]["p99"]),
    "e2e_p9999_ms": Figure("e2e P99.99", " ms", lambda s: s["latency_ms"]["e2e"]["p9999"]),
    "lost": Figure("lost", "", lambda s: s["counts"]["lost"]),
    "send_failures": Figure("send failures", "", lambda s: s["counts"]["send_failures"]),
}


def system_name(summary: SummaryDoc) -> str:
    """The system a summary measured, as every page and `compare` tell systems apart: its name,
    and its fan-out when it had one (`broker-imc (10 subscribers)`): a campaign over fan-outs
    measures one system per N."""
    fanout = summary_fanout(summary)
    return summary["sut"] if fanout <= 1 else f"{summary['sut']} ({fanout} subscribers)"


def shown_name(summary: SummaryDoc) -> str:
    """A system as the index names it: `channel-imc`, or `channel-imc, repeat 2 of 3`."""
    repeat = summary.get("repeat")
    name = system_name(summary)
    return name if repeat is None else f"{name}, repeat {repeat['index']} of {repeat['of']}"


def spread(values: Sequence[float | None], absent_rank: float | None = None) -> Spread | None:
    """The middle value (statistics.median_low: one repeat's own figure, a step's rate for a
    rate), lowest and highest of `values`; a None sorts at `absent_rank` for the median (left
    out when None). None when no repeat counts."""
    present = sorted(float(v) for v in values if v is not None)
    absent = sum(v is None for v in values)
    ranked = present + [absent_rank] * absent if absent_rank is not None else present
    if not ranked:
        return None
    middle = statistics.median_low(sorted(ranked))
    return {
        "median": middle if math.isfinite(middle) else None,
        "lo": present[0] if present else None,
        "hi": present[-1] if present else None,
        "n": len(present),
        "of": len(values),
    }


def spread_text(found: Spread | None, unit: str = "", absent: str = "none") -> str:
    """`14.1 ms (11.7-42.8)`, `2000/s (2000-2000; held in 1 of 3)`, `held`; `-` for nothing.
    Four significant digits: the repeats differ well before the fifth."""
    if found is None:
        return "-"
    if found["n"] == 0:
        return absent
    middle = absent if found["median"] is None else f"{found['median']:.4g}{unit}"
    span = f"{found['lo']:.4g}-{found['hi']:.4g}"
    missing = found["of"] - found["n"]
    said = f"; {absent} in {missing} of {found['of']}" if missing else ""
    return f"{middle} ({span}{said})"


def repeats_html(summaries: Sequence[SummaryDoc], cell: Callable[[object], str]) -> str:
    """The index's table of the repeated systems (nothing when none was): per system, each
    FIGURES' median and range across its repeats; `cell` escapes a value for the page."""
    table = repeat_table(summaries)
    if not table:
        return ""
    head = "".join(f"<th>{figure.label}</th>" for figure in FIGURES.values())
    rows = "".join(
        f"<tr><td class='text'>{cell(row['sut'])}</td><td>{cell(_repeats_cell(row))}</td>"
        + "".join(
            f"<td>{cell(spread_text(row[name], figure.unit, figure.absent))}</td>"
            for name, figure in FIGURES.items()
        )
        + "</tr>"
        for row in table
    )
    return (
        "<h2>Across repeats: the middle repeat's figure (lowest-highest)</h2>"
        f"<table><tr><th>SUT</th><th>repeats</th>{head}</tr>{rows}</table>"
    )


def _repeats_cell(row: dict[str, Any]) -> str:
    return f"{row['repeats']}{left_out(row)}"


def left_out(row: dict[str, Any]) -> str:
    """What a row of repeats (the index's or compare's: `repeats`, `judged`) says of the
    repeats whose instruments failed: nothing when none did."""
    failed = row["repeats"] - row["judged"]
    return f" ({failed} left out: instrument failed)" if failed else ""


def repeat_groups(summaries: Sequence[SummaryDoc]) -> dict[str, list[SummaryDoc]]:
    """The repeated systems' summaries, by system, in repeat order; systems run once are not
    here."""
    groups: dict[str, list[SummaryDoc]] = {}
    for summary in summaries:
        if "repeat" in summary:
            groups.setdefault(system_name(summary), []).append(summary)
    return {sut: sorted(found, key=lambda s: s["repeat"]["index"]) for sut, found in groups.items()}


def repeat_table(summaries: Sequence[SummaryDoc]) -> list[dict[str, Any]]:
    """A row per repeated system: its name, how many repeats and how many judged (a repeat
    whose instruments failed says nothing of the system: left out), each FIGURES' spread over
    the judged ones."""
    rows = []
    for sut, found in repeat_groups(summaries).items():
        judged = [s for s in found if not s.get("instrument_failures")]
        figures = {
            name: spread([f.get(s) for s in judged], f.absent_rank) for name, f in FIGURES.items()
        }
        rows.append({"sut": sut, "repeats": len(found), "judged": len(judged), **figures})
    return rows


def range_interval(values: Sequence[float | None], n: int) -> IntervalDoc | None:
    """The repeats' range as `compare`'s interval (IntervalDoc: `exact` as the values are, `n`
    the samples of every repeat together); None when a repeat lacks the figure."""
    if not values or any(v is None for v in values):
        return None
    present = [float(v) for v in values if v is not None]
    return {"lo_ms": min(present), "hi_ms": max(present), "exact": True, "n": n}


def merged_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`compare`'s rows with the repeats of a (run, system) as one row (`repeats`: how many):
    rows of systems run once pass as they are. Each group where it first was."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for row in rows:
        of = (row.get("repeat") or {}).get("of", 0)
        groups.setdefault((row.get("run_dir", row["run"]), row["sut"], of), []).append(row)
    return [found[0] if len(found) == 1 else _merged(found) for found in groups.values()]


def _merged(found: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One row for a system's repeats: each figure the middle repeat's (as the index gives it),
    `ci95` the ranges of P99 and P99.99 (range_interval); repeats whose instruments failed are
    left out (`judged` says how many were not), all of them failed: the group failed."""
    judged = [r for r in found if not r["instrument_failures"]]
    if not judged:
        return {**found[0], "repeats": len(found), "judged": 0}
    n = sum(r["e2e_n"] for r in judged)
    called = {"p99": "p99_e2e_ms"}
    if not any(r["p9999_is_max"] for r in judged):  # as one run's ci95: none for a maximum
        called["p9999"] = "p9999_e2e_ms"
    middle = sorted(judged, key=lambda r: r["p99_e2e_ms"] or 0.0)[(len(judged) - 1) // 2]

    def median(key: str) -> float | None:
        figure = FIGURES.get(key)
        found = spread([r[key] for r in judged], figure.absent_rank if figure else None)
        return None if found is None else found["median"]

    def count(key: str) -> int | None:  # rates and counts: the middle repeat's, a whole number
        found = median(key)
        return None if found is None else int(found)

    capacity_text = {
        name: spread_text(
            spread([r[key] for r in judged], FIGURES[key].absent_rank), "/s", FIGURES[key].absent
        )
        for name, key in CAPACITY_KEYS.items()
    }
    capacity = merged_capacity([r.get("capacity") or {} for r in judged])
    if capacity[BREAKING] is None:
        capacity_text = dict.fromkeys(capacity_text, "-")
    return {
        **middle,  # its spectrum, report and verdict stand for the group's
        "steps": merged_steps([r.get("steps") or [] for r in judged]),
        "capacity": capacity,
        "capacity_text": capacity_text,
        "repeats": len(found),
        "judged": len(judged),
        "p9999_e2e_ms": median("p9999_e2e_ms"),
        "p9999_is_max": any(r["p9999_is_max"] for r in judged),
        "breaking_point_per_s": count("breaking_point_per_s"),
        "max_sustainable_rate_per_s": count("max_sustainable_rate_per_s"),
        "e2e_n": n,
        "send_failures": count("send_failures"),
        "lost": count("lost"),
        "ci95": {
            name: interval
            for name, key in called.items()
            if (interval := range_interval([r[key] for r in judged], n)) is not None
        },
    }


def merged_steps(runs: Sequence[Sequence[ComparedStep]]) -> list[ComparedStep]:
    """A system's repeats' steps as one run's, for compare: the k-th step at a rate in every
    repeat (analysis.changes.paired_steps), each figure the middle repeat's and its interval
    the repeats' range (range_interval, as the whole run's); judged where every repeat judged
    it. A step some repeat lacks is left out."""
    if not runs:
        return []
    groups = [[step] for step in runs[0]]
    for other in runs[1:]:
        for group, (_, step) in zip(groups, paired_steps(runs[0], other), strict=False):
            if step is not None:
                group.append(step)
    return [_merged_step(group) for group in groups if len(group) == len(runs)]


def _merged_step(group: Sequence[ComparedStep]) -> ComparedStep:
    n = sum(step["n"] for step in group)
    is_max = any(step["is_max"] for step in group)
    ms: dict[str, float | None] = {}
    ci95 = {}
    for name in LATENCIES:
        values = [step["ms"].get(name) for step in group]
        found = spread(values)
        ms[name] = found["median"] if found and found["n"] == len(group) else None
        interval = range_interval(values, n)
        if interval is not None and not (name == "p9999" and is_max):
            ci95[name] = interval
    verdicts = list(dict.fromkeys(step["verdict"] for step in group))
    return {
        "step": group[0]["step"],
        "rate_per_s": group[0]["rate_per_s"],
        "verdict": "/".join(verdicts),
        "judged": all(step["judged"] for step in group),
        "n": n,
        "is_max": is_max,
        "ms": ms,
        "ci95": ci95,
    }
