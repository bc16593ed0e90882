"""Binary-mode CloudEvents over HTTP/1.1: asyncio protocols on uvloop, httptools for answers.

One request at a time per keep-alive connection (no pipelining, so one slow answer never holds
up another event), from a pool that is kept ahead of need: before each step the pool holds
enough idle connections for the first slots, and whenever the idle ones run low more are opened
in the background. The pacer only ever takes an idle connection or, when there is none, queues
the request for the next connection to come up; it never waits for a connect, a slow answer or a
full socket buffer. Time spent waiting for a connection is counted (`connection_waits`) and is
part of publish latency, as it was for the 2019 sender's HTTP client. The pool grows when a
stall leaves requests waiting, and shrinks back, a few connections per sweep, once the idle ones
are far more than the pace needs: a sender running for hours is sized by its pace, not by the
worst stall so far.

No connection is kept past the idle limit its server tells (`loadgen.keepalive`): idle ones
are retired a margin before it, by the sweeps and, for one the pacer is about to take, at once.

Each request is built as one buffer, the id written into prebuilt header and payload pieces, and
goes out in one write; the answer's status is all that is read of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from urllib.parse import urlsplit

import httptools

from contract.records import DECOY_EVENT_TYPE, EVENT_ID_HEADER, EVENT_TYPE, WARMUP_EVENT_TYPE
from contract.senderlines import TransportStats
from contract.units import NS_PER_MS, NS_PER_S
from loadgen.keepalive import NEVER_NS, keep_alive_timeout_s, retire_age_ns
from loadgen.loghist import LogHistogram
from loadgen.payload import PayloadBuilder
from loadgen.request import Complete, Request

# Idle connections kept in hand: this many seconds' worth of slots at the step's rate (within
# the in-flight cap), so a burst of slow answers still finds connections open. The pool is
# topped up only once it falls below half of that, and by a bounded number of connects at a
# time: every connect costs the loop CPU, and opening one per send at 10,000/s would starve the
# reading of answers, which would keep more requests in flight and need yet more connections.
_SPARE_S = 0.05
_MIN_SPARE = 8
_MAX_BACKGROUND_CONNECTS = 32
# Connects are also rate-limited (a token bucket): each costs ~50 µs of the loop, and when a
# system under test stalls for 100 ms at 10,000/s, opening a connection for every queued request
# would take the loop away from the pacer for as long again, and add accept work to the system
# just as it recovers. Requests past the budget wait for the next free connection.
_CONNECTS_PER_S = 2000
_CONNECT_BURST = 200
# After a failed connect, background opening pauses this long (requests still try their own).
_CONNECT_BACKOFF_S = 0.1
# Idle connections beyond this many spares are closed by `sweep`. Twice the spare: the pool is
# topped up when idle falls below half a spare, so a bound well above a spare leaves a wide gap
# between opening and closing (no churn when answers come back in a burst and hand their
# connections back at once), while a stall's thousands of connections still go.
_IDLE_BOUND_SPARES = 2
# At most this many closes per sweep (ten sweeps a second): a close costs the loop ~25 µs on this
# machine (uvloop, loopback: ~4 µs the close call, ~20 µs its connection_lost and the socket's
# close), so 16 take ~0.4 ms from the pacer per sweep, within the 1 ms lag p99 target, and
# still empty a full pool of 4,096 in under half a minute.
_CLOSES_PER_SWEEP = 16


def excess_idle(idle: int, spare: int, per_sweep: int) -> int:
    """How many idle connections one sweep closes: those beyond `_IDLE_BOUND_SPARES` spares,
    at most `per_sweep` of them."""
    return max(0, min(per_sweep, idle - _IDLE_BOUND_SPARES * spare))


def parse_http_target(url: str) -> tuple[str, str, int, str, bool]:
    """`http(s)://host[:port]/path` -> (host header, host, port, request target, tls)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"target '{url}' is not an http(s) URL")
    tls = parts.scheme == "https"
    try:
        port = parts.port or (443 if tls else 80)
    except ValueError as exc:
        raise ValueError(f"target '{url}': {exc}") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.netloc, parts.hostname, port, target, tls


