"""summary.json's `subscribers` (pure): each subscriber of a fan-out on its own deliveries, its
counts, its end-to-end tail and each step judged by the same step rule as the system
(analysis.summary.step_row), beside the system's own figures, which are the events' completion
at every subscriber (analysis.fanout). Table-tested without Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from analysis.fanout import Fanout, metric_at
from analysis.faultsteps import FAULTED
from analysis.hostload import HostTicks
from analysis.instrumentfail import under_instrument_failure
from analysis.stepjudge import Sketch, StepInput, judged_rows
from analysis.steprule import StepTails, StepTotals
from analysis.summary import SutFindings, whole_run
from analysis.verdicts import Thresholds
from contract.fanout import SubscriberCountsDoc, SubscriberStepDoc, SubscriberSummaryDoc
from contract.summarydocs import StepSummaryDoc, SummaryDoc


def subscriber_docs(
    fanout: Fanout,
    found: SutFindings,
    doc: SummaryDoc,
    thresholds: Thresholds,
    host: HostTicks | None = None,
) -> list[SubscriberSummaryDoc]:
    """Each subscriber's entry, in run.json's order; `doc`: the system's summary, whose steps
    say how long each ran; `host`: the run's host samples, read as for the system's steps."""
    system_steps = {s["step"]: s for s in doc["steps"]}
    return [
        _subscriber(
            number,
            path,
            takes,
            found.subscriber_totals.get(number, ()),
            _as_e2e(found.sketches, metric_at(number)),
            system_steps,
            thresholds,
            doc["instrument_failures"],
            host,
        )
        for number, (path, takes) in enumerate(fanout, start=1)
    ]


def _as_e2e(
    sketches: Mapping[tuple[str, int], Sketch], metric: str
) -> dict[tuple[str, int], Sketch]:
    """A subscriber's sketches as the step rule reads a system's: its own e2e digests under
    `e2e`, the sender's lag (the same events) as it is."""
    mine = {("e2e", step): sketch for (m, step), sketch in sketches.items() if m == metric}
    return mine | {key: sketch for key, sketch in sketches.items() if key[0] == "sender_lag"}


def _subscriber(
    number: int,
    path: str,
    takes: bool,
    totals: Sequence[StepTotals],
    sketches: Mapping[tuple[str, int], Sketch],
    system_steps: Mapping[int, StepSummaryDoc],
    thresholds: Thresholds,
    failures: Sequence[str],
    host: HostTicks | None,
) -> SubscriberSummaryDoc:
    inputs = []
    for total in totals:
        system = system_steps.get(total["step"])
        duration_s = system["duration_s"] if system else 1
        step = {key: sketch for key, sketch in sketches.items() if key[1] == total["step"]}
        tails = StepTails(
            e2e=whole_run(step, "e2e"),
            sender_lag=whole_run(step, "sender_lag"),
            e2e_medians=(),  # no per-second digests per subscriber: the rise is the system's
        )
        ran_s = system.get("ran_s") if system else None
        # As the system's: a step a fault was injected into is no measure of it unloaded.
        calm = not system or system["verdict"] != FAULTED
        inputs.append(StepInput(total, duration_s, tails, ran_s, may_set_baseline=calm))
    rows, _ = judged_rows(inputs, thresholds, host)
    # As the system's: a break while an instrument failed may be the instrument's.
    verdicts = under_instrument_failure([verdict for _, verdict in rows], failures)
    steps: list[SubscriberStepDoc] = [
        _step_doc(row, step.total, verdict.verdict, list(verdict.reasons))
        for (row, _), step, verdict in zip(rows, inputs, verdicts, strict=True)
    ]
    counts: SubscriberCountsDoc = {
        "delivered": sum(t["delivered"] - t["leaked"] for t in totals),
        "lost": sum(t["lost"] for t in totals),
        "duplicates": sum(t["duplicates"] for t in totals),
        "filtered": sum(t["filtered"] for t in totals),
        "leaked": sum(t["leaked"] for t in totals),
    }
    return {
        "number": number,
        "path": path,
        "matches": takes,
        "counts": counts,
        "e2e_ms": whole_run(sketches, "e2e"),
        "steps": steps,
    }


def _step_doc(
    row: StepSummaryDoc, total: StepTotals, verdict: str, reasons: list[str]
) -> SubscriberStepDoc:
    return {
        "step": row["step"],
        "target_rate_per_s": row["target_rate_per_s"],
        "delivered_rate_per_s": row["delivered_rate_per_s"],
        "lost": total["lost"],
        "duplicates": total["duplicates"],
        "filtered": total["filtered"],
        "leaked": total["leaked"],
        "p99_e2e_ms": row["p99_e2e_ms"],
        "p9999_e2e_ms": row["p9999_e2e_ms"],
        "e2e_n": row["e2e_n"],
        "verdict": verdict,
        "reasons": reasons,
    }
