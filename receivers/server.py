"""The timestamping receiver: an asyncio protocol on uvloop with the httptools parser.

A bare protocol rather than a framework, because the stamp must be taken before anything else
happens to a request: `data_received` reads the clock once, before the parser runs, and the
request that begins in that chunk is stamped with it. Everything after that (header matching,
identification, the 202) is off the measured path.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httptools

from evbench.parquet import PartWriter, slices
from evbench.records import EVENT_ID_HEADER, PAYLOAD_ID_PREFIX, RECEIVED_FIELDS

_ACCEPTED = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
_MAX_BODY_BYTES = 16 * 1024 * 1024
_STRUCTURED = b"application/cloudevents+json"

# Request headers the receiver keeps, mapped to connection attributes.
_KEPT_HEADERS = {
    EVENT_ID_HEADER.encode(): "h_evbenchid",
    b"ce-id": "h_ce_id",
    b"ce-type": "h_ce_type",
    b"ce-source": "h_ce_source",
    b"ce-specversion": "h_ce_specversion",
    b"content-type": "h_content_type",
}


@dataclass
class ReceiverStats:
    received: int = 0
    malformed: int = 0
    not_found: int = 0
    received_bytes: int = 0
    connections: int = 0
    open_connections: int = 0
    rows_written: int = 0
    parts_written: int = 0
    write_errors: int = 0
    first_received_ns: int | None = None
    last_received_ns: int | None = None


class Malformed(Exception):
    """A request that is not a CloudEvent this receiver can identify; answered with 400."""


def _response(
    status: str, body: bytes, content_type: bytes = b"text/plain", close: bool = False
) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type.decode()}\r\n"
        f"Content-Length: {len(body)}\r\n"
    )
    if close:
        head += "Connection: close\r\n"
    return head.encode() + b"\r\n" + body


def payload_event_id(body: bytes) -> str | None:
    """The id the sender put in the payload: a fast prefix match, then any JSON object."""
    if body.startswith(PAYLOAD_ID_PREFIX):
        end = body.find(b'"', len(PAYLOAD_ID_PREFIX))
        if end > len(PAYLOAD_ID_PREFIX):
            return body[len(PAYLOAD_ID_PREFIX) : end].decode("utf-8", "replace")
    if body[:1] == b"{":
        try:
            doc = json.loads(body)
        except ValueError:
            return None
        value = doc.get("evbenchid") if isinstance(doc, dict) else None
        return str(value) if value is not None else None
    return None


def identify(conn: _Connection, body: bytes) -> tuple[str, str | None, str | None, str | None]:
    """(event_id, ce_id, ce_type, ce_source) of one request, or Malformed.

    Order: the ce-evbenchid extension, then the id in the payload, then ce-id. The payload comes
    before ce-id because intermediaries such as a KafkaSource replace ce-id with their own
    (partition/offset) while the payload still carries ours.
    """
    ctype = conn.h_content_type or b""
    if ctype.split(b";", 1)[0].strip().lower() == _STRUCTURED:
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise Malformed(f"structured CloudEvent is not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise Malformed("structured CloudEvent is not a JSON object")
        missing = [k for k in ("specversion", "id", "source", "type") if k not in doc]
        if missing:
            raise Malformed(f"structured CloudEvent lacks {', '.join(missing)}")
        data = doc.get("data")
        event_id = doc.get("evbenchid") or (
            data.get("evbenchid") if isinstance(data, dict) else None
        )
        return str(event_id or doc["id"]), str(doc["id"]), str(doc["type"]), str(doc["source"])

    missing = [
        name
        for name, value in (
            ("ce-specversion", conn.h_ce_specversion),
            ("ce-id", conn.h_ce_id),
            ("ce-source", conn.h_ce_source),
            ("ce-type", conn.h_ce_type),
        )
        if not value
    ]
    if missing:
        raise Malformed(f"binary-mode CloudEvent lacks {', '.join(missing)}")
    ce_id = conn.h_ce_id.decode("utf-8", "replace")
    if conn.h_evbenchid:
        event_id = conn.h_evbenchid.decode("utf-8", "replace")
    else:
        event_id = payload_event_id(body) or ce_id
    return (
        event_id,
        ce_id,
        conn.h_ce_type.decode("utf-8", "replace"),
        conn.h_ce_source.decode("utf-8", "replace"),
    )


class _Connection(asyncio.Protocol):
    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.chunk_ns = 0
        self._reset()

    def _reset(self) -> None:
        self.started_ns = 0
        self.url = b""
        self.body_parts: list[bytes] = []
        self.body_bytes = 0
        self.h_evbenchid: bytes | None = None
        self.h_ce_id: bytes | None = None
        self.h_ce_type: bytes | None = None
        self.h_ce_source: bytes | None = None
        self.h_ce_specversion: bytes | None = None
        self.h_content_type: bytes | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.receiver.stats.connections += 1
        self.receiver.stats.open_connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.receiver.stats.open_connections -= 1
        self.transport = None

    def data_received(self, data: bytes) -> None:
        # The one clock read that matters: before the parser sees a byte.
        self.chunk_ns = time.time_ns()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._reject(f"bad HTTP request: {exc}")

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._reset()
        self.started_ns = self.chunk_ns

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        attr = _KEPT_HEADERS.get(name.lower())
        if attr is not None:
            setattr(self, attr, value)

    def on_body(self, body: bytes) -> None:
        self.body_bytes += len(body)
        if self.body_bytes > _MAX_BODY_BYTES:
            raise httptools.HttpParserError("body larger than 16 MiB")
        self.body_parts.append(body)

    def on_message_complete(self) -> None:
        if self.transport is None:
            return
        method = self.parser.get_method()
        path = self.url.split(b"?", 1)[0]
        if method == b"POST":
            try:
                self.receiver.record(self)
            except Malformed as exc:
                self.receiver.stats.malformed += 1
                self._respond(_response("400 Bad Request", str(exc).encode() + b"\n"))
                return
            self._respond(_ACCEPTED)
        elif method == b"GET" and path == b"/healthz":
            self._respond(_response("200 OK", b"ok\n"))
        elif method == b"GET" and path == b"/stats":
            body = json.dumps(asdict(self.receiver.stats)).encode()
            self._respond(_response("200 OK", body, b"application/json"))
        else:
            self.receiver.stats.not_found += 1
            self._respond(
                _response("404 Not Found", b"POST events to any path; GET /healthz, /stats\n")
            )

    def _respond(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)
        if not self.parser.should_keep_alive():
            self.transport.close()

    def _reject(self, reason: str) -> None:
        self.receiver.stats.malformed += 1
        if self.transport is not None:
            self.transport.write(_response("400 Bad Request", reason.encode() + b"\n", close=True))
            self.transport.close()


class Receiver:
    """Accepts events on host:port and writes one received record per delivery under out_dir."""

    def __init__(
        self,
        out_dir: Path,
        name: str = "receiver",
        host: str = "127.0.0.1",
        port: int = 0,
        flush_interval_s: float = 1.0,
    ) -> None:
        self.name = name
        self.host = host
        self.port = port
        self.flush_interval_s = flush_interval_s
        self.writer = PartWriter(out_dir, RECEIVED_FIELDS, prefix=name)
        self.stats = ReceiverStats()
        self._server: asyncio.Server | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._writing: asyncio.Future[object] | None = None

    def record(self, conn: _Connection) -> None:
        body = b"".join(conn.body_parts)
        event_id, ce_id, ce_type, ce_source = identify(conn, body)
        stats = self.stats
        stats.received += 1
        stats.received_bytes += conn.body_bytes
        if stats.first_received_ns is None:
            stats.first_received_ns = conn.started_ns
        stats.last_received_ns = conn.started_ns
        self.writer.rows.append(
            (event_id, conn.started_ns, self.name, conn.body_bytes, ce_id, ce_type, ce_source)
        )

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), self.host, self.port, backlog=4096, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        await loop.run_in_executor(None, self.writer.warm_up)
        self._flusher = loop.create_task(self._flush_forever())

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
                batches.append(self.writer.batch(part))
                await asyncio.sleep(0)  # arrivals are read (and stamped) between slices
        except asyncio.CancelledError:
            self.writer.rows[:0] = rows  # shutting down: close() writes them
            raise
        except Exception as exc:
            self._write_failed(rows, exc)
            return
        loop = asyncio.get_running_loop()
        self._writing = loop.run_in_executor(None, self.writer.write_batches, batches)
        try:
            # Shielded: cancelling the flusher at shutdown must not abandon rows mid-write.
            await asyncio.shield(self._writing)
        except Exception as exc:
            self._write_failed(rows, exc)
        self.stats.rows_written = self.writer.rows_written
        self.stats.parts_written = self.writer.parts_written

    def _write_failed(self, rows: list[tuple], exc: Exception) -> None:
        # Keep the rows for the next tick rather than lose them (disk full, say).
        self.stats.write_errors += 1
        self.writer.rows[:0] = rows
        print(f"receiver: writing records failed, will retry: {exc}", file=sys.stderr)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._flusher is not None:
            self._flusher.cancel()
        if self._writing is not None:
            await asyncio.wait([self._writing])
        rows = self.writer.take()
        self.writer.write(rows)
        self.stats.rows_written = self.writer.rows_written
        self.stats.parts_written = self.writer.parts_written