class _FirstAnswer:
    """The parser's protocol for a connection's first answer, which also reads its headers for
    the server's idle limit; later answers go to a parser without a header callback (~0.4 µs
    an answer here)."""

    __slots__ = ("conn",)

    def __init__(self, conn: _Connection) -> None:
        self.conn = conn

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"keep-alive" and (seconds := keep_alive_timeout_s(value)) is not None:
            self.conn.pool.told_idle_limit(seconds)

    def on_message_complete(self) -> None:
        conn = self.conn
        first, conn.parser = conn.parser, httptools.HttpResponseParser(conn)
        conn.pool.answered(conn, first.get_status_code(), first.should_keep_alive())


class _Connection(asyncio.Protocol):
    def __init__(self, pool: HttpTransport, connect_ns: int) -> None:
        self.pool = pool
        self.parser = httptools.HttpResponseParser(_FirstAnswer(self))
        self.transport: asyncio.Transport | None = None
        self.request: Request | None = None
        # When the last answer arrived, and until one has, when the connect began: the
        # connection's idle age counts from it.
        self.ack_ns = connect_ns
        # Closed by the pool while idle, and already out of its idle list: `lost` need not look
        # for it there (a scan of up to 4,096 per close made a sweep's 32 closes cost 3 ms).
        self.retired = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        # Stamped before parsing, as the receiver does: the answer arrived now.
        self.ack_ns = time.time_ns()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.pool.failed(self, f"unreadable answer: {exc}")

    def on_message_complete(self) -> None:
        self.pool.answered(self, self.parser.get_status_code(), self.parser.should_keep_alive())

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.pool.lost(self, exc)


