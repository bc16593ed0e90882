"""What a capacity search records and says (evbench.search is how it drives its probes):
each probe as it was judged, run.json's `search` section, and the search's last line."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from analysis.verdicts import NOT_JUDGED
from contract.documents import RunStatus
from contract.faults import FaultDoc
from contract.lines import SenderClock
from contract.searchdocs import SearchDoc, SearchProbeDoc, SearchResultDoc, SearchSenderSummary
from contract.senderlines import SenderDone
from contract.units import NS_PER_S
from evbench.options import SearchOptions
from evbench.rundoc import sender_clocks, spanning_clocks
from evbench.searchplan import HOST_SATURATED, Outcome, Probe, Result
from evbench.session import Session
from loadgen.pace import parse_pace
from runtime.clocks import DEFAULT_CORRECTION, Correction, corrections_from, to_apply


@dataclass
class Probed:
    """One probe as it was judged."""

    probe: Probe
    step: int
    start_ns: int
    verdict: str
    reasons: tuple[str, ...]
    figures: dict[str, Any]
    sender: SenderDone
    restarted: str | None  # why the system was started afresh before this probe
    faulted: bool = False  # a fault was done in it: judged by its recovery, never a baseline
    cut_short: bool = False  # the search was interrupted during it: listed, never judged


def cut_probed(probe: Probe, step: int, done: SenderDone) -> Probed:
    """The probe under way when the search was interrupted, from its sender's done line: listed
    in run.json's `search.probes` and counted in its sender summary (its records are the run's),
    never judged (analysis.verdicts.not_judged_probe: the search decides on whole probes).
    Pure."""
    scheduled = sum(s["scheduled"] for s in done["steps"])
    achieved = sum(s["achieved_send_rate_per_s"] for s in done["steps"])
    why = (
        f"cut short after {scheduled / probe.rate_per_s:.1f} s of {probe.hold_s} s: the search "
        "was interrupted; a probe cut short is not judged"
    )
    figures = {"e2e_p99_ms": None, "sender_ratio": round(achieved / probe.rate_per_s, 4)}
    start_ns = done["start_ns"] or 0
    return Probed(probe, step, start_ns, NOT_JUDGED, (why,), figures, done, None, cut_short=True)


def outcomes(probed: list[Probed], workers: int) -> list[Outcome]:
    """The probes as the plan reads them (evbench.searchplan.next_step): a probe a saturated
    host left inconclusive is none of them, so the plan asks for its rate again. Pure."""
    return [
        Outcome(
            p.probe,
            p.verdict,  # holds, breaks or sender-limited: anything else raised
            p.reasons,
            p.figures["sender_ratio"] * p.probe.rate_per_s,
            workers,
        )
        for p in probed
        if p.verdict != HOST_SATURATED
    ]


def probes_clocks(probed: list[Probed], last: SenderDone) -> dict[str, SenderClock]:
    """The senders' clock offsets over the search so far, ending with `last`'s: what run.json
    says once `last` is the final probe, and so what the analysis corrects by. Pure."""
    earlier = [p.sender for p in probed if p.sender is not last]
    return spanning_clocks([sender_clocks(done) for done in (*earlier, last)])


def corrections(probed: list[Probed], last: SenderDone) -> dict[int, Correction]:
    """The receiver's stamps moved onto the senders' clocks as the run's analysis moves them
    (its default mode), so that a probe and the final analysis agree on shifted clocks."""
    clocks = probes_clocks(probed, last)
    return to_apply(corrections_from({"senders": clocks}), DEFAULT_CORRECTION)


def search_doc(
    opts: SearchOptions, probed: list[Probed], result: Result | None, started_ns: int
) -> SearchDoc:
    """run.json's `search`: the plan, every probe's verdict and figures, and the answer once
    there is one (None while the search goes on, or when it did not complete). Pure."""
    probes = [_probe_doc(p) for p in probed]
    return {
        "plan": asdict(opts.plan),
        "fresh": opts.fresh,
        "settle_s": None if opts.fresh else opts.settle_s,
        "workers": opts.workers,
        "objective": {"terms": [objective.text for objective in opts.objective]},
        "probes": probes,
        "result": _result_doc(result) if result is not None else None,
        "minutes": round((time.time_ns() - started_ns) / (60 * NS_PER_S), 2),
    }


def _probe_doc(p: Probed) -> SearchProbeDoc:
    doc: SearchProbeDoc = {
        "step": p.step,
        "rate_per_s": p.probe.rate_per_s,
        "hold_s": p.probe.hold_s,
        "confirm": p.probe.confirm,
        "start_ns": p.start_ns,
        "verdict": p.verdict,
        "reasons": list(p.reasons),
        "e2e_p99_ms": p.figures["e2e_p99_ms"],
        "sender_ratio": p.figures["sender_ratio"],
        "restarted": p.restarted,
    }
    if p.cut_short:
        doc["cut_short"] = True
    return doc


def _result_doc(result: Result) -> SearchResultDoc:
    return {
        "max_sustainable_per_s": result.max_sustainable_per_s,
        "highest_hold_per_s": result.highest_hold_per_s,
        "lowest_break_per_s": result.lowest_break_per_s,
        "why": result.why,
        "symptom": list(result.symptom),
        "workers_needed": result.workers_needed,
        "probes": result.probes,
    }


def result_line(result: Result, minutes: float, faulted: bool = False) -> str:
    """The search's last words: the answer with its bracket, what broke, probes and minutes
    (`faulted`: the probes had faults, and held when the system recovered from them)."""
    spent = f"{result.probes} probes in {minutes:.1f} min"
    if result.max_sustainable_per_s is None:
        return f"search ended after {spent}: {result.why}"
    answer = "highest rate recovered from its faults at" if faulted else "max sustainable rate"
    line = (
        f"{answer} {result.max_sustainable_per_s}/s (held {result.highest_hold_per_s}"
        f"/s, broke {result.lowest_break_per_s or '-'}/s) after {spent}: {result.why}"
    )
    if result.symptom:
        line += f"\n  at {result.lowest_break_per_s}/s: {'; '.join(result.symptom)}"
    return line


def record(
    session: Session,
    opts: SearchOptions,
    probed: list[Probed],
    pending: Probe | None,
    result: Result | None,
    clocks: dict[str, SenderClock],
    status: RunStatus | None,
    faults: list[FaultDoc],
) -> None:
    """run.json as of now: the probes (and the one under way) as the run's steps, their senders'
    counts and clocks, the search's section, and every probe's faults."""
    steps = [p.probe for p in probed] + ([pending] if pending else [])
    start_ns = probed[0].start_ns if probed else None
    session.sender_ended(
        SearchSenderSummary(
            start_ns=start_ns,
            sent=sum(p.sender["sent"] for p in probed),
            ok=sum(p.sender["ok"] for p in probed),
            failures=sum(p.sender["failures"] for p in probed),
            probes=[p.sender for p in probed],
        )
    )
    session.scheduled(start_ns, clocks)
    session.describe_system()
    spec = ",".join(f"{p.rate_per_s}:{p.hold_s}" for p in steps)
    doc = session.document(parse_pace(spec, name="search"), status)
    doc["search"] = search_doc(opts, probed, result, session.started_ns)
    if opts.faults:
        doc["faults"] = faults
    session.write(doc)
