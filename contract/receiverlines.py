"""The lines the receiver (python -m receivers) and the lab's components (python -m suts)
print, each typed once (contract.lines).
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired[...] from the class
# body at definition time, and Python 3.11 cannot see it inside a string annotation.
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, cast, get_args

from contract.lines import (
    OutputLine,
    by_event,
    parse_line,
)


# the receiver (python -m receivers) and the lab's components (python -m suts) --------------
class ReceiverStats(TypedDict):
    """The receiver's counters: its GET /stats (with `buffered_bytes`, a level) and its
    stopped line; run.json keeps the last as receiver.stats."""

    received: int
    malformed: int  # 400s: not HTTP, not a CloudEvent, or an id that cannot be recorded
    invalid_ids: int  # of which: the id or an attribute was not a recordable string
    not_found: int
    refused: dict[str, int]  # status -> requests, beyond limits
    timed_out: int  # requests that stalled past their header or body timeout (408)
    idle_closed: int  # keep-alive connections closed after the idle timeout
    refused_connections: int  # over the connection cap (503)
    internal_errors: int  # 500s: a bug in the receiver, logged in one line each
    received_bytes: int
    connections: int
    open_connections: int
    rows_written: int
    parts_written: int
    quarantined: int  # rows that could not be encoded, kept in the quarantine file
    write_errors: int
    unwritten_rows: int  # rows still in memory when the receiver stopped (a failure)
    first_received_ns: int | None
    last_received_ns: int | None
    # The receiver's own pauses for garbage collection (runtime/gcpauses.py): objects kept out
    # of every collection since start-up, collections since, and the longest, which held the
    # loop (no request read or stamped) that long. Absent from a receiver older than them.
    gc_frozen_objects: NotRequired[int]
    gc_pauses: NotRequired[int]
    gc_pause_max_ms: NotRequired[float]
    buffered_bytes: NotRequired[int]  # GET /stats only: event bytes being received now


class Listening(TypedDict):
    """A receiver's or a SUT component's first line, once its socket is bound."""

    event: Literal["listening"]
    host: NotRequired[str]
    port: int
    out: NotRequired[str]  # the receiver: where its records go
    limits: NotRequired[dict[str, float]]  # the receiver: receivers.limits.Limits
    clock_shift_ns: NotRequired[int]  # the receiver: added to every stamp (--clock-shift)


class ReceiverStopped(TypedDict):  # the receiver's last line: its final counters
    event: Literal["stopped"]
    stats: ReceiverStats


class ComponentStopped(TypedDict):
    """A lab component's last line: its counters (suts.serving.Component.stats_doc)."""

    event: Literal["stopped"]
    stats: dict[str, int]


class Assigned(TypedDict):  # a Kafka dispatcher's line when the group first gave it partitions
    event: Literal["assigned"]
    partitions: int
    after_s: float


ReceiverLine: TypeAlias = Listening | ReceiverStopped | OutputLine
ComponentLine: TypeAlias = Listening | ComponentStopped | Assigned | OutputLine


_RECEIVER_KINDS = by_event(*get_args(ReceiverLine))
_COMPONENT_KINDS = by_event(*get_args(ComponentLine))


def parse_receiver_line(doc: Mapping[str, Any]) -> ReceiverLine | None:
    """A receiver's line as its type; None for an unknown event."""
    return cast(ReceiverLine | None, parse_line(doc, _RECEIVER_KINDS, "the receiver"))


def parse_component_line(doc: Mapping[str, Any]) -> ComponentLine | None:
    """A lab component's line (python -m suts) as its type; None for an unknown event."""
    return cast(ComponentLine | None, parse_line(doc, _COMPONENT_KINDS, "a lab component"))
