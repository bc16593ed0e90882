"""One client connection of the receiver: an asyncio protocol with the httptools parser.

`data_received` reads the clock once, before the parser runs, and the request that begins in
that chunk is stamped with it. Every request ends in an answer and never in a traceback: what
the receiver will not take is refused with the status that says why (see `receivers.limits`)
and counted in its stats.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING, Protocol, cast

import httptools

from contract.receiverlines import ReceiverStats
from contract.records import EVENT_ID_HEADER
from receivers.identify import InvalidId, Malformed
from receivers.state import ServerState
from runtime import recordshare

if TYPE_CHECKING:
    from pathlib import Path

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_USAGE = b"POST events to any path; GET /healthz, /stats, /metrics, /clock, /records\n"
_CLOSE_GRACE_S = 2.0
# Reads of one body kept as they came; a body trickled in more reads than this goes on into one
# buffer, so it holds its bytes and not an object (~40 bytes) per read.
_BODY_PARTS_KEPT = 64

# Request headers the receiver keeps, mapped to connection attributes.
_KEPT_HEADERS = {
    EVENT_ID_HEADER.encode(): "h_evbenchid",
    b"ce-id": "h_ce_id",
    b"ce-type": "h_ce_type",
    b"ce-source": "h_ce_source",
    b"ce-specversion": "h_ce_specversion",
    b"content-type": "h_content_type",
    b"content-length": "h_content_length",
    b"expect": "h_expect",
}


class Refuse(Exception):
    """Raised inside a parser callback: answer `status`, close the connection."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class Sink(Protocol):
    """What a connection hands on, and asks of, its receiver (receivers.server.Receiver)."""

    def record(self, conn: Connection) -> None:
        """Keep the event `conn` has just read whole (Malformed: it is not one)."""
        ...

    def evict_fresh(self) -> bool:
        """Close the oldest connection that has not begun a request (False: none)."""
        ...

    def stats_now(self) -> ReceiverStats: ...

    def metrics_text(self) -> tuple[bytes, bytes]: ...

    def records_dir(self) -> Path:
        """Where the receiver's record files are (GET /records)."""
        ...


