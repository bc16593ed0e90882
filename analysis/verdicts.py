"""The breaking-point rule (docs/design.md §4), in one place, pure and table-tested.

A step is judged so:
1. *breaks* when the system failed what it was offered, beyond anything the sender's own
   shortfall explains (see 3), with at least `min_events` events; a step whose sender was also
   short says so (and by how much) among its reasons.
2. *sender-limited*: the sender did not keep the pace (achieved rate of handled slots below
   `min_sender_ratio` of the target, or lag p99 above `max_sender_lag_p99_ms`) and that could
   explain whatever else went wrong. Inconclusive: never a break of the system under test.
   *insufficient-data*: fewer than `min_events` events. Inconclusive.
3. The system's failures are any of: send failures above `max_send_failure_ratio` of
   scheduled events; lost above `max_lost_ratio` of acked events; delivered rate below
   `min_delivered_ratio` of the target; end-to-end latency rising through the step by more than
   max(`latency_rise_min_ms`, `latency_rise_ratio` x the step's median) (a positive slope that
   does not flatten: a queue growing without bound); or end-to-end P99 above
   max(`latency_inflation_min_ms`, `latency_inflation_ratio` x the baseline P99), the baseline
   being the P99 of the pace's first step with enough deliveries and no fault (a standing
   queue: the system delivers the rate, but seconds late). When the sender missed the pace,
   what its shortfall explains is forgiven: `sender_excuse_ratio` x its lag p99 of latency
   (end-to-end latency counts from the intended time, so a late sender shows there by about
   its lateness), and the rate it did not offer; failures and losses are the system's answers
   whatever the pace.
4. otherwise *holds*.
5. A long step whose latency drifts over its hours (analysis.drift) keeps its verdict and says
   so in its reasons and in the run's verdict (`with_drift` says why).

An *instrument failure* (the sender or receiver died or ended badly, records are missing, nothing
arrived although events were acked) is a verdict of its own: the losses it causes are the
instrument's, so a run with one names no breaking point, and its breaking steps are judged
*instrument-failed* rather than *breaks*.

Breaking point = the lowest-rate step that breaks on its own. A breaking step that follows a
breaking step of equal or higher rate, with no holding step between, inherits that overload (a
cool-down step draining a backlog) and is not a candidate. Max sustainable rate = the highest
rate of a holding step below the breaking point (or of all holding steps if nothing broke).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from contract.documents import DriftDoc
from contract.errors import EvbenchError
from contract.searchdocs import SearchResultDoc

HOLDS = "holds"
BREAKS = "breaks"
SENDER_LIMITED = "sender-limited"
INSUFFICIENT = "insufficient-data"
INSTRUMENT_FAILED = "instrument-failed"
NOT_JUDGED = "not-judged"


@dataclass(frozen=True)
class Thresholds:
    max_send_failure_ratio: float = 0.001
    max_lost_ratio: float = 0.001
    min_delivered_ratio: float = 0.98
    latency_rise_min_ms: float = 20.0
    latency_rise_ratio: float = 0.5
    latency_inflation_ratio: float = 5.0
    latency_inflation_min_ms: float = 100.0
    min_sender_ratio: float = 0.99
    max_sender_lag_p99_ms: float = 10.0
    # A late sender excuses this many times its lag p99 of end-to-end latency (rise or P99):
    # latency counts from the intended time, so its lateness shows there, and no more.
    sender_excuse_ratio: float = 3.0
    min_events: int = 100
    # The drift rule (analysis.drift), for steps whose deliveries span drift_min_step_s or
    # more: ten minutes makes 60 windows of 10 s, the least a median and a slope stand on.
    # A long step drifts when its fitted e2e P50 or P99 rose over the step by more than
    # max(drift_min_ms, drift_ratio x its level). A quarter of the level is a change a reader
    # sees at once on the windows figure and far beyond the noise of a median of window
    # medians (a flat, spiky hour fits well under 1 % of it); 1 ms is the floor for hours, not
    # the rise rule's 20 ms for seconds: under it, a sub-millisecond system's timer and
    # scheduling noise would read as drift, and over it, a 2 -> 12 ms creep is no longer hidden.
    drift_min_step_s: int = 600
    drift_ratio: float = 0.25
    drift_min_ms: float = 1.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, text: str, source: str = "thresholds") -> Thresholds:
        """Defaults overridden by a JSON object; an unknown key or a non-number is an error."""
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise EvbenchError(f"{source}: not JSON ({exc})") from exc
        if not isinstance(doc, dict):
            raise EvbenchError(f"{source}: expected a JSON object of threshold: value")
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(doc) - set(known))
        if unknown:
            raise EvbenchError(
                f"{source}: unknown thresholds {', '.join(unknown)} (known: {', '.join(known)})"
            )
        for key, value in doc.items():
            # json.loads takes NaN and Infinity; a NaN threshold makes every comparison false,
            # so 500 of 500 lost would "hold".
            number = not isinstance(value, bool) and isinstance(value, int | float)
            infinite = isinstance(value, float) and not math.isfinite(value)  # an int is finite
            if not number or infinite or value < 0:
                raise EvbenchError(
                    f"{source}: {key} must be a finite non-negative number, got {value!r}"
                )
        return replace(cls(), **doc)


@dataclass(frozen=True)
class StepFigures:
    step: int
    target_rate_per_s: int
    scheduled: int
    acked: int
    send_failures: int
    lost: int
    sender_ratio: float  # handled slots per second / target
    sender_lag_p99_ms: float | None
    delivered_rate_per_s: float
    e2e_median_ms: float | None
    e2e_rise_ms: float | None  # fitted slope x step duration
    # What should arrive per second when decoys (filtered on purpose) are part of the pace;
    # None means the target rate.
    expected_delivery_rate_per_s: float | None = None
    e2e_p99_ms: float | None = None
    baseline_e2e_p99_ms: float | None = None  # the first judged step's, unloaded
    inflight_cap_refused: int = 0  # of send_failures: slots the sender's in-flight cap refused


@dataclass(frozen=True)
class Verdict:
    step: int
    target_rate_per_s: int
    verdict: str
    reasons: tuple[str, ...] = field(default_factory=tuple)


def judge(fig: StepFigures, t: Thresholds) -> Verdict:
    """The rule: a step breaks when the system failed what it was offered beyond anything the
    sender's own shortfall explains; it is sender-limited (inconclusive) only when that
    shortfall could explain what went wrong, or nothing did."""

    def verdict(kind: str, *reasons: str) -> Verdict:
        return Verdict(fig.step, fig.target_rate_per_s, kind, reasons)

    shortfall = sender_shortfall(fig, t)
    if fig.scheduled < t.min_events:
        if shortfall:
            return verdict(SENDER_LIMITED, *shortfall)
        return verdict(INSUFFICIENT, f"{fig.scheduled} events < {t.min_events}")
    if broken := system_breaks(fig, t, excused=bool(shortfall)):
        if shortfall:  # late too, but that cannot explain these
            broken.append(f"the sender was also short: {'; '.join(shortfall)}")
        return verdict(BREAKS, *broken)
    return verdict(SENDER_LIMITED, *shortfall) if shortfall else verdict(HOLDS)


def sender_shortfall(fig: StepFigures, t: Thresholds) -> list[str]:
    """How the sender missed the pace: short of its rate, or late to its slots (empty: it
    kept the pace)."""
    short = []
    if fig.sender_ratio < t.min_sender_ratio:
        short.append(f"sender achieved {fig.sender_ratio:.1%} of the pace")
    if fig.sender_lag_p99_ms is not None and fig.sender_lag_p99_ms > t.max_sender_lag_p99_ms:
        short.append(f"sender lag p99 {fig.sender_lag_p99_ms:.1f} ms")
    return short


def system_breaks(fig: StepFigures, t: Thresholds, excused: bool) -> list[str]:
    """What the system failed of what it was offered. With `excused` (the sender missed the
    pace), only what the sender's shortfall cannot explain: end-to-end latency counts from the
    intended time, so a sender late by L adds about L to it (`sender_excuse_ratio` x its lag
    p99 is forgiven); a sender short of the rate offered less, so the system owes only that;
    failures and losses are the system's answers to what it was sent, whatever the pace, except
    the slots the sender's own in-flight cap refused: a sender too busy to keep the pace is too
    busy to read its answers, and its cap fills."""
    lag_ms = (fig.sender_lag_p99_ms or 0.0) if excused else 0.0
    forgiven_ms = t.sender_excuse_ratio * lag_ms
    offered = min(1.0, fig.sender_ratio) if excused else 1.0
    broken = []
    failures = fig.send_failures - (fig.inflight_cap_refused if excused else 0)
    if failures > t.max_send_failure_ratio * fig.scheduled:
        broken.append(f"{failures} send failures of {fig.scheduled}")
    if fig.lost > t.max_lost_ratio * max(fig.acked, 1):
        broken.append(f"{fig.lost} lost of {fig.acked} acked")
    # None: no decoys said; 0: every event one the system should drop (a trigger that takes
    # none), so nothing is owed.
    owed = fig.expected_delivery_rate_per_s
    expected = (fig.target_rate_per_s if owed is None else owed) * offered
    if expected > 0 and fig.delivered_rate_per_s < t.min_delivered_ratio * expected:
        broken.append(f"delivered {fig.delivered_rate_per_s:.0f}/s of {expected:.0f}/s")
    if fig.e2e_rise_ms is not None and fig.e2e_median_ms is not None:
        allowed = max(t.latency_rise_min_ms, t.latency_rise_ratio * fig.e2e_median_ms)
        if fig.e2e_rise_ms > allowed + forgiven_ms:
            broken.append(f"e2e latency rose {fig.e2e_rise_ms:.0f} ms through the step")
    if fig.e2e_p99_ms is not None and fig.baseline_e2e_p99_ms is not None:
        allowed = max(
            t.latency_inflation_min_ms, t.latency_inflation_ratio * fig.baseline_e2e_p99_ms
        )
        if fig.e2e_p99_ms > allowed + forgiven_ms:
            broken.append(
                f"e2e P99 {fig.e2e_p99_ms:.0f} ms, over {allowed:.0f} ms "
                f"({t.latency_inflation_ratio:g}x the baseline {fig.baseline_e2e_p99_ms:.0f})"
            )
    return broken


def with_drift(v: Verdict, drift: DriftDoc | None) -> Verdict:
    """A step whose latency drifts over its hours (analysis.drift) says so first among its
    reasons, whatever its verdict; the verdict itself stands. Drift is not a capacity finding:
    the rise rule above already breaks a step whose queue grows without bound, while a creep
    of milliseconds an hour has causes a rate does not explain (a leak, a growing index, a
    compaction, a clock drifting between hosts), and a soak at one rate has no staircase whose
    breaking point it could name. So the step holds (or breaks) for what it delivered, and no
    drifting step reads "holds" without saying it drifts; the run's verdict says it too
    (`drift_verdict_text`)."""
    if drift is None or drift["verdict"] != "drifting":
        return v
    return replace(v, reasons=(f"drifting: {drift['text']}", *v.reasons))


def drift_verdict_text(steps: Sequence[tuple[int, int, DriftDoc | None]]) -> str:
    """What the run's verdict adds for its drifting steps ((step, rate, drift) in run order):
    "e2e latency drifting in step 1 (1000/s): P50 +10 ms/h, P99 +17.1 ms/h"; empty if none."""
    found = [
        f"step {step} ({rate}/s): P50 {d['ms_per_h']['p50']:+.3g} ms/h, "
        f"P99 {d['ms_per_h']['p99']:+.3g} ms/h"
        for step, rate, d in steps
        if d is not None and d["verdict"] == "drifting"
    ]
    return f"e2e latency drifting in {'; '.join(found)}" if found else ""


def breaking_point(verdicts: Sequence[Verdict]) -> tuple[int | None, int | None]:
    """(breaking point, max sustainable rate) from step verdicts in run order."""
    candidates = []
    overload_rate: int | None = None  # rate of the breaking step whose backlog may linger
    for v in verdicts:
        if v.verdict == BREAKS:
            inherited = overload_rate is not None and v.target_rate_per_s <= overload_rate
            if not inherited:
                candidates.append(v.target_rate_per_s)
            overload_rate = max(overload_rate or 0, v.target_rate_per_s)
        elif v.verdict == HOLDS:
            overload_rate = None
    point = min(candidates) if candidates else None
    holding = [
        v.target_rate_per_s
        for v in verdicts
        if v.verdict == HOLDS and (point is None or v.target_rate_per_s < point)
    ]
    return point, (max(holding) if holding else None)


def slope_rise_ms(seconds: Sequence[float], values_ms: Sequence[float]) -> float | None:
    """Least-squares slope of values over time, times the time covered: the fitted rise."""
    n = len(seconds)
    if n < 3:
        return None
    mean_t = sum(seconds) / n
    mean_v = sum(values_ms) / n
    var_t = sum((t - mean_t) ** 2 for t in seconds)
    if var_t == 0:
        return None
    slope = (
        sum((t - mean_t) * (v - mean_v) for t, v in zip(seconds, values_ms, strict=True)) / var_t
    )
    return slope * (max(seconds) - min(seconds))


@dataclass(frozen=True)
class InstrumentEvidence:
    """What says whether the instruments worked: run.json's account and what is on disk."""

    run_status: str | None  # completed | interrupted | failed | running (never finished)
    recorded_failures: tuple[str, ...]  # the runner's own findings (run.json)
    sent_files: int
    received_files: int
    sender_reported_sent: int | None  # the sender's final summary, when it wrote one
    receiver_reported_received: int | None  # the receiver's final stats, when it wrote them
    acked: int  # from the records
    acked_decoys: int  # acked events a trigger was meant to drop
    deliveries: int  # received rows, foreign ones too
    direct: bool = False  # the sender sent to the receiver itself: its acks are the receiver's
    sut_processes_died: bool = False  # a process of the system under test exited during the run
    # Requests that tried to deliver (recorded, refused, malformed, stalled), if the receiver
    # said: its control plane (stats, clock, health) does not count.
    receiver_delivery_attempts: int | None = None
    receiver_url: str | None = None  # where the system was to deliver, if run.json says
    # A fan-out's deliveries to a path no subscriber has, and its subscribers that take the
    # run's events yet got none (analysis.fanout): together, a subscription wired wrong.
    stray_deliveries: int = 0
    silent_subscribers: tuple[str, ...] = ()


