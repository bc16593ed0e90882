"""A step a fault was injected into (`evbench run --fault`, `--fault-exec`), judged by the fault
(pure, table-tested).

A dispatcher killed on purpose fails sends and loses events: read by the breaking-point rule
alone, that is a system that "breaks at 200/s", a fault read as a capacity limit. So, as for a
process that died by itself (analysis.deaths), a step with a fault that did not hold is judged
*faulted*, with what the fault cost in it (send failures, lost, duplicates), never *breaks*: the
breaking point and the sustainable rate come from the steps without one. A step that held through
its fault, held. The fault's window and recovery time are not measured yet: the figures are the
whole step's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from analysis.steprule import StepTotals
from analysis.verdicts import HOLDS, Verdict
from contract.documents import FaultSummaryDoc
from contract.faults import FaultDoc
from contract.units import NS_PER_S

FAULTED = "faulted"


def fault_text(fault: FaultDoc) -> str:
    """`kill dispatcher 2.0 s into step 2, back after 1.41 s`, or what kept it from being done."""
    what = f"`{fault['target']}`" if fault["action"] == "exec" else fault["target"]
    text = f"{fault['action']} {what} {fault['offset_s']:g} s into step {fault['step']}"
    if fault["at_ns"] is None:
        return f"{text}: not done (the run ended first)"
    if fault["back_ns"] is not None:
        took_s = (fault["back_ns"] - fault["at_ns"]) / NS_PER_S
        text += f", {'ended' if fault['action'] == 'exec' else 'back'} after {took_s:.2f} s"
    return text + (f" ({fault['error']})" if fault["error"] else "")


def _cost(total: StepTotals | None) -> str:
    if total is None:
        return "no records of the step"
    return (
        f"{total['send_failures']} send failures, {total['lost']} lost, "
        f"{total['duplicates']} duplicates in the step"
    )


def after_faults(
    verdicts: Sequence[Verdict], faults: Sequence[FaultDoc], totals: Mapping[int, StepTotals]
) -> list[Verdict]:
    """Each step with a fault done in it that did not hold judged *faulted*, the fault named
    with the step's cost; every other verdict as it was."""
    done: dict[int, list[FaultDoc]] = {}
    for fault in faults:
        if fault["at_ns"] is not None:
            done.setdefault(fault["step"], []).append(fault)
    judged = []
    for verdict in verdicts:
        found = done.get(verdict.step)
        if not found or verdict.verdict == HOLDS:
            judged.append(verdict)
            continue
        why = (
            f"{'; '.join(fault_text(f) for f in found)}: {_cost(totals.get(verdict.step))}; "
            "a fault injected, not a capacity limit"
        )
        judged.append(replace(verdict, verdict=FAULTED, reasons=(why, *verdict.reasons)))
    return judged


def fault_summaries(
    faults: Sequence[FaultDoc], totals: Mapping[int, StepTotals], schedule_start_ns: int | None
) -> list[FaultSummaryDoc]:
    """summary.json's `faults`: each fault, when it was done and its target back (seconds from
    the schedule start), and its step's send failures, lost and duplicates."""
    found: list[FaultSummaryDoc] = []
    for fault in sorted(faults, key=lambda f: f["due_ns"]):
        total = totals.get(fault["step"])

        def at_s(ns: int | None) -> float | None:
            if ns is None or schedule_start_ns is None:
                return None
            return round((ns - schedule_start_ns) / NS_PER_S, 3)

        found.append(
            {
                "spec": fault["spec"], "step": fault["step"], "action": fault["action"],
                "target": fault["target"], "at_s": at_s(fault["at_ns"]),
                "back_s": at_s(fault["back_ns"]), "error": fault["error"],
                "step_send_failures": total["send_failures"] if total else None,
                "step_lost": total["lost"] if total else None,
                "step_duplicates": total["duplicates"] if total else None,
                "text": fault_text(fault),
            }
        )  # fmt: skip
    return found


def faults_text(faults: Sequence[FaultDoc], totals: Mapping[int, StepTotals]) -> str:
    """The verdict's first words when faults were injected: each with its step's cost."""
    done = [f for f in faults if f["at_ns"] is not None]
    return "; ".join(f"{fault_text(f)}: {_cost(totals.get(f['step']))}" for f in done)
