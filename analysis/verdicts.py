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
   max(`latency_inflation_min_ms`, `latency_inflation_ratio` x the baseline P99) (a standing
   queue: the system delivers the rate, but seconds late). The baseline is the P99 of the first
   *clean* step before it (one that held by every test, on a host nobody else saturated); a
   step with none before it is its own baseline if it is clean, else held to the absolute
   `latency_inflation_min_ms` (`judge_against`). When the sender missed the pace,
   what its shortfall explains is forgiven: `sender_excuse_ratio` x its lag p99 of latency
   (end-to-end latency counts from the intended time, so a late sender shows there by about
   its lateness), and the rate it did not offer; failures and losses are the system's answers
   whatever the pace.
4. otherwise *holds*.
5. *host-saturated*: a step that broke or whose sender fell short while the host was saturated
   by processes outside the run (analysis.hostload, `saturation`) is inconclusive; one that held
   there stands as a lower bound and says so (`on_host`).
6. A long step whose latency drifts over its hours (analysis.drift) keeps its verdict and says
   so in its reasons and in the run's verdict (`with_drift` says why).

The run's figures from its steps' verdicts (breaking point, max sustainable rate, recovery)
are analysis.capacity's; an instrument failure, which outranks them, is
analysis.instrumentfail's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from analysis.hostload import HostLoad
from contract.errors import EvbenchError
from contract.summarydocs import DriftDoc
from runtime.failcause import causes_text

HOLDS = "holds"
BREAKS = "breaks"
SENDER_LIMITED = "sender-limited"
INSUFFICIENT = "insufficient-data"
INSTRUMENT_FAILED = "instrument-failed"
NOT_JUDGED = "not-judged"
# Fell short while the host was saturated by others: inconclusive, never a capacity.
HOST_SATURATED = "host-saturated"


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
    # The host rule (analysis.hostload): a step's host is saturated when, in the mean over the
    # step, its CPUs were at least `host_busy_ratio` busy and processes outside the run took at
    # least `host_others_ratio` of them, or a hypervisor stole `host_steal_ratio` of them. 90 %
    # busy leaves a scheduler no room for the instruments' next slot. A tenth of the host is ten
    # times what a quiet host's others come to (0.4-1.2 % in each step of a broker-imc 1k-2k on
    # the 2-core machine, its daemons and the sampling's own misalignment), and well under what
    # one busy process takes while it competes with the run for the cores: a one-core CPU hog
    # beside the same run read 24-44 % (a quarter missed its step 8, at 23.9 %). The run's own
    # processes saturating the host are not others: in the lab the system shares the host by
    # design, and that is its capacity on this host.
    host_busy_ratio: float = 0.9
    host_others_ratio: float = 0.1
    host_steal_ratio: float = 0.1

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
    host: HostLoad | None = None  # the host's load over the step, when it was sampled
    # send_failures by cause (runtime.failcause), said in the reason when they break the step
    failures_by_cause: Mapping[str, int] | None = None


@dataclass(frozen=True)
class Verdict:
    step: int
    target_rate_per_s: int
    verdict: str
    reasons: tuple[str, ...] = field(default_factory=tuple)


def judge(fig: StepFigures, t: Thresholds) -> Verdict:
    """The rule: a step breaks when the system failed what it was offered beyond anything the
    sender's own shortfall explains; it is sender-limited (inconclusive) only when that
    shortfall could explain what went wrong, or nothing did; and a step that fell short on a
    host others saturated is inconclusive whatever it showed (`on_host`). The e2e P99 bar is
    `fig.baseline_e2e_p99_ms`'s, or with none (no clean step before it) the absolute
    `latency_inflation_min_ms`: see `judge_against` for how a step finds its baseline."""
    return on_host(_by_the_rule(fig, t), fig.host, t)


def _by_the_rule(fig: StepFigures, t: Thresholds) -> Verdict:
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


def saturation(host: HostLoad | None, t: Thresholds) -> str | None:
    """How the host was saturated by others over a step (its figures), or None: its CPUs at
    least `host_busy_ratio` busy with `host_others_ratio` of them outside the run, or
    `host_steal_ratio` of them stolen."""
    if host is None:
        return None
    busy, others = host.peak  # its busiest seconds (analysis.hostload.WINDOW_SAMPLES)
    crowded = busy >= t.host_busy_ratio and others >= t.host_others_ratio
    if crowded or host.steal_ratio >= t.host_steal_ratio:
        return host.text()
    return None