def instrument_failures(e: InstrumentEvidence) -> tuple[str, ...]:
    """Why the instruments cannot be trusted for this run; empty when they can."""
    found = list(e.recorded_failures)
    if e.stray_deliveries and e.silent_subscribers:
        found.append(
            f"nothing came to {', '.join(e.silent_subscribers)} although {e.stray_deliveries} "
            "deliveries came to paths no subscriber has: a subscription wired to the wrong "
            "URL, not the system's collapse; point each at its own (run.json's "
            "sut_settings.subscribers)"
        )
    if e.run_status == "running":
        found.append(
            "the run never finished: evbench run stopped before writing its final run.json"
        )
    elif e.run_status == "failed" and not found:
        found.append("run.json says the run failed (see its logs/)")
    if e.sent_files == 0:
        found.append(
            "records missing: no sent records in sent/"
            + (f" although the sender reported {n} sent" if (n := e.sender_reported_sent) else "")
        )
    if e.received_files == 0 and e.receiver_reported_received:
        found.append(
            f"records missing: no received records in received/ although the receiver "
            f"counted {e.receiver_reported_received}"
        )
    elif (
        e.deliveries == 0
        and e.acked > e.acked_decoys
        and _delivery_path_untried(e)
        # the run said it already (evbench run diagnoses it as it ends)
        and not any(f.startswith("nothing received although") for f in found)
    ):
        found.append(
            wiring_diagnosis(e.acked - e.acked_decoys, e.receiver_url, e.receiver_delivery_attempts)
        )
    return tuple(found)


