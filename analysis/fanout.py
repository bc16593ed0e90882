"""Fan-out: a system that delivers each event to several subscribers (a channel's subscriptions,
a broker's triggers: run.json's `sut_settings.subscribers`, contract.fanout), each at a path of
its own that the received records name (`subscriber`).

Every event is expected once at each subscriber that takes it. The system's ledger is each
event's *completion*: delivered when every subscriber that takes it has it, at the last of their
first deliveries (the end-to-end latency to the slowest of them); lost when any of them never got
it; its duplicates are every subscriber's extra deliveries. A decoy is delivered wherever it
first arrives (a leak). So any subscriber's loss or slowness is the system's, and the step rule
(analysis.steprule) judges the system on it unchanged.

Beside it, each subscriber's own ledger: its first delivery of each event and how many it got
(the events' columns `received_ns@N` and `deliveries@N`, N from 1), reduced per step to its
totals and its e2e digest (metric `e2e@N`); at a subscriber that does not take the run's events
every event is a decoy, so none is lost there and each delivery is a leak.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.digests import digest_rows
from analysis.steprule import StepTotals, flags, latencies, outcomes, step_totals
from analysis.unrecorded import NeverSent, never_sent
from contract.documents import RunDoc
from contract.fanout import SubscriberDoc
from contract.summarydocs import SummaryDoc

# (path at the receiver, takes the run's events), subscriber 1 first; () for one subscriber.
Fanout = tuple[tuple[str, bool], ...]

_NEVER = np.iinfo(np.int64).max


def fanout_of(run: RunDoc) -> Fanout:
    """The subscribers run.json names (none: a system of one, as every run before fan-out)."""
    return fanout_from(run.get("sut_settings", {}).get("subscribers") or [])


def fanout_from(subscribers: Sequence[SubscriberDoc]) -> Fanout:
    """The subscribers as a system describes them (suts.driver.Sut.subscribers)."""
    return tuple((s["path"], bool(s["matches"])) for s in subscribers)


def summary_fanout(summary: SummaryDoc) -> int:
    """The subscribers a summary's system delivered each event to (1 before fan-out)."""
    return max(1, len(summary.get("subscribers") or ()))


def silent_subscribers(
    fanout: Fanout, totals: Mapping[int, Sequence[StepTotals]]
) -> tuple[str, ...]:
    """The subscribers that take the run's events yet got none of them (`totals`: each one's
    per step, by number)."""
    return tuple(
        path
        for number, (path, takes) in enumerate(fanout, start=1)
        if takes and not any(t["delivered"] for t in totals.get(number, ()))
    )


def doubled_subscribers(
    fanout: Fanout, totals: Mapping[int, Sequence[StepTotals]]
) -> tuple[tuple[str, float], ...]:
    """The subscribers that take the run's events and got each of them (nearly) twice or more:
    (path, deliveries per event it got). Beside a silent one, the mark of two subscriptions
    wired to one subscriber's path (analysis.instrumentfail)."""
    found = []
    for number, (path, takes) in enumerate(fanout, start=1):
        delivered = sum(t["delivered"] for t in totals.get(number, ()))
        duplicates = sum(t["duplicates"] for t in totals.get(number, ()))
        if takes and delivered and (per_event := 1 + duplicates / delivered) >= DOUBLED_MIN:
            found.append((path, round(per_event, 2)))
    return tuple(found)


# Deliveries per event that make a subscriber "doubled": twice, nearly (an event one of its two
# subscriptions lost now and then, as a breaking system does, still leaves it near 2).
DOUBLED_MIN = 1.9


def received_at(number: int) -> str:
    """The events' column of subscriber `number`'s first delivery (from 1)."""
    return f"received_ns@{number}"


def deliveries_at(number: int) -> str:
    return f"deliveries@{number}"


def metric_at(number: int) -> str:
    """The digests' metric of subscriber `number`'s end-to-end latency."""
    return f"e2e@{number}"


