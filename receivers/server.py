"""The timestamping receiver: an asyncio protocol on uvloop with the httptools parser.

A bare protocol rather than a framework, because the stamp must be taken before anything else
happens to a request: `data_received` reads the clock once, before the parser runs, and the
request that begins in that chunk is stamped with it. Everything after that (header matching,
identification, the 202) is off the measured path.

Every request ends in an answer and never in a traceback: what the receiver will not take is
refused with the status that says why (see `receivers.limits`) and counted in /stats.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from contract.receiverlines import ReceiverStats
from contract.records import RECEIVED_FIELDS
from receivers.connection import Connection
from receivers.identify import MAX_KNOWN_PATHS, identify, subscriber_path
from receivers.limits import Limits
from receivers.metrics import ReceiverMetrics
from receivers.state import ServerState
from runtime.parquet import PartWriter, Row, record_roll_s, slices

_SWEEP_INTERVAL_S = 0.5


def _shifted_clock(shift_ns: int) -> Callable[[], int]:
    if not shift_ns:
        return time.time_ns

    def now_ns() -> int:
        return time.time_ns() + shift_ns

    return now_ns


class Receiver:
    """Accepts events on host:port and writes one received record per delivery under out_dir."""

    def __init__(
        self,
        out_dir: Path,
        name: str = "receiver",
        host: str = "127.0.0.1",
        port: int = 0,
        flush_interval_s: float = 1.0,
        limits: Limits | None = None,
        clock_shift_ns: int = 0,
    ) -> None:
        self.name = name
        # A shifted clock simulates a host whose clock is off, to test the correction.
        self.clock_shift_ns = clock_shift_ns
        self.now_ns = _shifted_clock(clock_shift_ns)
        self.host = host
        self.port = port
        self.flush_interval_s = flush_interval_s
        self.limits = limits or Limits()
        # Rolled every $EVBENCH_RECORD_ROLL_S (runtime.parquet): a day leaves ~1,440 files.
        self.writer = PartWriter(out_dir, RECEIVED_FIELDS, prefix=name, roll_s=record_roll_s())
        self.state: ServerState[Connection] = ServerState(self.limits, self.now_ns)
        self.stats = self.state.stats
        self._server: asyncio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._writing: asyncio.Future[object] | None = None
        self._writing_rows: list[Row] = []  # what the write in flight holds, if it fails
        self._failing: str | None = None  # why writing fails, while it does (said once)
        # Made now, not at the first scrape: loading the Prometheus client then would hold up
        # the loop, and so the stamps of the events arriving meanwhile, mid-run.
        self._metrics = ReceiverMetrics(self.state, lambda: len(self.writer.rows))
        self._paths: dict[bytes, str] = {}  # request target -> subscriber path (_subscriber)

    def metrics_text(self) -> tuple[bytes, bytes]:
        """GET /metrics: the counters in Prometheus' text format, and its content type
        (receivers.metrics)."""
        return self._metrics.exposition()

    def stats_now(self) -> ReceiverStats:
        """GET /stats: the counters, and the level of event bytes being received now."""
        return {**self.stats.doc(), "buffered_bytes": self.state.buffered_bytes}

    def record(self, conn: Connection) -> None:
        body = b"".join(conn.body_parts)
        event = identify(conn, body)
        stats = self.stats
        stats.received += 1
        stats.received_bytes += conn.body_bytes
        if stats.first_received_ns is None:
            stats.first_received_ns = conn.started_ns
        stats.last_received_ns = conn.started_ns
        # A ReceivedRow, built as a plain tuple: the named type costs 0.25 µs per event here.
        self.writer.rows.append(
            (
                event.event_id,
                conn.started_ns,
                self.name,
                conn.body_bytes,
                event.ce_id,
                event.ce_type,
                event.ce_source,
                self._subscriber(conn.url_parts),
            )
        )

    def _subscriber(self, url_parts: list[bytes]) -> str:
        """The path a delivery came to (its subscription's, under fan-out), as recorded: known
        paths from a small table, so the common case costs a lookup, not a decode per event."""
        raw = url_parts[0] if len(url_parts) == 1 else b"".join(url_parts)
        found = self._paths.get(raw)
        if found is None:
            found = subscriber_path(raw)
            if len(self._paths) < MAX_KNOWN_PATHS:  # a client sending endless paths: decoded
                self._paths[raw] = found
        return found

    def records_dir(self) -> Path:
        return self.writer.directory

    def evict_fresh(self) -> bool:
        """Make room for a new connection at the cap by closing the oldest one that has not
        begun a request (a client that opens sockets and sends nothing must not lock others
        out); False when every connection is in a request or between requests."""
        fresh = self.state.fresh
        oldest = next(iter(fresh), None)
        if oldest is None:
            return False
        del fresh[oldest]
        oldest.evict()
        return True

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self.state, self),
            self.host,
            self.port,
            backlog=4096,
            reuse_address=True,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        await loop.run_in_executor(None, self.writer.warm_up)
        self._tasks = [loop.create_task(self._flush_forever()), loop.create_task(self._sweep())]

    async def _sweep(self) -> None:
        """Close connections past their phase's deadline (see `receivers.limits`)."""
        while True:
            await asyncio.sleep(_SWEEP_INTERVAL_S)
            now = time.monotonic()
            for conn in [c for c in self.state.connections if c.deadline < now]:
                conn.expire()

    async def _flush_forever(self) -> None:
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        while True:
            # Fixed-rate ticks, so slow writes do not stretch the interval past a second.
            next_tick += self.flush_interval_s
            await asyncio.sleep(max(0.0, next_tick - loop.time()))
            await self._flush_once()

    async def _flush_once(self) -> None:
        rows = self.writer.take()
        if not rows:
            return
        try:
            batches = []
            for part in slices(rows):
                # A row that cannot be encoded goes to the quarantine file, never back to the
                # buffer: one bad row must not hold every later one hostage.
                batches.append(self.writer.batch(part))
                await asyncio.sleep(0)  # arrivals are read (and stamped) between slices
        except asyncio.CancelledError:
            self.writer.rows[:0] = rows  # shutting down: close() writes them
            raise
        except OSError as exc:  # the quarantine file could not be written
            self._write_failed(rows, exc, self.writer.quarantine_path)
            return
        loop = asyncio.get_running_loop()
        self._writing = loop.run_in_executor(None, self.writer.write_batches, batches)
        self._writing_rows = rows
        try:
            # Shielded: cancelling the flusher at shutdown must not abandon rows mid-write.
            # Cancelled here, the write stays in `_writing` for close() to settle.
            await asyncio.shield(self._writing)
        except Exception as exc:
            self._write_failed(rows, exc)
        else:
            self._write_resumed()
        # Settled here, rows put back or written: close() must not put them back again.
        self._writing = None
        self._writing_rows = []
        self._count_written()

    def _count_written(self) -> None:
        self.stats.rows_written = self.writer.rows_written
        self.stats.parts_written = self.writer.parts_written
        self.stats.quarantined = self.writer.rows_quarantined

    def _write_failed(self, rows: list[Row], exc: Exception, where: Path | None = None) -> None:
        # Keep the rows for the next tick rather than lose them (disk full, say).
        self.stats.write_errors += 1
        self.writer.rows[:0] = rows
        reason = _reason(exc)
        if reason != self._failing:  # said once per cause, not every tick of a full disk
            self._failing = reason
            print(
                f"receiver: cannot write records to {where or self.writer.directory}: {reason}; "
                f"keeping them in memory, retrying every {self.flush_interval_s:g} s",
                file=sys.stderr,
                flush=True,
            )

    def _write_resumed(self) -> None:
        if self._failing is not None:
            self._failing = None
            print(f"receiver: writing records to {self.writer.directory} again", file=sys.stderr)

    async def close(self) -> None:
        """Stop accepting, write every row still in memory; unwritten rows are counted."""
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()
        # Let a flush cancelled mid-slicing put its rows back before they are taken below.
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._writing is not None:  # its flusher was cancelled mid-write, so not told
            await asyncio.wait([self._writing])
            if self._writing.exception() is not None:
                self.writer.rows[:0] = self._writing_rows
            self._writing = None
            self._writing_rows = []
        rows = self.writer.take()
        try:
            self.writer.write(rows)
        except Exception as exc:  # reported in the final stats and exit code
            self.stats.unwritten_rows = len(rows)
            where = self.writer.directory
            print(
                f"receiver: {len(rows)} records could not be written to {where}: {_reason(exc)}",
                file=sys.stderr,
            )
        self.writer.roll()  # what the open roll holds, into its file (never raises)
        self._count_written()


def _reason(exc: Exception) -> str:
    """What went wrong in a few words: the system's for an OSError (pyarrow's own message
    repeats it inside a longer one), the message otherwise."""
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno)
    return str(exc) or type(exc).__name__
