"""A sender's live figures: served as Prometheus /metrics (`--sender-metrics-port`) from a small
server on the sender's own event loop, and printed as `metrics` lines (`--metrics-lines`) for a
fleet's master to add up.

Nothing here runs per event. The counts are read from the pacer's own step counters when asked
(a scrape, a line); the histograms of sender lag and publish latency are added a flushed buffer
of records at a time, on the record writer's thread (loadgen.recorder's `observe`), so they
trail the counts by at most a flush interval (--flush-interval, 1 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import numpy as np

from contract.lines import WarningLine
from contract.metricslines import METRICS_PATH, MetricsLine, SenderMetrics, metrics_listening
from contract.units import NS_PER_S
from loadgen.engine import Engine
from loadgen.exposition import exposition, registry
from loadgen.histogram import Histogram
from loadgen.recorder import NO_TIME, SentColumns
from loadgen.settings import SendKnobs

# What one scraper may cost the sender (whose event loop this shares with its pacer): a head
# over 16 KiB, or not whole CLIENT_TIMEOUT_S after the accept (one deadline for the whole head:
# a trickle does not renew it), is dropped, as is an answer not taken within it; one request a
# connection (Connection: close), so none idles; beyond MAX_CONNECTIONS open at once, 503 and
# close, so scrapers cannot take the descriptors the sender's own connections need.
_REQUEST_HEAD_LIMIT_BYTES = 16 * 1024  # a scrape's request line and headers are well under
CLIENT_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 64
_LINE_INTERVAL_S = 1.0
_BUSY = b"every connection slot is taken: retry\n"
_USAGE = b"GET /metrics: this sender's figures in the Prometheus text format\n"

Emit = Callable[[MetricsLine | WarningLine], None]


class LiveFigures:
    """The figures of one sender, from its engine's counters and its flushed records."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.lag = Histogram()
        self.publish_latency = Histogram()

    def observe(self, columns: SentColumns) -> None:
        """The records of one flush not yet observed (on the record writer's thread)."""
        start = columns.observed
        intended = np.frombuffer(columns.intended_ns, dtype=np.int64)[start:]
        sent = np.frombuffer(columns.sent_ns, dtype=np.int64)[start:]
        ack = np.frombuffer(columns.ack_ns, dtype=np.int64)[start:]
        status = np.frombuffer(columns.status, dtype=np.int32)[start:]
        was_sent = sent != NO_TIME  # slots the in-flight cap refused were never sent
        self.lag.add(sent[was_sent] - intended[was_sent])
        acked = (ack != NO_TIME) & (status >= 200) & (status < 300)
        self.publish_latency.add(ack[acked] - sent[acked])

    def now(self) -> SenderMetrics:
        engine = self.engine
        states = engine.states
        step = rate = 0
        if states:
            last = states[-1]
            step = last.planned.number
            end_ns = last.start_ns + last.planned.duration_s * NS_PER_S
            if engine.stop_reason is None and last.start_ns <= time.time_ns() < end_ns:
                rate = last.planned.rate_per_s
        return {
            "event": "metrics",
            "sent": sum(s.sent for s in states),
            "ok": sum(s.ok for s in states),
            "failures": sum(s.failures for s in states),
            "inflight_cap_refused": sum(s.inflight_cap_refused for s in states),
            "timed_out": engine.timed_out,
            "rows_written": engine.writer.rows_written,
            "inflight": engine.inflight,
            "step": step,
            "target_rate_per_s": rate,
            "lag": self.lag.doc(),
            "publish_latency": self.publish_latency.doc(),
        }


class SenderMetricsService:
    """What `--sender-metrics-port` and `--metrics-lines` ask of one sender, started and
    stopped around its run (`start`, then `close` after the engine's last flush)."""

    def __init__(self, engine: Engine, knobs: SendKnobs, lines: bool, emit: Emit) -> None:
        self.figures = LiveFigures(engine)
        self.knobs = knobs
        self.lines = lines
        self.emit = emit
        self._registry = registry(self.figures.now)
        self._server: asyncio.Server | None = None
        self._printing: asyncio.Task[None] | None = None
        self._open_connections = 0
        engine.records.observe = self.figures.observe

    async def start(self) -> None:
        port, host = self.knobs.metrics_port, self.knobs.metrics_host
        if port is not None:
            try:
                self._server = await asyncio.start_server(
                    self._answer, host, port, limit=_REQUEST_HEAD_LIMIT_BYTES, reuse_address=True
                )
            except OSError as exc:  # the run matters more than its live figures: go on
                why = f"/metrics not served: cannot listen on {host}:{port}: {exc.strerror}"
                self.emit({"event": "warning", "message": why})
            else:
                self.emit(metrics_listening(host, self._server.sockets[0].getsockname()[1]))
        if self.lines:
            self._printing = asyncio.get_running_loop().create_task(self._print_forever())

    async def close(self) -> None:
        """The last line (every record flushed by now), and no more scrapes."""
        if self._printing is not None:
            self._printing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._printing
            self.emit(self.figures.now())
        if self._server is not None:
            self._server.close()

    async def _print_forever(self) -> None:
        while True:
            await asyncio.sleep(_LINE_INTERVAL_S)
            self.emit(self.figures.now())

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One scrape: GET /metrics answered, the connection closed (Prometheus reconnects)."""
        if self._open_connections >= MAX_CONNECTIONS:
            writer.write(response("503 Service Unavailable", "text/plain", _BUSY))
            writer.close()  # what is written is still sent: the socket's buffer takes it
            return
        self._open_connections += 1
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CLIENT_TIMEOUT_S)
            method, path, accept = request_parts(head)
            if method in ("GET", "HEAD") and path == METRICS_PATH:
                body, content_type = exposition(self._registry, accept)
                status = "200 OK"
            else:
                body, content_type, status = _USAGE, "text/plain; charset=utf-8", "404 Not Found"
            writer.write(response(status, content_type, body, head_only=method == "HEAD"))
            await asyncio.wait_for(writer.drain(), CLIENT_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            pass  # a scraper that went away, stalled or sent no HTTP: nothing to answer
        finally:
            self._open_connections -= 1
            writer.close()


def request_parts(head: bytes) -> tuple[str, str, str | None]:
    """Method, path (no query) and Accept header of a request's head ("" for what is missing)."""
    request_line, *headers = head.decode("latin-1").split("\r\n")
    method, _, rest = request_line.partition(" ")
    path = rest.partition(" ")[0].partition("?")[0]
    accept = None
    for header in headers:
        name, _, value = header.partition(":")
        if name.strip().lower() == "accept":
            accept = value.strip()
    return method, path, accept


def response(status: str, content_type: str, body: bytes, head_only: bool = False) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + (b"" if head_only else body)