def on_host(v: Verdict, host: HostLoad | None, t: Thresholds) -> Verdict:
    """A step that fell short (broke, or its sender did) on a saturated host is
    *host-saturated*: the instruments and the system were starved alike, so it names no
    capacity; what the rule alone made of it stays among its reasons. A step that held there
    stands, as a lower bound, and says so."""
    why = saturation(host, t)
    if why is None or v.verdict not in (HOLDS, BREAKS, SENDER_LIMITED):
        return v
    if v.verdict == HOLDS:
        lower = f"held on a saturated host ({why}): a lower bound"
        return v if lower in v.reasons else replace(v, reasons=(*v.reasons, lower))
    alone = f"by the step rule alone: {v.verdict}" + (
        f": {'; '.join(v.reasons)}" if v.reasons else ""
    )
    return replace(v, verdict=HOST_SATURATED, reasons=(f"host saturated: {why}", alone))


def judge_against(fig: StepFigures, t: Thresholds, baseline_e2e_p99_ms: float | None) -> Verdict:
    """`judge` with the run's latency baseline so far (the e2e P99 of the first clean step
    before this one, `clean_baseline`). With none, a step that is itself clean (holds by every
    other test) is its own baseline; one that is not (sender-limited, broken, saturated) is held
    to the absolute bar, so a first step already in trouble is never the measure of the rest."""
    fig = replace(fig, baseline_e2e_p99_ms=baseline_e2e_p99_ms)
    if baseline_e2e_p99_ms is None:
        alone = judge(replace(fig, e2e_p99_ms=None), t)
        if alone.verdict == HOLDS and saturation(fig.host, t) is None:
            return alone
    return judge(fig, t)


def clean_baseline(fig: StepFigures, verdict: Verdict, t: Thresholds) -> float | None:
    """The step's e2e P99 when it can be the run's latency baseline: it held (by every test),
    on a host nobody else saturated, with enough deliveries to have a P99."""
    if verdict.verdict != HOLDS or saturation(fig.host, t) is not None:
        return None
    return fig.e2e_p99_ms


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
        broken.append(_failures_text(fig, failures))
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
    if fig.e2e_p99_ms is not None and (over := _over_the_bar(fig, t, forgiven_ms)):
        broken.append(over)
    return broken


def _failures_text(fig: StepFigures, counted: int) -> str:
    """`8339 send failures of 30000 (in-flight cap 5790, timeout 2549)`: the step's own count,
    as its row gives it, by cause; and, where the sender's cap refusals were forgiven, how many
    of them are the system's."""
    causes = causes_text(fig.failures_by_cause or {})
    text = f"{fig.send_failures} send failures of {fig.scheduled}"
    text += f" ({causes})" if causes else ""
    if counted != fig.send_failures:
        text += f": {counted} of them the system's (the sender's own cap refused the rest)"
    return text


def _over_the_bar(fig: StepFigures, t: Thresholds, forgiven_ms: float) -> str | None:
    """A standing queue: e2e P99 over max(`latency_inflation_min_ms`, `latency_inflation_ratio`
    x the baseline), or with no baseline over the absolute `latency_inflation_min_ms`."""
    assert fig.e2e_p99_ms is not None
    base = fig.baseline_e2e_p99_ms
    allowed = t.latency_inflation_min_ms
    if base is not None:
        allowed = max(allowed, t.latency_inflation_ratio * base)
    if fig.e2e_p99_ms <= allowed + forgiven_ms:
        return None
    why = (
        f"{t.latency_inflation_ratio:g}x the baseline {base:.0f}"
        if base is not None
        else "the absolute bar: no clean step before it to take a baseline from"
    )
    return f"e2e P99 {fig.e2e_p99_ms:.0f} ms, over {allowed:.0f} ms ({why})"


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


def not_judged_probe(v: Verdict) -> Verdict:
    """A search's probe cut short (the search interrupted) is never a break, nor a hold: the
    search decides on whole probes, so what a part of one showed decides nothing."""
    if v.verdict not in (BREAKS, HOLDS):
        return v
    return replace(v, verdict=NOT_JUDGED, reasons=(*v.reasons, "a probe cut short is not judged"))
