"""Fan-out in run.json: the subscribers a system delivers each event to, one path each at the
receiver (suts.settings.subscriber_paths), so that the received records (`subscriber`) say whose
delivery each one was. Written by suts.driver.Sut.describe; absent for a system of one
subscriber, as every run recorded before fan-out is."""

from __future__ import annotations

from typing import TypedDict

from contract.figures import TailDoc


class SubscriberDoc(TypedDict):
    path: str  # where it delivers at the receiver: the received records' `subscriber`
    url: str  # the subscriber URL the system was given
    matches: bool  # takes the run's events: a broker's trigger may filter every one out


class SubscriberCountsDoc(TypedDict):
    """What one subscriber got of the events: each counted at it (analysis.fanout)."""

    delivered: int  # events it got at least once
    lost: int  # acked events it takes and never got
    duplicates: int  # its deliveries beyond the first of an event
    filtered: int  # events it does not take (a decoy, or every one at a trigger that does not
    # match), rightly never delivered to it
    leaked: int  # events it does not take that it got all the same


class SubscriberStepDoc(TypedDict):
    """A step as one subscriber saw it, judged by the step rule on its own deliveries."""

    step: int
    target_rate_per_s: int
    delivered_rate_per_s: float
    lost: int
    duplicates: int
    filtered: int
    leaked: int
    p99_e2e_ms: float | None
    p9999_e2e_ms: float | None
    e2e_n: int
    verdict: str
    reasons: list[str]


class SubscriberSummaryDoc(TypedDict):
    """summary.json's `subscribers`: a fan-out's subscribers, each on its own (the system's
    own figures are their completion: analysis.fanout)."""

    number: int  # from 1, as run.json lists them
    path: str
    matches: bool
    counts: SubscriberCountsDoc
    e2e_ms: TailDoc  # its first deliveries' end-to-end latency over the run
    steps: list[SubscriberStepDoc]
