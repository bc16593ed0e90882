"""What an adaptive capacity search probes next, from what its probes found so far. Pure.

The search finds the highest rate a system sustains: it grows the rate geometrically from
`from_per_s` until a probe breaks, bisects between the highest holding and the lowest breaking
rate until the gap is within the resolution, then confirms the highest holding rate with a
longer hold; if the confirmation breaks, that rate is a break too and the next lower rate is
confirmed instead. A probe the sender could not hold (`sender-limited`) is never a break: the
search goes on below it only (a break may lie there: an overloaded system sharing the sender's
host starves the sender too) and, once the gap to it is within the resolution, stops saying the
instrument is the limit. Every decision is a function of the probes so far, so the same history
gives the same next probe, and a search can be replayed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from analysis.verdicts import BREAKS, HOLDS, HOST_SATURATED, SENDER_LIMITED, Thresholds

__all__ = [
    "BREAKS",
    "HOLDS",
    "HOST_SATURATED",
    "SENDER_LIMITED",
]  # the rule's verdicts, as the plan reads them


@dataclass(frozen=True)
class Resolution:
    """How close the bracket must close: a fraction of the rate (`2%`) or a rate (`50/s`)."""

    fraction: float | None = None
    per_s: int | None = None

    def __post_init__(self) -> None:
        if (self.fraction is None) == (self.per_s is None):
            raise ValueError("a resolution is a fraction or a rate, one of the two")

    def step(self, rate: int) -> int:
        if self.per_s is not None:
            return self.per_s
        assert self.fraction is not None  # __post_init__: one of the two is set
        return max(1, math.ceil(rate * self.fraction))

    def gap_ok(self, hold: int, broke: int) -> bool:
        return broke - hold <= self.step(hold)


def parse_resolution(text: str) -> Resolution:
    """`2%` or `50/s`; anything else is refused naming the text."""
    value = text.strip()
    try:
        if value.endswith("%"):
            fraction = float(value[:-1]) / 100
            if not 0 < fraction < 1:
                raise ValueError
            return Resolution(fraction=fraction)
        if value.endswith("/s"):
            per_s = int(value[:-2])
            if per_s < 1:
                raise ValueError
            return Resolution(per_s=per_s)
    except ValueError:
        pass
    raise ValueError(f"resolution '{text}': use a percentage like 2% or a rate like 50/s")


@dataclass(frozen=True)
class Probe:
    rate_per_s: int
    hold_s: int
    confirm: bool = False


@dataclass(frozen=True)
class SearchPlan:
    from_per_s: int
    max_per_s: int
    resolution: Resolution
    growth: float = 2.0
    probe_s: int = 30  # each probe's hold
    confirm_s: int = 120  # the final confirmation's hold (like 1k-long)
    max_probes: int = 30
    # The breaking-point rule judges no step of fewer events (insufficient data): a probe at a
    # low rate holds longer, so that every probe is judged.
    min_events: int = Thresholds.min_events

    def __post_init__(self) -> None:
        """Option pairs that contradict each other are refused, both named."""
        if self.max_per_s < self.from_per_s:
            raise ValueError(
                f"--max {self.max_per_s} is below --from {self.from_per_s}: no rate is left to "
                "probe (raise --max, or lower --from)"
            )
        if self.confirm_s < self.probe_s:
            raise ValueError(
                f"--confirm {self.confirm_s} is shorter than --hold {self.probe_s}: the "
                "confirming hold is to hold the answer longer than any probe did"
            )

    def probe(self, rate_per_s: int, confirm: bool = False) -> Probe:
        hold_s = self.confirm_s if confirm else self.probe_s
        return Probe(rate_per_s, max(hold_s, math.ceil(self.min_events / rate_per_s)), confirm)


@dataclass(frozen=True)
class Outcome:
    probe: Probe
    verdict: str  # HOLDS, BREAKS or SENDER_LIMITED
    reasons: tuple[str, ...] = ()
    achieved_per_s: float | None = None  # what the sender managed (for SENDER_LIMITED)
    workers: int = 1


@dataclass(frozen=True)
class Result:
    max_sustainable_per_s: int | None  # None: nothing held (or the instrument was the limit)
    highest_hold_per_s: int | None
    lowest_break_per_s: int | None
    why: str  # in words: what ended the search
    symptom: tuple[str, ...] = ()  # the lowest break's reasons
    workers_needed: int | None = None  # when the sender was the limit
    probes: int = 0


def bracket(outcomes: list[Outcome]) -> tuple[int | None, int | None]:
    """(highest hold, lowest break). A confirmation that broke is a break; a hold at or above
    the lowest break (a lucky short probe) does not count: the bracket stays conservative."""
    breaks = [o.probe.rate_per_s for o in outcomes if o.verdict == BREAKS]
    broke = min(breaks, default=None)
    holds = [
        o.probe.rate_per_s
        for o in outcomes
        if o.verdict == HOLDS and (broke is None or o.probe.rate_per_s < broke)
    ]
    return max(holds, default=None), broke


def workers_needed(target_per_s: int, achieved_per_s: float, workers: int) -> int:
    """Sender processes to hold `target_per_s` if each holds its share of what `workers` did."""
    per_worker = max(achieved_per_s, 1.0) / workers
    return math.ceil(target_per_s / per_worker)


def instrument_limit(
    outcome: Outcome, held: int | None, min_sender_ratio: float = Thresholds.min_sender_ratio
) -> tuple[str, int | None]:
    """Why a sender-limited probe ends the search, in words, and the sender workers that would
    hold its rate: None when the sender kept the rate (`min_sender_ratio`, the rule's) but not
    its slots' times, which more workers on the same host would not mend."""
    rate, achieved = outcome.probe.rate_per_s, outcome.achieved_per_s or 0.0
    floor = f", which held {held}/s" if held is not None else " (or search from a lower --from)"
    if achieved < min_sender_ratio * rate:
        needed = workers_needed(rate, achieved, outcome.workers)
        return (
            f"the sender could not hold {rate}/s (it sent {achieved:.0f}/s): the instrument is "
            f"the limit, not the system{floor}; about {needed} sender workers would hold it "
            f"(--workers {needed})",
            needed,
        )
    # It sent the rate but late: its host is short of CPU, most likely because the system under
    # test shares it, and more sender processes there would only share it further.
    return (
        f"the sender sent {rate}/s but fell behind its slots ({'; '.join(outcome.reasons)}): the "
        f"instrument is the limit, not the system{floor}; its host is short of CPU (the system "
        "under test competes for it): run the sender on cores or a host of its own",
        None,
    )


def next_step(plan: SearchPlan, outcomes: list[Outcome]) -> Probe | Result:
    """The next probe, or the result when the search is over."""
    n = len(outcomes)
    hold, broke = bracket(outcomes)
    symptom = next(
        (o.reasons for o in outcomes if o.verdict == BREAKS and o.probe.rate_per_s == broke), ()
    )
    # The lowest rate the sender could not hold: nothing is learnt at or above it.
    limited = min(
        (o for o in outcomes if o.verdict == SENDER_LIMITED),
        key=lambda o: o.probe.rate_per_s,
        default=None,
    )

    def result(answer: int | None, why: str, needed: int | None = None) -> Result:
        return Result(answer, hold, broke, why, symptom, needed, n)

    if n == 0:
        return plan.probe(plan.from_per_s)
    last = outcomes[-1]
    if last.verdict == SENDER_LIMITED and last.probe.confirm:
        return result(None, *instrument_limit(last, hold))
    if any(o.probe.confirm for o in outcomes):
        return _confirming(plan, outcomes, symptom)
    if n >= plan.max_probes:
        return result(None, f"gave up after {n} probes without a confirmed rate")
    if limited is not None and (broke is None or limited.probe.rate_per_s < broke):
        # The sender, not the system, bounds what can be learnt: a limited probe is never a
        # break, but a break may still lie below it (an overloaded system on the same host
        # starves the sender too), so bisect below it until the gap is within the resolution.
        ceiling = limited.probe.rate_per_s
        if hold is None:  # not even the first rate held: say so at once (the user chose --from)
            return result(None, *instrument_limit(limited, hold))
        middle = (hold + ceiling) // 2
        if not plan.resolution.gap_ok(hold, ceiling) and middle > hold:
            return plan.probe(middle)
        return result(None, *instrument_limit(limited, hold))
    if broke is None:  # still growing
        if hold is not None and hold >= plan.max_per_s:
            return plan.probe(hold, confirm=True)
        top = hold if hold is not None else plan.from_per_s
        return plan.probe(min(plan.max_per_s, max(top + 1, math.ceil(top * plan.growth))))
    if hold is None:  # broke with nothing holding below: grow downwards
        lower = math.floor(min(o.probe.rate_per_s for o in outcomes) / plan.growth)
        if lower < 1:
            return result(None, f"broke at every rate down to {broke}/s")
        return plan.probe(lower)
    middle = (hold + broke) // 2
    if not plan.resolution.gap_ok(hold, broke) and middle > hold:
        return plan.probe(middle)
    # Within the resolution: confirm the highest hold (for the confirmation's longer hold).
    return plan.probe(hold, confirm=True)


def _confirming(
    plan: SearchPlan, outcomes: list[Outcome], symptom: tuple[str, ...]
) -> Probe | Result:
    """After the first confirmation every probe is one: a rate that held briefly but not for
    the long hold says short probes flatter this system. Step down from the lowest failed
    confirmation by 1, 2, 4, ... resolution steps until one holds, then bisect with
    confirmations until the gap is within the resolution."""
    confirms = [o for o in outcomes if o.probe.confirm]
    broke = min((o.probe.rate_per_s for o in confirms if o.verdict == BREAKS), default=None)
    held = max(
        (
            o.probe.rate_per_s
            for o in confirms
            if o.verdict == HOLDS and (broke is None or o.probe.rate_per_s < broke)
        ),
        default=None,
    )
    n = len(outcomes)
    # The bracket's upper end: the lowest rate that broke, short probe or confirmation.
    _, lowest_break = bracket(outcomes)
    found = Result(None, held, lowest_break, "", symptom, None, n)
    if held is not None and (
        broke is None or plan.resolution.gap_ok(held, broke) or (held + broke) // 2 <= held
    ):
        why = f"{held}/s held for the {plan.confirm_s} s confirmation"
        if lowest_break is not None:
            why += f"; {lowest_break}/s broke"
        return replace(found, max_sustainable_per_s=held, why=why)
    if n >= plan.max_probes:
        return replace(found, why=f"gave up after {n} probes without a confirmed rate")
    if broke is None:  # only sender-limited confirmations, which end the search (next_step)
        return replace(found, why="no rate held for the confirmation's hold")
    if held is None:
        failed = sum(1 for o in confirms if o.verdict == BREAKS)
        lower = broke - plan.resolution.step(broke) * 2 ** (failed - 1)
        if lower < 1:
            return replace(found, why="no rate held for the confirmation's hold")
        return plan.probe(lower, confirm=True)
    return plan.probe((held + broke) // 2, confirm=True)