def delivery_attempts(stats: Mapping[str, Any]) -> int:
    """Requests that came to the receiver to deliver something, whatever became of them
    (recorded, refused by its limits, malformed, stalled, failed inside it): its control
    plane (stats, clock, health checks) is not among them."""
    counts = (
        "received",
        "malformed",
        "not_found",
        "timed_out",
        "internal_errors",
        "refused_connections",
    )
    refused = stats.get("refused") or {}
    return sum(int(stats.get(key) or 0) for key in counts) + sum(refused.values())


def wiring_diagnosis(acked: int, receiver_url: str | None, attempts: int | None) -> str:
    """Acks and no delivery at all: nearly always a wiring mistake (the system delivers
    elsewhere), said as one with what to check, never read as the system's collapse."""
    where = receiver_url or "the receiver's URL"
    if attempts:
        return (
            f"nothing received although {acked} events were acked: {attempts} requests "
            f"reached the receiver at {where} but delivered nothing it could record (see its "
            "malformed and refused counts in run.json)"
        )
    return (
        f"nothing received although {acked} events were acked, and nothing connected to the "
        f"receiver: a wiring mistake, not the system's collapse. Check that the system delivers "
        f"to {where} (its subscriber or sink URL; --receiver-host and --receiver-port; a "
        "trigger filter that matches nothing)"
    )