def fanned(
    sent: pa.Table, received: pa.Table, rows: np.ndarray, fanout: Fanout, own: str | None = None
) -> tuple[pa.Table, NeverSent, int]:
    """The sent events with their completion (`received_ns`, null when not complete, and
    `deliveries`, as analysis.steprule reads them) and each subscriber's columns; how many
    distinct ids were received but never sent, the run's `own` among them told apart
    (analysis.unrecorded); and how many deliveries of sent events came to a path no subscriber
    has (a subscription pointed at the wrong URL: analysis.verdicts). `rows`: each delivery's
    sent row (-1: none)."""
    count = sent.num_rows
    met = rows >= 0
    foreign = never_sent(received.column("event_id").filter(pa.array(~met)), own)
    paths = pa.array([path for path, _ in fanout], pa.string())
    which = pc.index_in(received.column("subscriber"), value_set=paths)
    subscriber = np.asarray(which.fill_null(-1), dtype=np.int64)
    stamps = received.column("received_ns").to_numpy()
    anywhere = np.full(count, _NEVER, np.int64)  # a decoy's first arrival, at any path
    total = np.zeros(count, np.int64)
    last_first = np.zeros(count, np.int64)
    complete = np.full(count, any(takes for _, takes in fanout))
    reached = np.zeros(count, bool)  # by a subscriber that takes it
    extra = np.zeros(count, np.int64)
    events = sent
    for number, (_, takes) in enumerate(fanout, start=1):
        mine = met & (subscriber == number - 1)
        got = np.bincount(rows[mine], minlength=count)
        first = np.full(count, _NEVER, np.int64)
        np.minimum.at(first, rows[mine], stamps[mine])
        events = events.append_column(received_at(number), pa.array(first, mask=got == 0))
        events = events.append_column(deliveries_at(number), pa.array(got, pa.int64()))
        anywhere, total = np.minimum(anywhere, first), total + got
        if takes:
            complete &= got > 0
            reached |= got > 0
            last_first = np.maximum(last_first, np.where(got > 0, first, 0))
            extra += np.maximum(got - 1, 0)
    stray = met & (subscriber < 0)  # at a path that is no subscriber's
    np.minimum.at(anywhere, rows[stray], stamps[stray])
    total += np.bincount(rows[stray], minlength=count)
    decoy = flags(sent, "decoy")
    if not any(takes for _, takes in fanout):  # no subscriber takes them: each is a decoy
        decoy = np.ones(count, bool)
        events = events.set_column(events.schema.get_field_index("decoy"), "decoy", pa.array(decoy))
    received_ns = np.where(decoy, anywhere, last_first)
    missing = np.where(decoy, anywhere == _NEVER, ~complete)
    deliveries = np.where(decoy, total, np.where(reached, 1 + extra, 0))
    events = events.append_column("received_ns", pa.array(received_ns, mask=missing))
    events = events.append_column("deliveries", pa.array(deliveries, pa.int64()))
    return events, foreign, int(stray.sum())


def subscriber_view(table: pa.Table, number: int, takes: bool) -> pa.Table:
    """The events as subscriber `number` saw them: its first delivery and its count in place of
    the completion's; at a subscriber that does not take them, every event a decoy."""
    view = table
    for name, mine in (("received_ns", received_at(number)), ("deliveries", deliveries_at(number))):
        view = view.set_column(view.schema.get_field_index(name), name, view.column(mine))
    if not takes:
        decoys = pa.array(np.ones(view.num_rows, bool))
        view = view.set_column(view.schema.get_field_index("decoy"), "decoy", decoys)
    return view


def fanout_step(
    table: pa.Table, fanout: Fanout, sut: str, step: int, top_k: int
) -> tuple[list[dict[str, object]], pa.Table]:
    """One step's events (measured, with the subscribers' columns) -> each subscriber's totals
    (`{"number", "totals"}`) and its e2e digest rows (metric `e2e@N`, the step's own only: no
    per-second digests, so a fan-out of fifty adds fifty digests a step, not fifty a second)."""
    found: list[dict[str, object]] = []
    digests = []
    seconds = np.zeros(table.num_rows, np.int64)  # one bucket: only the step's row is kept
    for number, (_, takes) in enumerate(fanout, start=1):
        view = subscriber_view(table, number, takes)
        flagged = outcomes(view)
        found.append({"number": number, "totals": step_totals(view, flagged)})
        e2e = latencies(view, flagged["ok"], ("e2e",))["e2e_ms"]
        rows = digest_rows(sut, step, seconds, {f"{metric_at(number)}_ms": e2e}, top_k)
        digests.append(rows.filter(pc.is_null(rows.column("second"))))
    return found, pa.concat_tables(digests)
