"""What every connection of one receiver shares (uvicorn's `ServerState`): the counters, the
limits, the connections open and the bytes being received now, and the clock that stamps.

A connection reads and updates this and hands what it received to its sink (the receiver,
`receivers.connection.Sink`); it never sees the receiver itself, so the two modules do not
import each other, and the metrics read the same state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from contract.receiverlines import ReceiverStats
from contract.units import MS_PER_S
from receivers.limits import Limits
from runtime.gcpauses import GcClock

Conn = TypeVar("Conn")


@dataclass
class Counters:
    """The receiver's counters as attributes (the hot path adds to them); `doc()` is them as
    the ReceiverStats its GET /stats and stopped line carry."""

    received: int = 0
    malformed: int = 0
    invalid_ids: int = 0
    not_found: int = 0
    refused: dict[str, int] = field(default_factory=dict)  # status -> requests, beyond limits
    timed_out: int = 0
    idle_closed: int = 0
    refused_connections: int = 0
    internal_errors: int = 0
    received_bytes: int = 0
    connections: int = 0
    open_connections: int = 0
    rows_written: int = 0
    parts_written: int = 0
    quarantined: int = 0
    write_errors: int = 0
    unwritten_rows: int = 0
    first_received_ns: int | None = None
    last_received_ns: int | None = None
    gc_frozen_objects: int = 0
    gc: GcClock = field(default_factory=GcClock)  # installed by the receiver's process

    def doc(self) -> ReceiverStats:
        return {
            "received": self.received,
            "malformed": self.malformed,
            "invalid_ids": self.invalid_ids,
            "not_found": self.not_found,
            "refused": dict(self.refused),
            "timed_out": self.timed_out,
            "idle_closed": self.idle_closed,
            "refused_connections": self.refused_connections,
            "internal_errors": self.internal_errors,
            "received_bytes": self.received_bytes,
            "connections": self.connections,
            "open_connections": self.open_connections,
            "rows_written": self.rows_written,
            "parts_written": self.parts_written,
            "quarantined": self.quarantined,
            "write_errors": self.write_errors,
            "unwritten_rows": self.unwritten_rows,
            "first_received_ns": self.first_received_ns,
            "last_received_ns": self.last_received_ns,
            "gc_frozen_objects": self.gc_frozen_objects,
            "gc_pauses": self.gc.collections,
            "gc_pause_max_ms": round(self.gc.longest_s * MS_PER_S, 3),
        }


class ServerState(Generic[Conn]):
    """One receiver's shared state; `Conn` is its connections' type."""

    def __init__(self, limits: Limits, now_ns: Callable[[], int]) -> None:
        self.limits = limits
        self.now_ns = now_ns  # the receiver's clock (shifted, to test the correction)
        self.stats = Counters()
        self.connections: set[Conn] = set()
        # Connections that have not begun a request, oldest first: evicted at the cap.
        self.fresh: dict[Conn, None] = {}
        self.buffered_bytes = 0  # event bytes being received now, over every connection
        self.body_limit_digits = len(str(limits.max_body_bytes))
        # On every answer that keeps its connection: how long an idle one is held, in whole
        # seconds (rounded down), so that a client retires it first (loadgen.keepalive).
        self.keep_alive = f"Keep-Alive: timeout={int(limits.idle_timeout_s)}"
        self.accepted = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n%s\r\n\r\n" % (
            self.keep_alive.encode()
        )
