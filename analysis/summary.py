"""summary.json of one SUT from what the job found (pure): each step's row and verdict, the
run's counts, latency tails, breaking point and verdict text, the clock note and the headline
`evbench analyze` prints. Table-tested without Spark (tests/analysis/test_summary.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

from analysis.capacity import (
    Capacity,
    capacity,
    host_verdict_text,
    saturated_steps,
    search_verdict_text,
    verdict_text,
)
from analysis.confidence import with_intervals
from analysis.deaths import after_deaths, deaths_text, run_deaths
from analysis.digests import union_sketch
from analysis.fanout import doubled_subscribers, fanout_of, silent_subscribers
from analysis.faultsteps import (
    FAULTED,
    after_faults,
    fault_ledgers,
    fault_summaries,
    faulted_steps,
    faults_text,
)
from analysis.inputs import AnalyzeOptions, SutInputs
from analysis.instrumentfail import (
    InstrumentEvidence,
    delivery_attempts,
    instrument_failures,
    under_instrument_failure,
)
from analysis.stepjudge import Sketch, system_steps
from analysis.steprule import StepTotals
from analysis.verdicts import HOLDS, Thresholds, Verdict, drift_verdict_text
from contract.documents import RunDoc, receiver_stats, sender_summary
from contract.figures import TailDoc
from contract.summarydocs import ClockSummaryDoc, CountsDoc, StepSummaryDoc, SummaryDoc
from contract.units import NS_PER_MS
from runtime.clocks import Correction
from runtime.failcause import added, causes_text

# summary.json's latency_ms: name -> metric.
SUMMARY_LATENCIES = {
    "publish": "publish",
    "publish_corrected": "publish_corrected",
    "e2e": "e2e",
    "e2e_uncorrected": "e2e_uncorrected",
}


@dataclass(frozen=True)
class SutFindings:
    """What the chain found for one SUT: its steps' totals in step order, its foreign
    deliveries, each (metric, step)'s sketch and each step's e2e figures per second
    (`{"step", "second", "n", "p50_ms", "p99_ms"}` rows, from that second's digest)."""

    totals: Sequence[StepTotals]
    foreign: int
    sketches: Mapping[tuple[str, int], Sketch]
    e2e_points: Sequence[Mapping[str, float]]
    seconds: Sequence[Mapping[str, Any]] = ()  # metrics.parquet's rows: counts per second
    # A fan-out's: each subscriber's totals in step order, by its number (analysis.fanout).
    subscriber_totals: Mapping[int, Sequence[StepTotals]] = field(default_factory=dict)
    strays: int = 0  # a fan-out's deliveries to a path no subscriber has
    unrecorded: int = 0  # the run's own ids received, never sent (analysis.unrecorded)


def _trimmed(trim_s: float) -> str | None:
    """What `--trim` left out, as summary.json says it."""
    if not trim_s:
        return None
    return f"events intended in the first {trim_s:g} s after the schedule start are left out"


def summary(
    inputs: SutInputs,
    opts: AnalyzeOptions,
    found: SutFindings,
    clocks: tuple[dict[int, Correction], dict[int, Correction]],
) -> SummaryDoc:
    """summary.json: the measured offsets and those applied are `clocks`."""
    run = inputs.run
    counts = _counts(found.totals, found.foreign, found.unrecorded)
    failures = instrument_failures(evidence(inputs, counts, found))
    faults, by_step = run.get("faults") or [], {t["step"]: t for t in found.totals}
    steps, verdicts, baseline = _judged(inputs, found, opts.thresholds, failures)
    deaths = run_deaths(run, found.totals, inputs.start_ns)
    verdicts = after_deaths(verdicts, deaths.spoiled, deaths.lost, inputs.start_ns)
    ledgers = fault_ledgers(faults, inputs.start_ns, found.seconds, found.e2e_points)
    verdicts = after_faults(verdicts, faults, ledgers, by_step)
    for step, judged in zip(steps, verdicts, strict=True):
        step["verdict"], step["reasons"] = judged.verdict, list(judged.reasons)
    saturated = saturated_steps(steps, opts.thresholds)
    found_capacity, verdict = _run_verdict(run, verdicts, failures, saturated)
    verdict = _with_notes(verdict, failures, steps, saturated, baseline, opts.thresholds, run)
    if deaths.found and not failures and "search" not in run:
        rates = {t["step"]: t["target_rate_per_s"] for t in found.totals}
        verdict = f"{deaths_text(deaths.found, rates)}; before it: {verdict}"
    if (injected := faults_text(faults, ledgers, by_step)) and not failures:
        rest = [v for v in verdicts if v.verdict != FAULTED]
        verdict = f"{injected}; the other steps: {verdict}" if rest else injected
    doc: SummaryDoc = {
        "run_id": run["run_id"],
        "sut": run["sut"],
        "pace": run["pace"]["name"],
        "status": run.get("status"),
        "verdict": verdict,
        "instrument_failures": list(failures),
        "schedule_start_ns": inputs.start_ns,
        "schedule_start_from": inputs.start_source,
        "trim_s": opts.trim_s,
        "trimmed": _trimmed(opts.trim_s),
        "counts": counts,
        "latency_ms": {
            name: whole_run(found.sketches, metric) for name, metric in SUMMARY_LATENCIES.items()
        },
        "steps": steps,
        "breaking_point_per_s": found_capacity.breaking_point_per_s,
        "max_sustainable_rate_per_s": found_capacity.max_sustainable_rate_per_s,
        "recovered_per_s": found_capacity.recovered_per_s,
        "baseline_e2e_p99_ms": baseline,
        "host_saturated_steps": saturated,
        "thresholds": opts.thresholds.as_dict(),
        "clock": clock_summary(*clocks, opts.clock_correction, found.totals),
    }
    if search := run.get("search"):
        doc["search"] = search
    if repeat := run.get("repeat"):
        doc["repeat"] = repeat
    if deaths.found:
        doc["sut_deaths"] = deaths.found
    if faults:
        doc["faults"] = fault_summaries(faults, ledgers, by_step, inputs.start_ns)
    return doc


def _with_notes(
    verdict: str,
    failures: Sequence[str],
    steps: Sequence[StepSummaryDoc],
    saturated: Sequence[int],
    baseline: float | None,
    t: Thresholds,
    run: RunDoc,
) -> str:
    """The run's verdict with what it adds, when there is any and no instrument failed: the
    steps a saturated host left inconclusive, that no step was clean enough to be the latency
    baseline (a staircase's: a search judges its probes as it goes), and the steps whose
    latency drifts."""
    if failures:
        return verdict
    notes = [host_verdict_text(steps, saturated)]
    if baseline is None and "search" not in run and any(s["e2e_n"] for s in steps):
        notes.append(
            "no clean step to take a latency baseline from: each step's e2e P99 held to "
            f"the absolute {t.latency_inflation_min_ms:g} ms"
        )
    drifts = [(s["step"], s["target_rate_per_s"], s.get("drift")) for s in steps]
    notes.append(drift_verdict_text(drifts))
    return "; ".join((verdict, *(note for note in notes if note)))


def _judged(
    inputs: SutInputs, found: SutFindings, thresholds: Thresholds, failures: Sequence[str]
) -> tuple[list[StepSummaryDoc], list[Verdict], float | None]:
    """Every step's row and verdict (analysis.stepjudge), an instrument failure overruling a
    break, and the run's latency baseline."""
    seconds: dict[int, list[Mapping[str, float]]] = {}
    for point in sorted(found.e2e_points, key=lambda p: p["second"]):
        seconds.setdefault(int(point["step"]), []).append(point)
    faulted = faulted_steps(inputs.run.get("faults") or [])
    rows, baseline = system_steps(
        inputs.run, found.totals, found.sketches, seconds, thresholds, faulted, inputs.host
    )
    verdicts = under_instrument_failure([verdict for _, verdict in rows], failures)
    steps = []
    for (step, _), verdict in zip(rows, verdicts, strict=True):
        step["verdict"], step["reasons"] = verdict.verdict, list(verdict.reasons)
        steps.append(step)
    return steps, verdicts, baseline


def _run_verdict(
    run: RunDoc, verdicts: Sequence[Verdict], failures: Sequence[str], saturated: Collection[int]
) -> tuple[Capacity, str]:
    """The run's capacity (breaking point, max sustainable rate, recovery) and verdict text.

    An instrument failure names no breaking point and no sustainable rate: what it broke would
    be charged to the system under test. A search's probes are not a staircase (it bisects and
    confirms): its own bracket, judged probe by probe as it went, is the answer, not a reading
    of the steps in order; a search that did not finish has none."""
    if failures:
        return Capacity(None, None), verdict_text(None, None, failures)
    if search := run.get("search"):
        result = search.get("result")
        text = search_verdict_text(result, run.get("status"))
        if not result:
            return Capacity(None, None), text
        bracket = Capacity(result.get("lowest_break_per_s"), result.get("max_sustainable_per_s"))
        return bracket, text
    found = capacity(verdicts)
    point, sustainable = found.breaking_point_per_s, found.max_sustainable_rate_per_s
    # held only where others saturated the host: the system may take more (a lower bound)
    at_least = not any(
        v.verdict == HOLDS and v.target_rate_per_s == sustainable and v.step not in saturated
        for v in verdicts
    )
    return found, verdict_text(point, sustainable, (), found.recovered_per_s, at_least)


def whole_run(sketches: Mapping[tuple[str, int], Sketch], metric: str) -> TailDoc:
    """Whole-run figures: step digests merged, step top values merged as far as they are the
    run's (analysis.digests.verified_top: P99.99 is exact wherever they reach its rank, and
    `exact` says so). Merged in step
    order: a T-Digest merge depends on its order (in the fourth digit of a median), and the
    order Spark returns the steps in is its partitioning's, which adaptive execution varies."""
    parts = [sketch for (m, _), sketch in sorted(sketches.items(), key=_by_key) if m == metric]
    return with_intervals(*union_sketch(parts))


def _by_key(item: tuple[tuple[str, int], Sketch]) -> tuple[str, int]:
    return item[0]


def clock_summary(
    offsets: dict[int, Correction],
    applied: dict[int, Correction],
    mode: str,
    totals: Sequence[StepTotals],
) -> ClockSummaryDoc:
    """What was done about the sender's and receiver's clocks, and how far to trust it."""
    if applied:
        workers = ", ".join(map(str, sorted(applied)))
        bound_ms = max(c.bound_ns for c in applied.values()) / NS_PER_MS
        note = (
            f"end-to-end latencies corrected for the clock offset of sender worker(s) {workers},"
            f" within ±{bound_ms:.3f} ms"
        )
    elif offsets:
        note = (
            "not corrected: --clock-correction off"
            if mode == "off"
            else "not corrected: the measured offsets are within their error bounds (one clock)"
        )
    else:
        note = "not corrected: no clock offsets were measured (run.json has none)"
    return {
        "correction": mode,
        "applied": bool(applied),
        "note": note,
        "workers": {
            str(worker): {
                "offset_ns": c.before.offset_ns,
                "bound_ns": c.bound_ns,
                "drift_ns": c.drift_ns,
                "applied": worker in applied,
            }
            for worker, c in sorted(offsets.items())
        },
        "negative_e2e": int(sum(t.get("negative_e2e") or 0 for t in totals)),
    }


def _counts(totals: Sequence[StepTotals], foreign: int, unrecorded: int = 0) -> CountsDoc:
    rows: Sequence[Mapping[str, Any]] = totals

    def total(key: str) -> int:
        return int(sum(row[key] or 0 for row in rows))

    return {
        "sent": total("sent"),
        "scheduled": total("scheduled"),
        "send_failures": total("send_failures"),
        "acked": total("acked"),
        "received": total("delivered"),
        "lost": total("lost"),
        "duplicates": total("duplicates"),
        "foreign": foreign,
        "unrecorded_sends": unrecorded,
        "decoys": total("decoys"),
        "filtered": total("filtered"),
        "leaked": total("leaked"),
        "failures_by_cause": reduce(
            added, (row.get("failures_by_cause") or {} for row in rows), {}
        ),
    }


def evidence(inputs: SutInputs, counts: CountsDoc, found: SutFindings) -> InstrumentEvidence:
    """What says whether the instruments worked: run.json's account, the files, the counts."""
    run = inputs.run
    sender, receiver = sender_summary(run), receiver_stats(run)
    silent = silent_subscribers(fanout_of(run), found.subscriber_totals)
    subscribers_got = sum(t["delivered"] for ts in found.subscriber_totals.values() for t in ts)
    return InstrumentEvidence(
        run_status=run.get("status"),
        recorded_failures=tuple(run.get("instrument_failures") or ()),
        sent_files=len(inputs.sent_parts),
        received_files=len(inputs.received_parts),
        sender_reported_sent=sender.get("sent"),
        receiver_reported_received=receiver.get("received"),
        acked=counts["acked"],
        acked_decoys=counts["filtered"] + counts["leaked"],
        # Under fan-out, any subscriber's delivery (or one astray) is one, complete or not.
        deliveries=sum(
            (counts["received"], counts["foreign"], found.unrecorded, found.strays, subscribers_got)
        ),
        direct=run.get("sut") == "direct",
        sut_processes_died=bool((run.get("sut_settings") or {}).get("died")),
        receiver_delivery_attempts=delivery_attempts(receiver) if receiver else None,
        receiver_url=run["receiver"].get("url") if "receiver" in run else None,
        stray_deliveries=found.strays,
        silent_subscribers=silent,
        doubled_subscribers=doubled_subscribers(fanout_of(run), found.subscriber_totals),
    )


def significant(value: float, digits: int = 3) -> str:
    """`value` rounded to `digits` significant digits, trailing zeros kept: 0.4213 -> "0.421",
    8070.4 -> "8070", 5 -> "5.00"."""
    if value == 0:
        return "0"
    places = digits - 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, places)
    if rounded and math.floor(math.log10(abs(rounded))) > digits - 1 - places:
        places -= 1  # rounded up into the next power of ten: 99.95 -> "100", not "100.0"
    return f"{round(value, places):.{max(places, 0)}f}"