class Connection(asyncio.Protocol):
    """One client connection: its requests parsed, stamped, answered and handed to the
    receiver (its sink) to record."""

    def __init__(self, state: ServerState[Connection], sink: Sink) -> None:
        self.state = state
        self.sink = sink
        self.limits = state.limits
        self.now_ns = state.now_ns
        self.parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.chunk_ns = 0
        self.chunk_mono = time.monotonic()
        # Bytes of the current request before its headers end, counted before parsing: the
        # parser concatenates a header's pieces, so an endless header must be cut off unparsed.
        self.reading_headers = True
        self.header_bytes = 0
        self.header_tail = b""
        # Bytes read since the headers ended: what is not body in them (chunk framing, the
        # trailer) is held to the header limit too (see _framing_too_long).
        self.after_header_bytes = 0
        self.in_request = False
        self.accepted = False
        self.closing = False  # refused, timed out or failed: nothing more is read
        # Until its first request begins, a connection is held for the idle timeout, the limit
        # every answer tells (a client's spare connection may be written to at any moment up
        # to it); silent ones cannot fill the cap: there they make room (evict_fresh).
        self.fresh = True
        self.deadline = self.chunk_mono + self.limits.idle_timeout_s
        self._reset()

    def _reset(self) -> None:
        self.started_ns = 0
        self.url_parts: list[bytes] = []
        self.url_bytes = 0
        self.body_parts: list[bytes | bytearray] = []
        self.body_bytes = 0
        self.upgrade = False
        self.h_evbenchid: bytes | None = None
        self.h_ce_id: bytes | None = None
        self.h_ce_type: bytes | None = None
        self.h_ce_source: bytes | None = None
        self.h_ce_specversion: bytes | None = None
        self.h_content_type: bytes | None = None
        self.h_content_length: bytes | None = None
        self.h_expect: bytes | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (create_server's): asyncio types the callback for any kind.
        self.transport = stream = cast(asyncio.Transport, transport)
        stats = self.state.stats
        at_cap = stats.open_connections >= self.limits.max_connections
        if at_cap and not self.sink.evict_fresh():
            stats.refused_connections += 1
            self.closing = True
            body = b"too many connections\n"
            stream.write(self._response("503 Service Unavailable", body, close=True))
            stream.close()
            return
        self.accepted = True
        stats.connections += 1
        stats.open_connections += 1
        self.state.connections.add(self)
        self.state.fresh[self] = None
        # Answers queue up to this much before pause_writing() stops reading from the client.
        stream.set_write_buffer_limits(high=self.limits.max_queued_answer_bytes)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.accepted:
            self.state.stats.open_connections -= 1
            self.state.connections.discard(self)
            self.state.fresh.pop(self, None)
            self._release_body()
        # The parser holds this protocol and the protocol the parser: break the cycle now rather
        # than leave both (and a request's buffered body) to the cyclic garbage collector.
        self.parser = None
        self.transport = None

    def pause_writing(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        # The one clock read that matters: before the parser sees a byte.
        self.chunk_ns = self.now_ns()
        self.chunk_mono = time.monotonic()
        if self.closing:  # (no data comes after connection_lost, which drops the parser)
            return
        if self.reading_headers and self._headers_too_long(data):
            self._refuse(
                "431 Request Header Fields Too Large",
                f"headers longer than {self.limits.max_header_bytes} bytes",
            )
            return
        in_body = not self.reading_headers
        if in_body:
            self.after_header_bytes += len(data)
        assert self.parser is not None  # dropped only by connection_lost
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, Refuse):
                self._refuse(cause.status, str(cause))
            else:
                self._internal_error(cause or exc)
        except httptools.HttpParserUpgrade:
            self._refuse("501 Not Implemented", "protocol upgrades and CONNECT are not supported")
        except httptools.HttpParserError as exc:
            self._refuse("400 Bad Request", f"bad HTTP request: {exc}")
        except Exception as exc:  # one bad request must not cost a traceback
            self._internal_error(exc)
        else:
            if in_body and self._framing_too_long():
                self._refuse(
                    "431 Request Header Fields Too Large",
                    f"trailer and chunk framing longer than {self.limits.max_header_bytes} bytes",
                )

    def _headers_too_long(self, data: bytes) -> bool:
        """Whether the headers run past the limit, judged to within one read: the header bytes
        before this chunk plus this chunk's up to the blank line that ends them."""
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            too_long = self.header_bytes + end > self.limits.max_header_bytes
        else:
            self.header_bytes += len(data)
            # The blank line may straddle two reads: then the rest of this one is body.
            split = b"\r\n\r\n" in self.header_tail + data[:3]
            too_long = self.header_bytes > self.limits.max_header_bytes and not split
        self.header_tail = data[-3:]
        return too_long

    def _framing_too_long(self) -> bool:
        """Whether the bytes of this request's body phase that are not body (chunk sizes and
        extensions, the trailer after the last chunk) run past the header limit: the trailer
        is headers, and the parser gathers a header's pieces into one value, so an endless one
        would cost memory and copying without bound. Judged after the read is parsed: within
        one read of the limit. (The read that ended the headers is not counted, its body is.)"""
        if self.reading_headers or self.closing:  # the request ended, or was refused
            return False
        return self.after_header_bytes - self.body_bytes > self.limits.max_header_bytes

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._reset()
        if self.fresh:
            self.fresh = False
            self.state.fresh.pop(self, None)
        self.in_request = True
        self.started_ns = self.chunk_ns
        self.deadline = self.chunk_mono + self.limits.header_timeout_s

    def on_url(self, url: bytes) -> None:
        self.url_bytes += len(url)
        if self.url_bytes > self.limits.max_url_bytes:
            raise Refuse("414 URI Too Long", f"URL longer than {self.limits.max_url_bytes} bytes")
        self.url_parts.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        attr = _KEPT_HEADERS.get(name.lower())
        if attr is not None:
            setattr(self, attr, value)

    def on_headers_complete(self) -> None:
        self.reading_headers = False
        self.after_header_bytes = 0
        self.deadline = self.chunk_mono + self.limits.body_timeout_s
        assert self.parser is not None
        if self.parser.should_upgrade():
            self.upgrade = True  # answered 501 when the parser stops at the upgrade
            return
        length = self.h_content_length
        # Fewer digits than the limit has is under it: no int() on the hot path. (The parser
        # has checked it is a number.)
        if (
            length is not None
            and len(length) >= self.state.body_limit_digits
            and int(length) > self.limits.max_body_bytes
        ):
            raise Refuse("413 Content Too Large", self._body_limit())
        if self.h_expect is not None:
            if self.h_expect.lower() != b"100-continue":
                raise Refuse("417 Expectation Failed", "only Expect: 100-continue is understood")
            assert self.transport is not None
            self.transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        self.body_bytes += len(body)
        self.state.buffered_bytes += len(body)
        if self.body_bytes > self.limits.max_body_bytes:
            raise Refuse("413 Content Too Large", self._body_limit())
        if self.state.buffered_bytes > self.limits.max_buffered_bytes:
            raise Refuse("503 Service Unavailable", "too many event bytes in flight; retry")
        parts = self.body_parts
        if len(parts) < _BODY_PARTS_KEPT:
            parts.append(body)
        elif isinstance(parts[-1], bytearray):
            parts[-1] += body
        else:
            parts.append(bytearray(body))

    def on_message_complete(self) -> None:
        self.reading_headers = True
        self.header_bytes = 0
        self.in_request = False
        self.deadline = self.chunk_mono + self.limits.idle_timeout_s
        if self.transport is None or self.upgrade or self.closing:
            return
        assert self.parser is not None
        self._answer(self.parser.get_method())  # on an exception, _internal_error releases
        self.state.buffered_bytes -= self.body_bytes
        self.body_bytes = 0
        self.body_parts = []  # an idle connection holds no body

    def _answer(self, method: bytes) -> None:
        sink, stats = self.sink, self.state.stats
        head = method == b"HEAD"
        path = b"".join(self.url_parts).split(b"?", 1)[0]
        if method == b"POST":
            try:
                sink.record(self)
            except Malformed as exc:
                stats.malformed += 1
                stats.invalid_ids += isinstance(exc, InvalidId)
                self._respond(self._response("400 Bad Request", str(exc).encode() + b"\n"))
                return
            self._respond(self.state.accepted)
        elif method in (b"GET", b"HEAD") and path == b"/healthz":
            self._respond(self._response("200 OK", b"ok\n", head=head))
        elif method == b"GET" and path == b"/clock":
            # An NTP-style exchange (runtime.clocks): when the request's first bytes
            # arrived and when this answer leaves, on the clock that stamps the records.
            body = b'{"received_ns":%d,"replied_ns":%d}' % (self.started_ns, self.now_ns())
            self._respond(self._response("200 OK", body, b"application/json"))
        elif method == b"GET" and (path == b"/records" or path.startswith(b"/records/")):
            self._records(path.decode("latin-1"))
        elif method in (b"GET", b"HEAD") and path == b"/stats":
            body = json.dumps(sink.stats_now()).encode()
            self._respond(self._response("200 OK", body, b"application/json", head=head))
        elif method in (b"GET", b"HEAD") and path == b"/metrics":
            body, content_type = sink.metrics_text()
            self._respond(self._response("200 OK", body, content_type, head=head))
        else:
            stats.not_found += 1
            self._respond(self._response("404 Not Found", _USAGE, head=head))

    def _records(self, path: str) -> None:
        """This receiver's complete record files, for `evbench collect` (after a run: a file is
        read whole, on the loop)."""
        directory = self.sink.records_dir()
        if path == recordshare.PREFIX:
            body = json.dumps(recordshare.listing(directory)).encode()
            self._respond(self._response("200 OK", body, b"application/json"))
        elif (found := recordshare.resolve(directory, path)) is not None:
            self._respond(self._response("200 OK", found.read_bytes(), b"application/octet-stream"))
        else:
            self.state.stats.not_found += 1
            self._respond(self._response("404 Not Found", _USAGE))

    def _response(
        self,
        status: str,
        body: bytes,
        content_type: bytes = b"text/plain",
        close: bool = False,
        head: bool = False,
    ) -> bytes:
        """An answer; for HEAD the same headers without the body."""
        lines = [
            f"HTTP/1.1 {status}",
            f"Content-Type: {content_type.decode()}",
            f"Content-Length: {len(body)}",
            "Connection: close" if close else self.state.keep_alive,
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if head else body)

    def _body_limit(self) -> str:
        return f"event body larger than {self.limits.max_body_bytes} bytes"

    def _release_body(self) -> None:
        self.state.buffered_bytes -= self.body_bytes
        self.body_bytes = 0
        self.body_parts = []

    def _respond(self, data: bytes) -> None:
        assert self.transport is not None and self.parser is not None
        self.transport.write(data)
        if not self.parser.should_keep_alive():
            # Requests pipelined behind this one are not processed (RFC 9112 9.6).
            self._closing_now()
            self.transport.close()

    def _refuse(self, status: str, reason: str) -> None:
        """Answer, close, and count by status. The parser is unusable after an error anyway."""
        stats = self.state.stats
        if status.startswith("400"):
            stats.malformed += 1
        else:
            code = status.split(" ", 1)[0]
            stats.refused[code] = stats.refused.get(code, 0) + 1
        self._release_body()
        self._closing_now()
        if self.transport is not None:
            self.transport.write(self._response(status, reason.encode() + b"\n", close=True))
            self.transport.close()

    def _closing_now(self) -> None:
        """Read nothing more; the sweeper aborts the connection if it is still open after a
        grace period (time for the client to read the last answer)."""
        self.closing = True
        self.deadline = time.monotonic() + _CLOSE_GRACE_S

    def _internal_error(self, exc: BaseException) -> None:
        self.state.stats.internal_errors += 1
        print(f"receiver: internal error on a request: {exc!r}", file=sys.stderr)
        self._release_body()
        self._closing_now()
        if self.transport is not None:
            body = b"internal error in the receiver\n"
            self.transport.write(self._response("500 Internal Server Error", body, close=True))
            self.transport.close()

    def evict(self) -> None:
        """Closed to make room at the connection cap: it has not begun a request, so nothing
        is lost but a socket its client opened and never used."""
        self.state.stats.idle_closed += 1
        self._closing_now()
        if self.transport is not None:
            self.transport.abort()  # its descriptor is free for the newcomer at once

    def expire(self) -> None:
        """Past the deadline of the current phase: 408 for a stalled request, else just close.
        A connection still open a grace period after closing (its client reads nothing, so the
        queued answers never drain) is aborted."""
        if self.transport is None:
            return
        if self.closing:
            self.transport.abort()
            return
        self._closing_now()
        if self.in_request:
            self.state.stats.timed_out += 1
            self._release_body()
            answer = self._response("408 Request Timeout", b"request too slow\n", close=True)
            self.transport.write(answer)
        else:
            self.state.stats.idle_closed += 1
        self.transport.close()