class HttpTransport:
    def __init__(
        self,
        url: str,
        source: str,
        payloads: PayloadBuilder,
        max_connections: int,
        connect_timeout_s: float = 5.0,
    ) -> None:
        host_header, self.host, self.port, target, tls = parse_http_target(url)
        self.ssl = ssl.create_default_context() if tls else None
        self.payloads = payloads
        self.max_connections = max_connections
        self.connect_timeout_s = connect_timeout_s
        self._heads = {}
        for kind, ce_type in enumerate((EVENT_TYPE, WARMUP_EVENT_TYPE, DECOY_EVENT_TYPE)):
            self._heads[kind] = (
                f"POST {target} HTTP/1.1\r\nHost: {host_header}\r\nce-specversion: 1.0\r\n"
                f"ce-source: {source}\r\nce-type: {ce_type}\r\n"
                f"content-type: application/json\r\n"
                f"content-length: {payloads.size_bytes}\r\nce-id: "
            ).encode()
        self._between_ids = f"\r\n{EVENT_ID_HEADER}: ".encode()
        self._complete: Complete | None = None
        self._idle: list[_Connection] = []
        self._waiting: deque[Request] = deque()
        self._open: set[_Connection] = set()
        self._connecting = 0
        self._connect_tasks: set[asyncio.Task[None]] = set()
        self._connect_started: dict[asyncio.Task[None], float] = {}
        self._tokens = float(_CONNECT_BURST)
        self._tokens_at = time.monotonic()
        self._spare = _MIN_SPARE
        self._backoff_until = 0.0
        self._retire_age_ns = NEVER_NS
        # Connect times for the whole run: a histogram, since a system that closes every
        # connection after one answer makes a connect per event.
        self._connect_ns = LogHistogram()
        self.connections_opened = 0
        self.connections_peak = 0  # the most open at once during the run
        self.connect_failures = 0
        self.connection_waits = 0

    def bind(self, complete: Complete) -> None:
        self._complete = complete

    def _build(self, request: Request) -> bytes:
        eid = request.event_id
        return b"".join(
            (
                self._heads[request.kind],
                eid,
                self._between_ids,
                eid,
                b"\r\n\r\n",
                self.payloads.prefix,
                eid,
                self.payloads.tail(len(eid)),
            )
        )

    # the pacer's side
    def send(self, request: Request) -> None:
        idle = self._idle
        # Even the last answered idle connection near its server's limit (the loop paused, or
        # a stall drained the pool down to old ones): the older ones go with it. Judged by
        # this slot's own clock reading, not by the last sweep's.
        if idle and idle[-1].ack_ns < request.sent_ns - self._retire_age_ns:
            self._retire_overdue(request.sent_ns)
        if idle:
            self._start(idle.pop(), request)
            if len(idle) + self._connecting < self._spare // 2:
                self._grow(self._spare - len(idle) - self._connecting, background=True)
            return
        self.connection_waits += 1
        self._waiting.append(request)
        if self._connecting < len(self._waiting):
            self._grow(1, background=False)

    def _start(self, conn: _Connection, request: Request) -> None:
        conn.request = request
        request.conn = conn
        assert conn.transport is not None
        conn.transport.write(self._build(request))

    def abandon(self, request: Request) -> None:
        conn = request.conn
        if isinstance(conn, _Connection):
            conn.request = None
            if conn.transport is not None:
                conn.transport.abort()  # a late answer must not be read as the next one's
        else:
            with contextlib.suppress(ValueError):
                self._waiting.remove(request)
        request.conn = None

    async def prepare(self, rate_per_s: int) -> None:
        self._spare = min(self.max_connections, max(_MIN_SPARE, int(rate_per_s * _SPARE_S)))
        self._retire_overdue(time.time_ns())  # before the step, not on its first slots
        room = self.max_connections - len(self._open) - self._connecting
        missing = min(room, self._spare - len(self._idle) - self._connecting)
        if missing > 0:
            await asyncio.gather(*(self._connect() for _ in range(missing)))

    # connections
    def _grow(self, count: int, background: bool) -> None:
        now = time.monotonic()
        if background:
            if now < self._backoff_until:
                return
            count = min(count, _MAX_BACKGROUND_CONNECTS - self._connecting)
        room = self.max_connections - len(self._open) - self._connecting
        self._tokens = min(_CONNECT_BURST, self._tokens + (now - self._tokens_at) * _CONNECTS_PER_S)
        self._tokens_at = now
        count = min(count, room, int(self._tokens))
        if count <= 0:
            return
        self._tokens -= count
        loop = asyncio.get_running_loop()
        for _ in range(count):
            task = loop.create_task(self._connect())
            self._connect_tasks.add(task)
            task.add_done_callback(self._connect_tasks.discard)

    async def _connect(self) -> None:
        # No asyncio.wait_for here: it nearly doubles the CPU of a connect. Connects that hang
        # are cancelled by `sweep`, which the engine calls ten times a second.
        self._connecting += 1
        connect_ns = time.time_ns()
        started = time.perf_counter()
        task = asyncio.current_task()
        assert task is not None
        self._connect_started[task] = started
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(
                lambda: _Connection(self, connect_ns), self.host, self.port, ssl=self.ssl
            )
        except (OSError, ssl.SSLError, asyncio.CancelledError) as exc:
            self._connecting -= 1
            self.connect_failures += 1
            self._backoff_until = time.monotonic() + _CONNECT_BACKOFF_S
            error = _describe(exc, f"no connection within {self.connect_timeout_s:g} s")
            if self._waiting:
                self._fail(self._waiting.popleft(), f"connect: {error}")
            return
        finally:
            self._connect_started.pop(task, None)
        self._connecting -= 1
        self.connections_opened += 1
        self._connect_ns.add_one(round((time.perf_counter() - started) * NS_PER_S))
        self._open.add(conn)
        if len(self._open) > self.connections_peak:
            self.connections_peak = len(self._open)
        self._ready(conn)

    def sweep(self) -> None:
        """Cancel connects older than the connect timeout (each fails one waiting request),
        open connections for requests still waiting once the connect budget allows, and close
        some of the idle connections the step does not need or that near the server's idle
        limit."""
        horizon = time.perf_counter() - self.connect_timeout_s
        for task, started in list(self._connect_started.items()):
            if started < horizon:
                task.cancel()
        if len(self._waiting) > self._connecting:
            self._grow(len(self._waiting) - self._connecting, background=False)
        closes = max(
            excess_idle(len(self._idle), self._spare, _CLOSES_PER_SWEEP),
            self._overdue_first(time.time_ns() - self._retire_age_ns, _CLOSES_PER_SWEEP),
        )
        if closes:
            self._close_idle(closes)

    def _overdue_first(self, horizon_ns: int, most: int) -> int:
        """How many of the least recently used idle connections (up to `most`) were last
        answered before `horizon_ns`."""
        count = 0
        for conn in self._idle[:most]:
            if conn.ack_ns >= horizon_ns:
                break
            count += 1
        return count

    def _retire_overdue(self, now_ns: int) -> None:
        """Close every idle connection past the retire age (after a pause, all of them)."""
        horizon_ns = now_ns - self._retire_age_ns
        overdue = [conn for conn in self._idle if conn.ack_ns < horizon_ns]
        self._idle[:] = [conn for conn in self._idle if conn.ack_ns >= horizon_ns]
        for conn in overdue:
            conn.retired = True
            self._discard(conn)

    def told_idle_limit(self, timeout_s: int) -> None:
        """A server's answer said it closes connections idle for `timeout_s`."""
        self._retire_age_ns = min(self._retire_age_ns, retire_age_ns(timeout_s))

    def _close_idle(self, count: int) -> None:
        """Close the `count` least recently used idle connections (the front of `_idle`: `send`
        takes from the back). Gracefully: nothing is on them, and `lost` follows."""
        oldest = self._idle[:count]
        del self._idle[:count]
        for conn in oldest:
            conn.retired = True
            self._discard(conn)

    def _ready(self, conn: _Connection) -> None:
        if self._waiting:
            self._start(conn, self._waiting.popleft())
        else:
            self._idle.append(conn)

    def _fail(self, request: Request, error: str) -> None:
        request.conn = None
        assert self._complete is not None
        self._complete(request, 0, error[:500], None)

    # the connections' side
    def answered(self, conn: _Connection, status: int, keep_alive: bool) -> None:
        request, conn.request = conn.request, None
        if request is not None:
            request.conn = None
            error = None if 200 <= status < 300 else f"HTTP {status}"
            assert self._complete is not None
            self._complete(request, status, error, conn.ack_ns)
        if request is None or not keep_alive:
            # An answer nobody asked for (or a closing one): the connection is not trusted again.
            self._discard(conn)
        elif conn.transport is not None and conn.request is None:
            self._ready(conn)

    def failed(self, conn: _Connection, error: str) -> None:
        request, conn.request = conn.request, None
        if request is not None:
            self._fail(request, error)
        self._discard(conn)

    def lost(self, conn: _Connection, exc: Exception | None) -> None:
        self._open.discard(conn)
        if not conn.retired and conn in self._idle:
            self._idle.remove(conn)
        request, conn.request = conn.request, None
        if request is not None:
            self._fail(request, "connection closed before the answer" + _suffix(exc))

    def _discard(self, conn: _Connection) -> None:
        self._open.discard(conn)
        if conn.transport is not None:
            conn.transport.close()

    def stats(self) -> TransportStats:
        p99_ns = self._connect_ns.quantile(0.99)
        return {
            "connections_open": len(self._open),
            "connections_opened": self.connections_opened,
            "connections_peak": self.connections_peak,
            "connect_ms_p99": None if p99_ns is None else round(p99_ns / NS_PER_MS, 3),
            "connect_failures": self.connect_failures,
            "connection_waits": self.connection_waits,
        }

    async def close(self) -> None:
        for task in list(self._connect_tasks):
            task.cancel()
        for conn in list(self._open):
            if conn.transport is not None:
                conn.transport.close()
        self._open.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports finish closing


def _describe(exc: BaseException, timeout_text: str) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return timeout_text
    return f"{type(exc).__name__}: {exc}"


def _suffix(exc: Exception | None) -> str:
    return f" ({type(exc).__name__}: {exc})" if exc is not None else ""
