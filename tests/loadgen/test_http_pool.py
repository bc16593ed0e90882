"""The HTTP sender's connection pool shrinks back after a stall (issue 34): a real HttpTransport
on uvloop against a real HTTP server on loopback that holds its answers while stalled."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, cast

import httptools
import pytest
import uvloop

from contract.documents import problems
from contract.senderlines import StepEnd, parse_sender_line
from loadgen.fleet.tally import Tally
from loadgen.http import _CLOSES_PER_SWEEP, HttpTransport, excess_idle
from loadgen.payload import PayloadBuilder
from loadgen.request import MEASURE, Request

_ACCEPTED = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"


class _Answering(asyncio.Protocol):
    """One server-side connection: answers 202 at once, or holds the answer while stalled."""

    def __init__(self, server: StallingServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.opened += 1
        self.server.open.add(self)
        self.server.peak_open = max(self.server.peak_open, len(self.server.open))

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        if self.server.stalled:
            self.server.held.append(self)
        else:
            self.answer()

    def answer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_ACCEPTED)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server.open.discard(self)
        self.server.closed += 1


class StallingServer:
    """Counts the connections it sees open and closed; `stall()` holds every answer until
    `resume()`, as a system under test that stops answering for a while."""

    def __init__(self) -> None:
        self.stalled = False
        self.held: list[_Answering] = []
        self.open: set[_Answering] = set()
        self.opened = self.closed = self.peak_open = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Answering(self), "127.0.0.1", 0, backlog=1024
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def stall(self) -> None:
        self.stalled = True

    def resume(self) -> None:
        self.stalled = False
        held, self.held = self.held, []
        for conn in held:
            conn.answer()

    async def stop(self) -> None:
        assert self._server is not None
        for conn in list(self.open):
            if conn.transport is not None:
                conn.transport.close()
        self._server.close()
        await self._server.wait_closed()


async def _until(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.01)


class _Sender:
    """Drives the transport as the engine does: requests in, reports out through `complete`."""

    def __init__(self, transport: HttpTransport) -> None:
        self.transport = transport
        self.answers: dict[bytes, tuple[int, str | None]] = {}
        self.seq = 0
        transport.bind(self.complete)

    def complete(
        self, request: Request, status: int, error: str | None, ack_ns: int | None
    ) -> None:
        request.done = True
        self.answers[request.event_id] = (status, error)

    def send(self, count: int) -> list[bytes]:
        ids = []
        for _ in range(count):
            self.seq += 1
            event_id = f"ev-{self.seq:06d}".encode()
            now_ns = time.time_ns()
            # The step state is the engine's business; the transport never reads it.
            request = Request(self.seq, event_id, MEASURE, now_ns, now_ns, cast(Any, None))
            self.transport.send(request)
            ids.append(event_id)
        return ids


async def _stall_and_recover() -> None:
    server = StallingServer()
    await server.start()
    transport = HttpTransport(
        f"http://127.0.0.1:{server.port}/", "/test", PayloadBuilder(512, 16), max_connections=256
    )
    sender = _Sender(transport)
    try:
        await transport.prepare(100)  # 100/s x 50 ms < the minimum: 8 spare connections
        spare = transport._spare
        assert spare == 8 and len(transport._idle) == spare

        # A stall: 120 requests, none answered, each ends up on a connection of its own.
        server.stall()
        stalled = sender.send(120)
        await _until(
            lambda: len(server.held) == 120 and transport._connecting == 0,
            10,
            "the server holding 120 requests, and every connect done",
        )
        stats = transport.stats()
        assert stats["connection_waits"] > 0  # requests waited for connections to open
        assert stats["connections_open"] >= 120 > spare
        assert stats["connections_peak"] == server.peak_open == len(server.open)

        # The stall ends: every connection comes back idle.
        server.resume()
        await _until(lambda: len(sender.answers) == 120, 10, "the stalled requests' answers")
        assert {sender.answers[i] for i in stalled} == {(202, None)}
        peak = transport.stats()["connections_peak"]
        assert len(transport._idle) == len(transport._open) == peak

        # A second, short stall holds 20 requests in flight while the pool is trimmed.
        server.stall()
        in_flight = sender.send(20)
        await _until(lambda: len(server.held) == 20, 10, "the server holding 20 requests")
        busy = set(transport._open) - set(transport._idle)
        assert len(busy) == 20

        # One sweep closes the least recently used idle connections, and no more than a few.
        before = list(transport._idle)
        transport.sweep()
        assert len(before) - 2 * spare > _CLOSES_PER_SWEEP  # more excess than one sweep closes
        assert transport._idle == before[_CLOSES_PER_SWEEP:]

        # Sweeps, ten a second as the engine makes them, bring idle down to twice the spare.
        async def swept_down() -> bool:
            transport.sweep()
            await asyncio.sleep(0.1)
            return len(transport._idle) <= 2 * spare

        deadline = time.monotonic() + 10
        while not await swept_down():
            assert time.monotonic() < deadline, "sweeps did not trim the idle connections"
        assert len(transport._idle) == 2 * spare
        assert busy <= transport._open  # connections in use were never touched
        open_now = len(transport._open)
        assert open_now == 2 * spare + 20
        await _until(
            lambda: len(server.open) == open_now, 10, "the server seeing the trimmed ones close"
        )
        assert server.closed == server.opened - open_now == peak - open_now
        transport.sweep()  # at the bound: nothing more to close
        assert len(transport._open) == open_now

        # The requests in flight all along still get their answers.
        server.resume()
        await _until(lambda: len(sender.answers) == 140, 10, "the in-flight requests' answers")
        assert {sender.answers[i] for i in in_flight} == {(202, None)}
        stats = transport.stats()
        assert stats["connections_peak"] == peak > stats["connections_open"]
        assert stats["connect_failures"] == 0
    finally:
        await transport.close()
        await server.stop()


@pytest.mark.e2e
def test_the_pool_grows_in_a_stall_and_shrinks_back_after_it() -> None:
    uvloop.run(_stall_and_recover())


@pytest.mark.parametrize(
    ("idle", "spare", "per_sweep", "closes"),
    [
        (0, 8, 32, 0),  # nothing idle
        (16, 8, 32, 0),  # at the bound (twice the spare): kept
        (17, 8, 32, 1),  # one past it
        (40, 8, 32, 24),  # all the excess in one sweep
        (4000, 8, 32, 32),  # a stall's worth: a few per sweep
        (4000, 1000, 32, 32),  # a fast step's spare is larger, and so is its bound
        (1500, 1000, 32, 0),  # idle within the bound of a fast step
        (10, 8, 0, 0),  # closing switched off
    ],
)
def test_excess_idle(idle: int, spare: int, per_sweep: int, closes: int) -> None:
    assert excess_idle(idle, spare, per_sweep) == closes


def test_a_fleets_peak_is_the_sum_of_its_workers_peaks() -> None:
    """Workers' peaks need not coincide: their sum bounds the fleet's from above."""
    tally = Tally(workers=2, pid=7)
    step_start = {
        "event": "step_start",
        "step": 1,
        "warmup": False,
        "target_rate_per_s": 1000,
        "duration_s": 2,
        "start_ns": 5_000,
    }
    out = []
    for index in (0, 1):
        end = {
            "event": "step_end",
            "step": 1,
            "warmup": False,
            "target_rate_per_s": 1000,
            "duration_s": 2,
            "worker_target_rate_per_s": 500.0,
            "scheduled": 1000,
            "sent": 1000,
            "ok": 1000,
            "failures": 0,
            "inflight_cap_refused": 0,
            "achieved_send_rate_per_s": 1000.0,
            "lag_p50_ms": 0.1,
            "lag_p99_ms": 0.2,
            "lag_max_ms": 0.3,
            "wake_jitter_p99_ms": 0.1,
            "wake_jitter_max_ms": 0.2,
            "gc_ms": 1.0,
            "gc_collected": 3,
            "connections_open": 10,
            "connections_peak": 300 + 200 * index,
            "inflight_at_step_end": 0,
        }
        for doc in (step_start, end):
            line = parse_sender_line(doc)
            assert line is not None
            out += tally.line(index, line)
    (fleet_end,) = [line for line in out if line["event"] == "step_end"]
    assert problems(fleet_end, StepEnd) == []
    assert (fleet_end["connections_open"], fleet_end["connections_peak"]) == (20, 800)
