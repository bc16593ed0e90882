"""What `evbench compare` calls between a system's run and its baseline (pure, table-tested):
each step the two runs share, on its e2e P50, P99 and P99.99; the capacity (breaking point and
max sustainable rate); for two searches, their confirmed rates beside the probes' curve. The
verdict and the regression gate read these calls only. A staircase's whole-run tail mixes every
step's rate: a run that broke at 1100/s carries seconds of backlog into it, one that held to
2000/s does not, so whole-run tails differ whatever each step did (run-1 against run-2 was
called worse on its P99.99 while its capacity went from 100 to 1400/s).

A latency is called as analysis.confidence.change calls it: worse only where the later run's
95 % interval lies wholly above the baseline's (beyond the tolerance), better where wholly
below, else indistinguishable, but only where both intervals are closed: one with no upper
end (a P99.99 of fewer than 56,646 events: its upper rank is past them) overlaps whatever lies
above it, so two that overlap there are not called. A figure without an interval in either run
(a P99.99 of fewer than 10^4 events is their maximum; a summary analysed before intervals were
kept) is not called either. The change comes with its own interval: the later interval less
the baseline's, [lo' - hi, hi' - lo], which excludes 0 exactly where the call is made (at
tolerance 0).

A capacity is a range of rates: a break at 1500/s is [1500, 1500]; a run that held every judged
step breaks above the highest rate that held, [held + 1, inf); a run with no step held below its
break sustains [0, 0]; a repeated system the range over its repeats. Higher is better, and a
change is called where the ranges part. A run with neither figure (an instrument failed, no step
could be judged, a search that did not finish) has no capacity, and that is said, not called.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from analysis.confidence import BETTER, SAME, WORSE, change
from analysis.verdicts import BREAKS, HOLDS
from contract.figures import IntervalDoc
from contract.searchdocs import SearchProbeDoc
from contract.summarydocs import StepSummaryDoc

NOT_CALLED = "not called"
# The figures each shared step is called on: ComparedStep's names, as said.
LATENCIES = {"p50": "P50", "p99": "P99", "p9999": "P99.99"}
BREAKING, SUSTAINABLE = "breaking point", "max sustainable"
# The rows' keys of those figures (analysis.comparison).
CAPACITY_KEYS = {BREAKING: "breaking_point_per_s", SUSTAINABLE: "max_sustainable_rate_per_s"}
# What was compared: two staircases step by step; two searches by their confirmed rates; a
# search and a staircase by capacity alone; nothing where an instrument failed.
STAIRCASES, SEARCHES, MIXED, FAILED = "staircases", "searches", "search and staircase", "failed"
Range = tuple[float, float]  # rates per second, lo <= hi (hi inf: it never broke)


class ComparedStep(TypedDict):
    """A step as `compare` reads it: a summary's step row, or a repeated system's steps merged
    (analysis.repeats.merged_steps: middle figures, the repeats' ranges as intervals)."""

    step: int
    rate_per_s: int
    verdict: str
    judged: bool  # it held or broke (in every repeat): its calls say something of the system
    n: int
    is_max: bool  # its P99.99 is the max of fewer than 10^4 events
    ms: dict[str, float | None]  # LATENCIES' figures
    ci95: dict[str, IntervalDoc]


def compared_step(row: StepSummaryDoc) -> ComparedStep:
    """A summary's step row as compare reads it; an older row without P50 has none."""
    return {
        "step": row["step"],
        "rate_per_s": row["target_rate_per_s"],
        "verdict": row["verdict"],
        "judged": row["verdict"] in (HOLDS, BREAKS),
        "n": row["e2e_n"],
        "is_max": row["p9999_is_max"],
        "ms": {
            "p50": row.get("p50_e2e_ms"),
            "p99": row["p99_e2e_ms"],
            "p9999": row["p9999_e2e_ms"],
        },
        "ci95": dict(row.get("e2e_ci95") or {}),
    }


def paired_steps(
    before: Sequence[ComparedStep], after: Sequence[ComparedStep]
) -> list[tuple[ComparedStep | None, ComparedStep | None]]:
    """Steps matched by rate in order of appearance: the k-th step at a rate in one run with
    the k-th at that rate in the other (1k-2k's 100/s cool-down with the other's), a step in
    one run only beside None. The baseline's order, then the later run's unmatched steps."""
    waiting: dict[int, list[int]] = {}
    for index, step in enumerate(after):
        waiting.setdefault(step["rate_per_s"], []).append(index)
    pairs: list[tuple[ComparedStep | None, ComparedStep | None]] = []
    taken = set()
    for step in before:
        queue = waiting.get(step["rate_per_s"]) or []
        if queue:
            taken.add(queue[0])
        pairs.append((step, after[queue.pop(0)] if queue else None))
    return pairs + [(None, step) for index, step in enumerate(after) if index not in taken]


@dataclass(frozen=True)
class LatencyChange:
    """One figure of a shared step in both runs, the change and its interval (lo_ms, hi_ms:
    None where that end is unbounded), and the call."""

    name: str  # LATENCIES' key
    before_ms: float | None
    after_ms: float | None
    lo_ms: float | None
    hi_ms: float | None
    call: str
    why: str = ""  # why it was not called

    @property
    def delta_ms(self) -> float | None:
        if self.before_ms is None or self.after_ms is None:
            return None
        return self.after_ms - self.before_ms


def latency_change(
    name: str, before: ComparedStep, after: ComparedStep, tolerance: float = 0.0
) -> LatencyChange:
    """`after`'s figure `name` against `before`'s (module docstring)."""
    b_ms, a_ms = before["ms"].get(name), after["ms"].get(name)
    b_ci, a_ci = before["ci95"].get(name), after["ci95"].get(name)
    if b_ms is None or a_ms is None:
        lacking = before if b_ms is None else after
        why = "no events" if not lacking["n"] else "a summary analysed before it was kept"
        return LatencyChange(name, b_ms, a_ms, None, None, NOT_CALLED, why)
    if b_ci is None or a_ci is None:
        why = _no_interval(name, before if b_ci is None else after)
        return LatencyChange(name, b_ms, a_ms, None, None, NOT_CALLED, why)
    lo = None if b_ci["hi_ms"] is None else a_ci["lo_ms"] - b_ci["hi_ms"]
    hi = None if a_ci["hi_ms"] is None else a_ci["hi_ms"] - b_ci["lo_ms"]
    call = change(b_ci, a_ci, tolerance)
    if call == SAME and (open_ci := b_ci if b_ci["hi_ms"] is None else a_ci)["hi_ms"] is None:
        # An interval with no upper end overlaps whatever lies above it: 124 ms against 60 s
        # is not "indistinguishable", it is undecided.
        why = f"no upper bound: a {LATENCIES[name]} of {open_ci['n']} events has none"
        return LatencyChange(name, b_ms, a_ms, lo, hi, NOT_CALLED, why)
    return LatencyChange(name, b_ms, a_ms, lo, hi, call)


def _no_interval(name: str, step: ComparedStep) -> str:
    if name == "p9999" and step["is_max"]:
        return f"no interval: the P99.99 of {step['n']} events is their maximum"
    return "no interval: a summary analysed before intervals were kept"


@dataclass(frozen=True)
class StepChange:
    """A step of either run, with its calls where both runs have it."""

    before: ComparedStep | None
    after: ComparedStep | None
    latencies: tuple[LatencyChange, ...] = ()

    @property
    def rate_per_s(self) -> int:
        step = self.before or self.after
        return step["rate_per_s"] if step else 0

    @property
    def counted(self) -> bool:
        """Its calls decide only where both runs judged the step: one the sender could not
        hold, too few events, a fault or a death there says nothing of the system's latency."""
        return bool(self.before and self.after and self.before["judged"] and self.after["judged"])


def step_changes(
    before: Sequence[ComparedStep], after: Sequence[ComparedStep], tolerance: float = 0.0
) -> list[StepChange]:
    return [
        StepChange(b, a, tuple(latency_change(name, b, a, tolerance) for name in LATENCIES))
        if b and a
        else StepChange(b, a)
        for b, a in paired_steps(before, after)
    ]


def capacity_ranges(point: int | None, sustainable: int | None) -> dict[str, Range | None]:
    """A run's breaking point and max sustainable rate as ranges (module docstring); None for
    both when it has neither."""
    if point is None and sustainable is None:
        return {BREAKING: None, SUSTAINABLE: None}
    held = float(sustainable) if sustainable is not None else 0.0
    breaking = (float(point), float(point)) if point is not None else (held + 1, math.inf)
    return {BREAKING: breaking, SUSTAINABLE: (held, held)}


def merged_capacity(ranges: Sequence[Mapping[str, Range | None]]) -> dict[str, Range | None]:
    """Repeats' capacities as one: each figure's range over the repeats that have one."""
    merged: dict[str, Range | None] = {}
    for name in (BREAKING, SUSTAINABLE):
        found = [r for one in ranges if (r := one.get(name)) is not None]
        merged[name] = (min(r[0] for r in found), max(r[1] for r in found)) if found else None
    return merged


def capacity_texts(point: int | None, sustainable: int | None) -> dict[str, str]:
    """A run's capacity figures as said beside the other run's ("-": it has none)."""
    if point is None and sustainable is None:
        return {BREAKING: "-", SUSTAINABLE: "-"}
    return {
        BREAKING: f"{point}/s" if point is not None else f"none: held to {sustainable}/s",
        SUSTAINABLE: f"{sustainable}/s" if sustainable is not None else "none held",
    }


def capacity_call(before: Range | None, after: Range | None) -> str:
    """`after` against `before`, higher better, called where the ranges part; not called when
    a run has no capacity."""
    if before is None or after is None:
        return NOT_CALLED
    return WORSE if after[1] < before[0] else BETTER if after[0] > before[1] else SAME


@dataclass(frozen=True)
class CapacityChange:
    """One capacity figure in both runs, as said (the rows' `capacity_text`), the change where
    both are a rate, and the call."""

    name: str  # BREAKING or SUSTAINABLE
    before_text: str
    after_text: str
    delta_per_s: int | None
    call: str


def _capacity_change(
    name: str, before: Mapping[str, Any], after: Mapping[str, Any]
) -> CapacityChange:
    key = CAPACITY_KEYS[name]
    delta = None
    if before[key] is not None and after[key] is not None:
        delta = after[key] - before[key]
    call = capacity_call(before["capacity"][name], after["capacity"][name])
    texts = (before["capacity_text"][name], after["capacity_text"][name])
    return CapacityChange(name, *texts, delta, call)


# A call and where it was made: a step's figure, or a capacity figure (no step).
Called = tuple[StepChange | None, LatencyChange | CapacityChange]


@dataclass(frozen=True)
class PairComparison:
    """A system's later run against its baseline: what was compared (`kind`) and each call."""

    sut: str
    before_run: str
    after_run: str
    kind: str
    capacity: tuple[CapacityChange, ...] = ()
    steps: tuple[StepChange, ...] = ()
    # Two searches: each rate either probed, with each run's probes there.
    probes: tuple[tuple[int, list[SearchProbeDoc], list[SearchProbeDoc]], ...] = ()
    # The whole-run e2e P99 and P99.99 of two staircases: (label, before, after), told only.
    tails: tuple[tuple[str, float | None, float | None], ...] = ()
    notes: tuple[str, ...] = field(default=())

    def worse(self) -> list[Called]:
        """The calls that make this a regression: a capacity figure lower, or a figure of a
        step both runs judged higher (`--fail-on-regression` exits 3 on any)."""
        return self.called(WORSE)

    def better(self) -> list[Called]:
        return self.called(BETTER)

    def called(self, call: str) -> list[Called]:
        """The capacity figures and the counted steps' figures that got `call`."""
        found: list[Called] = [(None, c) for c in self.capacity if c.call == call]
        for step in self.steps:
            if step.counted:
                found += [(step, c) for c in step.latencies if c.call == call]
        return found

    @property
    def verdict(self) -> str:
        if self.kind == FAILED:
            return "not compared"
        if self.worse():
            return WORSE
        if self.better():
            return BETTER
        calls = [c.call for c in self.capacity]
        calls += [c.call for s in self.steps if s.counted for c in s.latencies]
        return SAME if SAME in calls else NOT_CALLED


def compare_pair(
    before: Mapping[str, Any], after: Mapping[str, Any], tolerance: float = 0.0
) -> PairComparison:
    """A system's `after` row against its `before` row (analysis.comparison's rows: run, sut,
    verdict, instrument_failures, searched, steps, probes, capacity, breaking_point_per_s,
    max_sustainable_rate_per_s, p99_e2e_ms, p9999_e2e_ms)."""
    names = (after["sut"], before["run"], after["run"])
    failed = [row["run"] for row in (before, after) if row.get("instrument_failures")]
    if failed:
        said = f"not compared: an instrument failed in {' and '.join(failed)}"
        return PairComparison(*names, FAILED, notes=(said,))
    capacity = tuple(_capacity_change(name, before, after) for name in CAPACITY_KEYS)
    notes = tuple(
        f"{row['run']} has no capacity to compare: {row['verdict']}"
        for row in (before, after)
        if row["capacity"][BREAKING] is None
    )
    if before["searched"] and after["searched"]:
        why = "two searches: compared by the rates they confirmed; their probes told beside"
        curve = tuple(probe_curve(before["probes"], after["probes"]))
        return PairComparison(*names, SEARCHES, capacity, probes=curve, notes=(*notes, why))
    if before["searched"] or after["searched"]:
        search = before["run"] if before["searched"] else after["run"]
        why = (
            f"capacity only: {search} is a search, whose probes at rates it chose are no "
            "staircase; neither its steps nor its whole-run tails compare with a staircase's"
        )
        return PairComparison(*names, MIXED, capacity, notes=(*notes, why))
    steps = tuple(step_changes(before["steps"], after["steps"], tolerance))
    tails = tuple(
        (label, before[key], after[key])
        for label, key in (("P99", "p99_e2e_ms"), ("P99.99", "p9999_e2e_ms"))
    )
    return PairComparison(*names, STAIRCASES, capacity, steps, tails=tails, notes=notes)


def probe_curve(
    before: Sequence[SearchProbeDoc], after: Sequence[SearchProbeDoc]
) -> list[tuple[int, list[SearchProbeDoc], list[SearchProbeDoc]]]:
    """Each rate either search probed, ascending, with each one's probes at it in order."""
    rates = sorted({p["rate_per_s"] for p in (*before, *after)})
    return [
        (
            rate,
            [p for p in before if p["rate_per_s"] == rate],
            [p for p in after if p["rate_per_s"] == rate],
        )
        for rate in rates
    ]
