"""One event in flight, and what a transport needs to know to send it and report back."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from contract.senderlines import TransportStats

if TYPE_CHECKING:
    from loadgen.stepstate import StepState

# What the request carries as its CloudEvent type, by index (the pacer picks one per slot).
MEASURE, WARMUP, DECOY = 0, 1, 2


class Request:
    """A slot the pacer has started. `done` turns true exactly once, when its row is recorded."""

    __slots__ = ("conn", "done", "event_id", "intended_ns", "kind", "sent_ns", "seq", "state")

    def __init__(
        self, seq: int, event_id: bytes, kind: int, intended_ns: int, sent_ns: int, state: StepState
    ) -> None:
        self.seq = seq
        self.event_id = event_id
        self.kind = kind
        self.intended_ns = intended_ns
        self.sent_ns = sent_ns
        self.state = state
        self.conn: object | None = None  # the transport's handle while the request is on it
        self.done = False


# (request, status, error or None, ack_ns or None): called once per request by its transport.
Complete = Callable[[Request, int, str | None, int | None], None]


class Transport(Protocol):
    """Sends requests without ever blocking the caller; reports each through `complete`."""

    def bind(self, complete: Complete) -> None: ...

    async def prepare(self, rate_per_s: int) -> None:
        """Get ready for a step at this rate (open connections ahead), before it starts."""
        ...

    def send(self, request: Request) -> None: ...

    def abandon(self, request: Request) -> None:
        """Give up on a request (timeout, end of run); its connection is not reused."""
        ...

    def sweep(self) -> None:
        """Called ten times a second: expire what the transport itself waits on."""
        ...

    def stats(self) -> TransportStats:
        """Transport counters for the step summaries (connections opened, waits, ...)."""
        ...

    async def close(self) -> None: ...
