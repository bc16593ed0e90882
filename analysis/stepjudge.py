"""Each step's summary row and verdict (pure): its figures by the step rule
(analysis.steprule), the host's load over it (analysis.hostload), then every step judged in
run order against the run's clean latency baseline (analysis.capacity.judge_steps). One way
for a system's steps and for each fan-out subscriber's (analysis.fanout_summary).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import fastdigest
import numpy as np

from analysis.capacity import judge_steps
from analysis.confidence import with_intervals
from analysis.digests import empty_tail
from analysis.drift import drift_of
from analysis.hostload import HostLoad, HostTicks, host_load
from analysis.steprule import StepTails, StepTotals, cut_short_s, duration_of, step_figures
from analysis.verdicts import Thresholds, Verdict, not_judged_probe, with_drift
from contract.documents import RunDoc
from contract.figures import TailDoc
from contract.summarydocs import DriftDoc, HostLoadDoc, StepSummaryDoc
from runtime.formulas import achieved_rate_per_s

# A step's digest of one metric and its exact top values.
Sketch = tuple[fastdigest.TDigest, np.ndarray]


@dataclass(frozen=True)
class StepInput:
    """What one step is judged from: its totals, its duration as the pace gave it, its tails,
    the seconds it ran when cut short, its drift and whether it may set the latency baseline
    (a step a fault was injected into is no measure of the system unloaded)."""

    total: StepTotals
    duration_s: int
    tails: StepTails
    ran_s: float | None = None
    drift: DriftDoc | None = None
    may_set_baseline: bool = True


def judged_rows(
    steps: Sequence[StepInput], thresholds: Thresholds, host: HostTicks | None = None
) -> tuple[list[tuple[StepSummaryDoc, Verdict]], float | None]:
    """Every step's row and verdict (before an instrument failure overrules any), and the
    latency baseline the run settled on (None: no clean step)."""
    figures = [
        replace(
            step_figures(s.total, s.tails, s.ran_s or s.duration_s, None),
            host=host_load(
                host, s.total["start_ns"], s.total["last_intended_ns"], thresholds.host_busy_ratio
            ),
        )
        for s in steps
    ]
    eligible = [s.may_set_baseline and s.total["step"] >= 1 for s in steps]
    verdicts, baseline = judge_steps(figures, thresholds, eligible)
    rows = []
    for step, fig, verdict in zip(steps, figures, verdicts, strict=True):
        judged = with_drift(verdict, step.drift)
        if step.ran_s is not None:
            cut = (
                f"cut short after {step.ran_s:.1f} s of {step.duration_s} s: "
                "judged on the time it ran"
            )
            judged = replace(judged, reasons=(*judged.reasons, cut))
        rows.append(step_row(step, fig.delivered_rate_per_s, fig.e2e_rise_ms, judged, fig.host))
    return rows, baseline


def system_steps(
    run: RunDoc,
    totals: Sequence[StepTotals],
    sketches: Mapping[tuple[str, int], Sketch],
    seconds: Mapping[int, Sequence[Mapping[str, float]]],
    thresholds: Thresholds,
    faulted: Collection[int] = (),
    host: HostTicks | None = None,
) -> tuple[list[tuple[StepSummaryDoc, Verdict]], float | None]:
    """A system's steps judged (before an instrument failure overrules any), from each step's
    sketches and its e2e figures per second (`seconds`: step -> rows of second, p50_ms...): a
    search's probe cut short is not judged, and the e2e baseline comes from the steps without
    a fault (`faulted`)."""
    durations = {i: s["duration_s"] for i, s in enumerate(run["pace"]["steps"], start=1)}
    last = max((t["step"] for t in totals), default=None)
    finished = run.get("status") == "completed"
    inputs = []
    for total in totals:
        step = total["step"]
        duration_s = duration_of(total, durations)
        # Only the step under way when a run stopped early can be cut short.
        ran_s = None if finished or step != last else cut_short_s(total, duration_s)
        points = seconds.get(step, [])
        tails = StepTails(
            e2e=tail(sketches, "e2e", step),
            sender_lag=tail(sketches, "sender_lag", step),
            e2e_medians=[(p["second"], p["p50_ms"]) for p in points],
        )
        drift = drift_of(points, thresholds)
        inputs.append(StepInput(total, duration_s, tails, ran_s, drift, step not in faulted))
    rows, baseline = judged_rows(inputs, thresholds, host)
    if "search" in run:
        rows = [(row, not_judged_probe(v) if "ran_s" in row else v) for row, v in rows]
    return rows, baseline


def step_row(
    step: StepInput,
    delivered_rate_per_s: float,
    e2e_rise_ms: float | None,
    verdict: Verdict,
    host: HostLoad | None,
) -> tuple[StepSummaryDoc, Verdict]:
    """A step's summary row, with its verdict."""
    total, tails = step.total, step.tails
    rate = total["target_rate_per_s"]
    achieved = achieved_rate_per_s(total["sent"], total["start_ns"], total["last_sent_ns"], rate)
    row: StepSummaryDoc = {
        "step": total["step"],
        "target_rate_per_s": rate,
        "duration_s": step.duration_s,
        "scheduled": total["scheduled"],
        "achieved_send_rate_per_s": round(achieved, 2),
        "delivered_rate_per_s": round(delivered_rate_per_s, 2),
        "send_failures": total["send_failures"],
        "inflight_cap_refused": total["inflight_cap_refused"],
        "failures_by_cause": dict(total.get("failures_by_cause") or {}),
        "lost": total["lost"],
        "duplicates": total["duplicates"],
        "filtered": total["filtered"],
        "leaked": total["leaked"],
        "sender_lag_p99_ms": tails.sender_lag["p99"],
        "p50_e2e_ms": tails.e2e["p50"],
        "p99_e2e_ms": tails.e2e["p99"],
        "p9999_e2e_ms": tails.e2e["p9999"],
        "e2e_n": tails.e2e["n"],
        "p9999_is_max": tails.e2e["p9999_is_max"],
        "e2e_exact": tails.e2e["exact"],
        "e2e_rank_error": tails.e2e["rank_error"],
        "e2e_ci95": tails.e2e.get("ci95", {}),
        "e2e_rise_ms": None if e2e_rise_ms is None else round(e2e_rise_ms, 3),
        "verdict": verdict.verdict,
        "reasons": list(verdict.reasons),
        "drift": step.drift,
        "host": host_doc(host),
    }
    if step.ran_s is not None:
        row["ran_s"] = round(step.ran_s, 3)
    return row, verdict


def host_doc(host: HostLoad | None) -> HostLoadDoc | None:
    """A step's host figures as its row keeps them: unrounded, so that the rule read again from
    the row (analysis.capacity.saturated_steps) decides as it did on the figures."""
    if host is None:
        return None
    return {
        "cpus": host.cpus,
        "busy_ratio": host.busy_ratio,
        "others_ratio": host.others_ratio,
        "steal_ratio": host.steal_ratio,
        "samples": host.samples,
        "peak_busy_ratio": host.peak_busy_ratio,
        "peak_others_ratio": host.peak_others_ratio,
    }


def tail(sketches: Mapping[tuple[str, int], Sketch], metric: str, step: int) -> TailDoc:
    """A step's tail figures of one metric, from its digest and exact top values."""
    sketch = sketches.get((metric, step))
    return with_intervals(*sketch) if sketch is not None else empty_tail()
