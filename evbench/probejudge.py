"""A capacity-search probe judged from its own records in seconds, without Spark.

The search must decide after every probe, and a Spark job costs tens of seconds; a probe is one
step of at most a few hundred thousand events, so its figures are computed exactly here (numpy
over the probe's sent rows and their first deliveries) and judged by the reports' own rule
(analysis.verdicts.judge), plus the user's objective. The run's final analysis recomputes every
step with Spark, as for any run; the two agree on the verdict unless a figure sits on a
threshold (the digests are approximate there, these figures exact).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from analysis.verdicts import StepFigures, Thresholds, Verdict, judge, slope_rise_ms
from contract.formulas import achieved_rate_per_s

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class Objective:
    """What the user asks of a holding rate beyond the breaking-point rule (`--slo`)."""

    e2e_p99_ms: float | None = None
    lost_ratio: float | None = None


_TERM = re.compile(r"^(e2e-p99)<=([0-9.]+)ms$|^(lost)<=([0-9.]+)%$")


def parse_objective(text: str) -> Objective:
    """`e2e-p99<=200ms,lost<=0.1%` (either or both); anything else names the bad term."""
    e2e = lost = None
    for term in (t.strip() for t in text.split(",") if t.strip()):
        found = _TERM.match(term.replace(" ", ""))
        if not found:
            raise ValueError(f"--slo term '{term}': use e2e-p99<=200ms or lost<=0.1%")
        if found.group(1):
            e2e = float(found.group(2))
        else:
            lost = float(found.group(4)) / 100
    return Objective(e2e, lost)


@dataclass(frozen=True)
class ProbeRecords:
    """One probe's sent rows (as arrays) with each event's first delivery (-1: none)."""

    intended_ns: np.ndarray
    sent_ns: np.ndarray  # -1: never sent (in-flight cap)
    status: np.ndarray
    decoy: np.ndarray
    received_ns: np.ndarray  # -1: never delivered


def probe_figures(
    records: ProbeRecords,
    step: int,
    rate_per_s: int,
    duration_s: int,
    baseline_e2e_p99_ms: float | None,
) -> StepFigures:
    """The figures the breaking-point rule reads, exact. Pure."""
    r = records
    ok = (r.status >= 200) & (r.status < 300)
    delivered = r.received_ns >= 0
    sent = r.sent_ns >= 0
    start_ns = int(r.intended_ns.min()) if len(r.intended_ns) else 0
    # As the analysis: every slot was sent or refused by the in-flight cap at its own time.
    handled = len(r.intended_ns)
    last_ns = max(int(r.sent_ns.max()), int(r.intended_ns.max())) if handled else None
    decoy_share = float(r.decoy.mean()) if handled else 0.0
    lag_ms = (r.sent_ns[sent] - r.intended_ns[sent]) / NS_PER_MS
    e2e_ms = (r.received_ns[delivered] - r.intended_ns[delivered]) / NS_PER_MS
    seconds = ((r.intended_ns[delivered] - start_ns) // NS_PER_S).astype(np.int64)
    per_second = [(float(s), float(np.median(e2e_ms[seconds == s]))) for s in np.unique(seconds)]
    return StepFigures(
        step=step,
        target_rate_per_s=rate_per_s,
        scheduled=len(r.intended_ns),
        acked=int(ok.sum()),
        send_failures=int((~ok).sum()),
        lost=int((ok & ~delivered & ~r.decoy).sum()),
        sender_ratio=achieved_rate_per_s(handled, start_ns, last_ns, rate_per_s) / rate_per_s,
        sender_lag_p99_ms=float(np.percentile(lag_ms, 99)) if len(lag_ms) else None,
        delivered_rate_per_s=int((delivered & ~r.decoy).sum()) / duration_s,
        e2e_median_ms=float(np.median(e2e_ms)) if len(e2e_ms) else None,
        e2e_rise_ms=slope_rise_ms([s for s, _ in per_second], [m for _, m in per_second]),
        expected_delivery_rate_per_s=rate_per_s * (1 - decoy_share),
        e2e_p99_ms=float(np.percentile(e2e_ms, 99)) if len(e2e_ms) else None,
        baseline_e2e_p99_ms=baseline_e2e_p99_ms,
    )


def verdict_of(fig: StepFigures, thresholds: Thresholds, objective: Objective) -> Verdict:
    """The reports' rule, then the objective: a probe that holds by the rule but misses the
    objective breaks, with the objective's reason."""
    found = judge(fig, thresholds)
    if found.verdict != "holds":
        return found
    missed = []
    if objective.e2e_p99_ms is not None and (fig.e2e_p99_ms or 0) > objective.e2e_p99_ms:
        missed.append(
            f"e2e P99 {fig.e2e_p99_ms:.1f} ms over the objective's {objective.e2e_p99_ms:g} ms"
        )
    if objective.lost_ratio is not None and fig.lost > objective.lost_ratio * max(fig.acked, 1):
        missed.append(
            f"{fig.lost} lost of {fig.acked}, over the objective's {objective.lost_ratio:.2%}"
        )
    if missed:
        return Verdict(fig.step, fig.target_rate_per_s, "breaks", tuple(missed))
    return found
