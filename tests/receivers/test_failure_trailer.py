"""What follows a chunked body's last chunk is headers, and is held to the header limit
(issue 33, item 7): an endless trailer, or a body cut into tiny chunks, is refused 431 after
about max_header_bytes, and other clients' events are taken meanwhile."""

from __future__ import annotations

import asyncio
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contract.records import RECEIVED_FIELDS
from receivers.server import Receiver
from runtime.parquet import read_parts
from tests.receivers.rxproc import Rx, post_events, receiver_process

pytestmark = pytest.mark.e2e

_MAX_HEADER_BYTES = 16 * 1024
# What a client may have pushed before it hears the refusal: the limit, one read the receiver
# takes whole, and loopback's socket buffers both ways (a few MB); far below what an unlimited
# trailer takes in the 30 s body timeout.
_SENT_BEFORE_REFUSAL_BYTES = 16 * 1024 * 1024
_CHUNKED_HEAD = (
    b"POST / HTTP/1.1\r\nHost: r\r\nce-specversion: 1.0\r\nce-type: t\r\nce-source: s\r\n"
    b"ce-id: hostile\r\nTransfer-Encoding: chunked\r\n\r\n"
)


@pytest.fixture
def rx(tmp_path: Path) -> Iterator[Rx]:
    flags = ["--max-header-bytes", str(_MAX_HEADER_BYTES)]
    with receiver_process(tmp_path / "received", tmp_path / "rx.log", *flags) as running:
        yield running


def _push_until_answered(rx: Rx, start: bytes, more: bytes) -> tuple[bytes, int]:
    """Send `start`, then `more` again and again until the receiver answers or closes; a
    valid event is posted by another client meanwhile. The answer (b"" for a close without
    one) and the bytes sent."""
    sent = 0
    posted = False
    deadline = time.monotonic() + 60
    with socket.create_connection(("127.0.0.1", rx.port), timeout=10) as sock:
        sock.sendall(start)
        while sent < _SENT_BEFORE_REFUSAL_BYTES and time.monotonic() < deadline:
            if select.select([sock], [], [], 0)[0]:
                break
            try:
                sent += sock.send(more)
            except (BrokenPipeError, ConnectionResetError):
                break
            if not posted:  # while the hostile request is under way
                with httpx.Client(timeout=10) as client:
                    post_events(client, rx.url, ["meanwhile"])
                posted = True
        try:
            answer = sock.recv(4096)
        except (ConnectionResetError, TimeoutError):
            answer = b""
    assert posted, "the other client's event was not sent"
    return answer, sent


def _assert_refused(answer: bytes, sent: int, rx: Rx) -> None:
    assert sent < _SENT_BEFORE_REFUSAL_BYTES, f"{sent} bytes taken without an answer"
    assert answer.startswith(b"HTTP/1.1 431") or answer == b"", answer[:200]
    stats = rx.stats()
    assert stats["received"] == 1  # the other client's event, and nothing of the hostile one
    assert stats["refused"].get("431") == 1


def test_an_endless_trailer_is_refused_at_the_header_limit(rx: Rx):
    start = _CHUNKED_HEAD + b"2\r\n{}\r\n0\r\nX-T: "
    answer, sent = _push_until_answered(rx, start, b"a" * 65536)
    _assert_refused(answer, sent, rx)


def test_a_body_in_tiny_chunks_is_refused_at_the_header_limit(rx: Rx):
    """One-byte chunks: five bytes of framing per byte of body, an object per chunk."""
    answer, sent = _push_until_answered(rx, _CHUNKED_HEAD + b"1\r\n{\r\n", b"1\r\na\r\n" * 4096)
    _assert_refused(answer, sent, rx)


def test_a_body_trickled_byte_by_byte_holds_one_buffer(tmp_path: Path):
    """A Content-Length body read a byte at a time is within every limit, but held as one
    object per read it would cost ~40 times its bytes, past what max_buffered_bytes counts."""
    body_bytes = 3000

    async def scenario() -> tuple[int, bytes]:
        receiver = Receiver(tmp_path / "received", name="rx", port=0)
        await receiver.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", receiver.port)
            head = _CHUNKED_HEAD.replace(
                b"Transfer-Encoding: chunked", b"Content-Length: %d" % body_bytes
            )
            writer.write(head + b"{")
            for sent in range(2, body_bytes):
                writer.write(b"x")
                await writer.drain()
                # Read by the receiver before the next byte is sent: one read per byte.
                while not any(c.body_bytes >= sent for c in receiver.state.connections):
                    await asyncio.sleep(0)
            parts = max(len(c.body_parts) for c in receiver.state.connections)
            writer.write(b"}")
            answer = await reader.readuntil(b"\r\n\r\n")
            writer.close()
            return parts, answer
        finally:
            await receiver.close()

    parts, answer = asyncio.run(scenario())
    assert parts <= 65, f"{parts} objects held for one body of {body_bytes} bytes"
    assert answer.startswith(b"HTTP/1.1 202")
    rows = read_parts(tmp_path / "received", RECEIVED_FIELDS).to_pylist()
    assert [(r["event_id"], r["payload_bytes"]) for r in rows] == [("hostile", body_bytes)]
