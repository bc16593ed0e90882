"""A capacity-search probe judged from its own records in seconds, without Spark.

The search must decide after every probe, and a Spark job costs tens of seconds; a probe is one
step of at most a few hundred thousand events, so its figures are computed here from its events
as the analysis reads them (analysis.tasks.files_events: sent rows met with their first
deliveries, on the sender's clock), by the step rule the analysis itself applies to every step
(analysis.steprule: the same outcomes, totals, T-Digest tails and figures), judged by the
reports' rule (analysis.verdicts.judge), plus the user's objectives (analysis.objectives). The
run's final analysis recomputes every step with Spark, as for any run, and reaches the same
figures, provided the probe's seconds are counted from the run's schedule start
(`schedule_start_ns`; by default from the probe's first slot, which moves only the per-second
medians the rise is fitted to).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.faultsteps import FaultLedger, fault_ledgers
from analysis.hostload import HostLoad
from analysis.objectives import Objective, breached, judge_values, share
from analysis.steprule import judged_figures, latencies, outcomes, seconds_since
from analysis.steps import second_counts
from analysis.verdicts import (
    BREAKS,
    HOLDS,
    SENDER_LIMITED,
    StepFigures,
    Thresholds,
    Verdict,
    judge_against,
    on_host,
    saturation,
)
from contract.faults import FaultDoc


def probe_figures(
    events: pa.Table,
    step: int,
    rate_per_s: int,
    duration_s: int,
    baseline_e2e_p99_ms: float | None,
    *,
    schedule_start_ns: int | None = None,
) -> StepFigures:
    """The figures the breaking-point rule reads, as the run's analysis computes them for this
    step (analysis.steprule.judged_figures), from the probe's events as the analysis reads them
    (analysis.tasks.files_events). `schedule_start_ns` is where the run's seconds count from
    (default: the probe's first slot). Pure."""
    if events.num_rows == 0:  # nothing handled: the sender kept no pace at all
        return StepFigures(
            step, rate_per_s, 0, 0, 0, 0, 0.0, None, 0.0, None, None, float(rate_per_s), None,
            baseline_e2e_p99_ms,
        )  # fmt: skip
    intended = events.column("intended_ns")
    start_ns = int(pc.min(intended).as_py()) if schedule_start_ns is None else schedule_start_ns
    return judged_figures(
        events,
        start_ns=start_ns,
        duration_s=duration_s,
        baseline_e2e_p99_ms=baseline_e2e_p99_ms,
    )


def probe_ledgers(
    events: pa.Table, faults: Sequence[FaultDoc], schedule_start_ns: int
) -> list[FaultLedger | None]:
    """Each of the probe's faults' ledger (analysis.faultsteps), from the probe's events as the
    analysis reads them: its per-second counts as analysis.steps counts them, and each second's
    exact e2e P99 (the analysis's comes from that second's digest) and highest e2e (the band is
    of the seconds all delivered before the fault), seconds counted from
    `schedule_start_ns`. Pure."""
    if events.num_rows == 0:
        return [None for _ in faults]
    flags = outcomes(events)
    e2e_ms = latencies(events, flags["ok"], ("e2e",))["e2e_ms"]
    rows = second_counts(events, flags, schedule_start_ns, e2e_ms)
    due = seconds_since(events.column("intended_ns").to_numpy(), schedule_start_ns)
    values = e2e_ms.to_numpy(zero_copy_only=False)  # null (not delivered): NaN
    delivered = ~np.isnan(values)
    due, values = due[delivered], values[delivered]
    order = np.argsort(due, kind="stable")  # one sort, then each second's run of values
    seconds, starts = np.unique(due[order], return_index=True)
    points = [
        {
            "second": float(second),
            "p99_ms": float(np.percentile(part, 99)),
            "max_ms": float(part.max()),
        }
        for second, part in zip(seconds, np.split(values[order], starts[1:]), strict=True)
    ]
    return fault_ledgers(faults, schedule_start_ns, rows, points)


def baseline_e2e_p99_ms(
    earlier: Sequence[tuple[str, float | None, HostLoad | None]], thresholds: Thresholds
) -> float | None:
    """How the system does unloaded, from the (verdict, e2e P99 ms, host load) of the probes
    so far: the first probe that held on a host nobody else saturated, as the run's analysis
    takes the first clean step (analysis.capacity.judge_steps); None until one has, and a probe
    judged without a baseline is its own if it is clean, else held to the absolute bar
    (analysis.verdicts.judge_against). Pure."""
    return next(
        (
            p99_ms
            for verdict, p99_ms, host in earlier
            if verdict == HOLDS and p99_ms is not None and saturation(host, thresholds) is None
        ),
        None,
    )


def verdict_of(
    fig: StepFigures,
    thresholds: Thresholds,
    objectives: Sequence[Objective] = (),
    instruments_only: bool = False,
) -> Verdict:
    """The reports' rule, then the objective: a probe that holds by the rule but misses the
    objective breaks, with the objective's reason. Where the system is the instruments (direct:
    the receiver), where it breaks (by the rule or the objective) the instruments do:
    sender-limited. On a host others saturated, nothing it found is a break (`on_host`, last,
    so that a missed objective cannot make one either). Pure."""
    found = _by_rule_and_objective(fig, thresholds, objectives)
    if found.verdict == BREAKS and instruments_only:
        why = "the system is the instruments (the receiver), so its limit is theirs"
        found = replace(found, verdict=SENDER_LIMITED, reasons=(*found.reasons, why))
    return on_host(found, fig.host, thresholds)


def _by_rule_and_objective(
    fig: StepFigures, thresholds: Thresholds, objectives: Sequence[Objective]
) -> Verdict:
    found = judge_against(fig, thresholds, fig.baseline_e2e_p99_ms)
    if found.verdict != HOLDS:
        return found
    return with_objectives(found, fig, objectives)


def with_objectives(verdict: Verdict, fig: StepFigures, objectives: Sequence[Objective]) -> Verdict:
    """A probe that holds (by the rule, or by its recovery from a fault) breaks on any objective
    it misses, each said. Pure."""
    values = {
        "e2e-p99": fig.e2e_p99_ms,
        "lost": fig.lost,
        "lost%": share(fig.lost, fig.acked),
        "send-failures": fig.send_failures,
        "send-failures%": share(fig.send_failures, fig.scheduled),
    }
    missed = breached(judge_values(objectives, values, f"probe {fig.step}"))
    if verdict.verdict != HOLDS or not missed:
        return verdict
    reasons = tuple(f"the objective {m['text']}" for m in missed)
    return Verdict(fig.step, fig.target_rate_per_s, BREAKS, (*reasons, *verdict.reasons))