def latency_text(ms: float | None) -> str:
    """A latency as people read it: 3 significant digits, in ms below a second, in s from one
    (8070.4 -> "8.07 s", 0.4213 -> "0.421 ms"); "-" when there is none. summary.json keeps
    the exact figures."""
    if ms is None or not math.isfinite(ms):
        return "-"
    shown = float(significant(ms))  # 999.96 ms reads 1.00 s, not 1000 ms
    return f"{significant(shown / 1000)} s" if abs(shown) >= 1000 else f"{significant(ms)} ms"


def headline(summary: SummaryDoc) -> str:
    """The line `evbench analyze` prints per SUT."""
    e2e = summary["latency_ms"]["e2e"]
    tail = "max" if e2e["p9999_is_max"] else "P99.99"
    c, fans = summary["counts"], summary.get("subscribers", [])
    lost = [str(s["counts"]["lost"]) for s in fans]
    return (
        f"{summary['sut']}: {summary['verdict']}; e2e {tail} {latency_text(e2e['p9999'])} "
        f"(n={e2e['n']}); "
        f"sent {c['sent']}, send failures {c['send_failures']}{_causes(c)}, lost {c['lost']}, "
        f"duplicates {c['duplicates']}, foreign {c['foreign']}"
        + (f", unrecorded sends {n}" if (n := c.get("unrecorded_sends")) else "")
        + (f", decoys filtered {c['filtered']} of {c['decoys']}" if c["decoys"] else "")
        + (f"; {len(fans)} subscribers, lost at each: {' '.join(lost)}" if fans else "")
    )


def _causes(counts: CountsDoc) -> str:
    """` (connection refused 1000)`: the send failures by cause, when there are any."""
    text = causes_text(counts.get("failures_by_cause") or {})
    return f" ({text})" if text else ""


def read_summary(path: Path) -> SummaryDoc:
    """A summary.json as its type says (one written before a key existed lacks it: readers use
    `.get` for the NotRequired keys)."""
    doc: SummaryDoc = json.loads(path.read_text())
    return doc


def strict_json(doc: object) -> str:
    """JSON that every parser reads: a figure that came out NaN or infinite is null, on
    purpose, instead of the `NaN` Python writes by default."""
    return json.dumps(_finite_or_null(doc), indent=2, allow_nan=False)


def _finite_or_null(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_null(item) for item in value]
    return value
