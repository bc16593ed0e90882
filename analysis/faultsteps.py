"""A step a fault was injected into (`evbench run --fault`, `--fault-exec`), judged by the fault
(pure, table-tested).

A dispatcher killed on purpose fails sends and loses events: read by the breaking-point rule
alone, that is a system that "breaks at 200/s", a fault read as a capacity limit. So, as for a
process that died by itself (analysis.deaths), a step with a fault done in it is judged
*faulted*, by what the fault cost (its ledger, below), never *breaks* or *holds*: the breaking
point, the sustainable rate and the e2e baseline the rule compares with come from the steps
without one.

Each fault's ledger is read from the run's per-second series (metrics.parquet: events due,
failed, lost and delivered late by the second they were due, deliveries by the second they
arrived) and the
per-second e2e P99: the system has *recovered* at the first second from which
`RECOVERY_SECONDS` seconds in a row deliver at least `RECOVERED_RATE_SHARE` of their pace and
keep their e2e P99 within the band the step had before the fault (`RECOVERY_BAND_FACTOR` times
its highest per-second P99 before the fault, plus `RECOVERY_BAND_FLOOR_MS`, of the seconds whose
events had all been delivered when it was done), within the fault's
step; the fault's window runs from the second it was done in to that second (or the step's
end), at one second's resolution, and its counts are of the events due in it; duplicates are
counted over its step (a consumer started again redelivers from its last commit: events due
before the fault).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from analysis.steprule import LATE_AFTER_MS, StepTotals
from analysis.verdicts import BREAKS, HOLDS, Verdict
from contract.faults import FaultDoc
from contract.summarydocs import FaultSummaryDoc
from contract.units import NS_PER_MS, NS_PER_S

FAULTED = "faulted"
RECOVERY_SECONDS = 3
RECOVERED_RATE_SHARE = 0.95
RECOVERY_BAND_FACTOR = 2.0
RECOVERY_BAND_FLOOR_MS = 5.0  # a second's P99 of a few ms moves by that much unloaded


# The per-second counts (by the second events were due) a fault's window adds up.
_WINDOW_COUNTS = ("scheduled", "send_failures", "lost", "late")


@dataclass(frozen=True)
class FaultLedger:
    """What one fault cost, second by second (seconds counted from the schedule start)."""

    first_second: int  # the second it was done in
    recovered_second: int | None  # None: not recovered within its step
    recovered_after_s: float | None  # from the fault's instant to the recovered second's start
    band_ms: float | None  # the step's e2e P99 band before the fault (None: no second before)
    scheduled: int  # events due in the window (from its first second to the recovered one)
    send_failures: int  # of those events (as the following counts)
    lost: int
    late: int  # delivered more than analysis.steprule.LATE_AFTER_MS after they were due
    peak_e2e_p99_ms: float | None  # the highest per-second e2e P99 in the window


def _band_ms(
    rows: Sequence[Mapping[str, Any]],
    p99: Mapping[int, float],
    step: int,
    at_ns: int,
    start_ns: int,
    e2e_max_ms: Mapping[int, float],
) -> float | None:
    """The step's e2e P99 band before the fault, from its seconds *settled* when it was done:
    every delivery of their events arrived before it (the second's end plus its highest e2e).
    A second whose events the fault delayed (a Kafka kill's, still on their way: 12.9 s late
    at ~100 ms) would widen the band by the delay itself (to 25.8 s), and any recovery would
    pass. Without its highest e2e, a second counts once a whole second ended before the
    fault's. Past the step's first second, unless no other is settled."""
    first = (at_ns - start_ns) // NS_PER_S

    def settled(second: int) -> bool:
        if (most_ms := e2e_max_ms.get(second)) is None:
            return second < first - 1
        return start_ns + (second + 1) * NS_PER_S + most_ms * NS_PER_MS <= at_ns

    before = [r["second"] for r in rows if r.get("step") == step and r["second"] < first]
    kept = [second for second in before if settled(second)]
    kept = [second for second in kept if second != min(before)] or kept
    values = [p99[second] for second in kept if second in p99]
    return None if not values else max(values) * RECOVERY_BAND_FACTOR + RECOVERY_BAND_FLOOR_MS


def fault_ledger(
    at_ns: int,
    step: int,
    start_ns: int,
    rows: Sequence[Mapping[str, Any]],
    e2e_p99_ms: Mapping[int, float],
    back_ns: int | None = None,
    e2e_max_ms: Mapping[int, float] | None = None,
) -> FaultLedger:
    """The fault done at `at_ns` in `step`: its window and its recovery, from the run's
    per-second rows (metrics.parquet's) and each second's e2e P99 and highest e2e (for the
    band, `_band_ms`). Recovery is looked for from the second its target was back in
    (`back_ns`: a kill's backlog may come after a few good seconds of what was already on its
    way). Pure."""
    first = (at_ns - start_ns) // NS_PER_S
    back = first if back_ns is None else max(first, (back_ns - start_ns) // NS_PER_S)
    band = _band_ms(rows, e2e_p99_ms, step, at_ns, start_ns, e2e_max_ms or {})

    def healthy(row: Mapping[str, Any]) -> bool:
        p99 = e2e_p99_ms.get(row["second"])
        within = band is None or (p99 is not None and p99 <= band)
        return row["delivered"] >= RECOVERED_RATE_SHARE * row["target_rate_per_s"] and within

    # Within its step: a fault's window never takes in the next step's events (or its faults).
    paced = [r for r in rows if r["second"] >= back and r.get("step") == step]
    recovered = next(
        (
            row["second"]
            for i, row in enumerate(paced)
            if len(paced[i : i + RECOVERY_SECONDS]) == RECOVERY_SECONDS
            and all(healthy(r) for r in paced[i : i + RECOVERY_SECONDS])
        ),
        None,
    )
    last = max((r["second"] for r in rows if r.get("step") == step), default=first)
    end = recovered if recovered is not None else last + 1
    window = [r for r in rows if first <= r["second"] < end]
    peaks = [e2e_p99_ms[r["second"]] for r in window if r["second"] in e2e_p99_ms]
    after_s = None
    if recovered is not None:
        after_s = max(0.0, (start_ns + recovered * NS_PER_S - at_ns) / NS_PER_S)
    counts = {name: sum(r[name] for r in window) for name in _WINDOW_COUNTS}
    return FaultLedger(
        first, recovered, after_s, band, counts["scheduled"], counts["send_failures"],
        counts["lost"], counts["late"], max(peaks) if peaks else None,
    )  # fmt: skip


def fault_text(fault: FaultDoc) -> str:
    """`kill dispatcher 2.0 s into step 2, back after 1.41 s`, or what kept it from being done."""
    what = f"`{fault['target']}`" if fault["action"] == "exec" else fault["target"]
    text = f"{fault['action']} {what} {fault['offset_s']:g} s into step {fault['step']}"
    if fault["at_ns"] is None:
        return f"{text}: not done ({fault['error'] or 'the run ended first'})"
    if fault["back_ns"] is not None:
        took_s = (fault["back_ns"] - fault["at_ns"]) / NS_PER_S
        text += f", {'ended' if fault['action'] == 'exec' else 'back'} after {took_s:.2f} s"
    return text + (f" ({fault['error']})" if fault["error"] else "")


def fault_ledgers(
    faults: Sequence[FaultDoc],
    start_ns: int | None,
    rows: Sequence[Mapping[str, Any]],
    e2e_points: Sequence[Mapping[str, float]],
) -> list[FaultLedger | None]:
    """Each fault's ledger (None: not done, or the schedule start unknown), in `faults`' order,
    from each second's e2e P99 and highest e2e (`e2e_points`: a second in several slices has
    a point in each)."""
    p99: dict[int, float] = {}
    most: dict[int, float] = {}
    for point in e2e_points if faults else ():
        second = int(point["second"])
        for name, found in (("p99_ms", p99), ("max_ms", most)):
            if (value := point.get(name)) is not None:
                found[second] = max(found.get(second, 0.0), value)
    return [
        None
        if fault["at_ns"] is None or start_ns is None
        else fault_ledger(
            fault["at_ns"], fault["step"], start_ns, rows, p99, fault["back_ns"], most
        )
        for fault in faults
    ]


def _cost(ledger: FaultLedger | None, total: StepTotals | None) -> str:
    if ledger is None:
        if total is None:
            return "no records of the step"
        return (
            f"{total['send_failures']} send failures, {total['lost']} lost in the step; "
            f"{total['duplicates']} duplicates in the step"
        )
    recovered = (
        "not recovered within its step"
        if ledger.recovered_after_s is None
        else f"recovered {ledger.recovered_after_s:.1f} s after it"
    )
    peak = ledger.peak_e2e_p99_ms
    # Duplicates are the step's: a consumer started again redelivers from its last commit,
    # events due before the fault.
    duplicates = f"; {total['duplicates']} duplicates in the step" if total else ""
    return (
        f"{recovered}; of the {ledger.scheduled} events due in its window, "
        f"{ledger.send_failures} send failures, {ledger.lost} lost, {ledger.late} late (over "
        f"{LATE_AFTER_MS / 1000:g} s); e2e P99 up to {'-' if peak is None else f'{peak:.0f}'} "
        f"ms{duplicates}"
    )


def after_faults(
    verdicts: Sequence[Verdict],
    faults: Sequence[FaultDoc],
    ledgers: Sequence[FaultLedger | None],
    totals: Mapping[int, StepTotals],
) -> list[Verdict]:
    """Each step with a fault done in it judged *faulted*, by its fault (named with what it
    cost), whatever the step rule made of it (said after); every other verdict as it was."""
    done: dict[int, list[tuple[FaultDoc, FaultLedger | None]]] = {}
    for fault, ledger in zip(faults, ledgers, strict=True):
        if fault["at_ns"] is not None:
            done.setdefault(fault["step"], []).append((fault, ledger))
    judged = []
    for verdict in verdicts:
        found = done.get(verdict.step)
        if not found:
            judged.append(verdict)
            continue
        total = totals.get(verdict.step)
        said = "; ".join(f"{fault_text(f)}, {_cost(ledger, total)}" for f, ledger in found)
        why = f"{said}; a fault injected: judged by it, not as the system's capacity"
        rule = f"by the step rule alone: {verdict.verdict}"
        judged.append(replace(verdict, verdict=FAULTED, reasons=(why, rule, *verdict.reasons)))
    return judged


def judged_by_recovery(
    verdict: Verdict, faults: Sequence[FaultDoc], ledgers: Sequence[FaultLedger | None]
) -> Verdict:
    """A search's probe with faults done in it (`faults`: its own): it *holds* when the system
    recovered from each within the probe, whatever the faults cost (said first), and *breaks*
    when it did not; a run's step is *faulted* instead (`after_faults`: a run reports, a search
    must decide). A probe the rule found sender-limited (or without enough data) stays so."""
    if verdict.verdict not in (HOLDS, BREAKS) or all(f["at_ns"] is None for f in faults):
        return verdict
    (faulted,) = after_faults([verdict], faults, ledgers, {})
    recovered = all(
        ledger is not None and ledger.recovered_after_s is not None
        for fault, ledger in zip(faults, ledgers, strict=True)
        if fault["at_ns"] is not None
    )
    return replace(faulted, verdict=HOLDS if recovered else BREAKS)


def faulted_steps(faults: Sequence[FaultDoc]) -> set[int]:
    """The steps a fault was done in (judged by it, and left out of the latency baseline)."""
    return {fault["step"] for fault in faults if fault["at_ns"] is not None}


def fault_summaries(
    faults: Sequence[FaultDoc],
    ledgers: Sequence[FaultLedger | None],
    totals: Mapping[int, StepTotals],
    schedule_start_ns: int | None,
) -> list[FaultSummaryDoc]:
    """summary.json's `faults`: each fault, when it was done and its target back (seconds from
    the schedule start), its ledger and its step's counts."""

    def at_s(ns: int | None) -> float | None:
        if ns is None or schedule_start_ns is None:
            return None
        return round((ns - schedule_start_ns) / NS_PER_S, 3)

    found: list[FaultSummaryDoc] = []
    for fault, ledger in sorted(zip(faults, ledgers, strict=True), key=lambda f: f[0]["due_ns"]):
        total = totals.get(fault["step"])
        found.append(
            {
                "spec": fault["spec"], "step": fault["step"], "action": fault["action"],
                "target": fault["target"], "at_s": at_s(fault["at_ns"]),
                "back_s": at_s(fault["back_ns"]), "error": fault["error"],
                "recovered_after_s": ledger.recovered_after_s if ledger else None,
                "window_scheduled": ledger.scheduled if ledger else None,
                "window_send_failures": ledger.send_failures if ledger else None,
                "window_lost": ledger.lost if ledger else None,
                "window_late": ledger.late if ledger else None,
                "window_peak_e2e_p99_ms": ledger.peak_e2e_p99_ms if ledger else None,
                "band_ms": ledger.band_ms if ledger else None,
                "step_send_failures": total["send_failures"] if total else None,
                "step_lost": total["lost"] if total else None,
                "step_duplicates": total["duplicates"] if total else None,
                "text": f"{fault_text(fault)}, {_cost(ledger, total)}",
            }
        )  # fmt: skip
    return found


def faults_text(
    faults: Sequence[FaultDoc],
    ledgers: Sequence[FaultLedger | None],
    totals: Mapping[int, StepTotals],
) -> str:
    """The verdict's first words when faults were injected: each with what it cost."""
    return "; ".join(
        f"{fault_text(f)}, {_cost(ledger, totals.get(f['step']))}"
        for f, ledger in zip(faults, ledgers, strict=True)
        if f["at_ns"] is not None
    )