def _delivery_path_untried(e: InstrumentEvidence) -> bool:
    """Nothing arrived, and the instruments are to blame rather than the system: the receiver
    acked the events itself (direct), or no system process died and nothing ever connected to
    the receiver (a subscription that points elsewhere). A system whose dispatcher died, or
    that connected and delivered nothing usable, has broken, and its steps say so."""
    if e.direct:
        return True
    return not e.sut_processes_died and not e.receiver_delivery_attempts


def under_instrument_failure(verdicts: Sequence[Verdict], failures: Sequence[str]) -> list[Verdict]:
    """A breaking step of a run whose instrument failed may show the instrument's losses, not
    the system's: it is judged instrument-failed. Holding steps held whatever the instruments
    did later."""
    if not failures:
        return list(verdicts)
    return [
        replace(
            v,
            verdict=INSTRUMENT_FAILED,
            reasons=(*v.reasons, "an instrument failed, so these may be the instrument's"),
        )
        if v.verdict == BREAKS
        else v
        for v in verdicts
    ]


def not_judged_probe(v: Verdict) -> Verdict:
    """A search's probe cut short (the search interrupted) is never a break, nor a hold: the
    search decides on whole probes, so what a part of one showed decides nothing."""
    if v.verdict not in (BREAKS, HOLDS):
        return v
    return replace(v, verdict=NOT_JUDGED, reasons=(*v.reasons, "a probe cut short is not judged"))


def verdict_text(
    breaking_point_per_s: int | None,
    max_sustainable_rate_per_s: int | None,
    failures: Sequence[str] = (),
) -> str:
    """The one-line verdict every report and summary line uses; an instrument failure (see
    `instrument_failures`) outranks every figure."""
    if failures:
        return "instrument failed: " + "; ".join(failures)
    sustainable = (
        f"max sustainable {max_sustainable_rate_per_s}/s"
        if max_sustainable_rate_per_s
        else "no lower step held"
    )
    if breaking_point_per_s:
        return f"breaks at {breaking_point_per_s}/s; {sustainable}"
    if max_sustainable_rate_per_s:
        return f"held every judged step; {sustainable}"
    return "no step could be judged (sender-limited or too few events)"


def search_verdict_text(result: SearchResultDoc | None, status: str | None = "completed") -> str:
    """The one-line verdict of a capacity search (`evbench search`), from its result
    (run.json's search.result, empty when it did not finish): the bracket it found, or why it
    found none."""
    if not result:
        return f"searched: the search did not finish ({status}), no rate confirmed"
    found, broke = result.get("max_sustainable_per_s"), result.get("lowest_break_per_s")
    held = result.get("highest_hold_per_s")
    if found and broke:
        return f"searched: max sustainable {found}/s (held {found}/s, broke {broke}/s)"
    if found:
        return f"searched: max sustainable {found}/s (the highest rate probed; nothing broke)"
    if result.get("workers_needed"):
        return (
            f"searched: the sender was the limit, not the system (held {held or '-'}/s; "
            f"about {result['workers_needed']} sender workers needed)"
        )
    return f"searched: no rate confirmed ({result.get('why', '')})"
