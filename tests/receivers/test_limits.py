"""The receiver against clients that misbehave: every request is answered with the status that
says why, nothing a client sends can stop recording, and no client can pin unbounded resources."""

import asyncio
import contextlib
import gc
import re
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from contract.records import RECEIVED_FIELDS
from evbench.instruments import start_receiver
from receivers.connection import Connection
from receivers.limits import Limits
from receivers.server import Receiver
from runtime.parquet import read_parts
from suts.hostile import binary_event, structured_event
from tests.conftest import RunningReceiver, wait_until

pytestmark = pytest.mark.e2e

SMALL = Limits(
    max_url_bytes=1024,
    max_header_bytes=8192,
    max_body_bytes=65536,
    max_buffered_bytes=100_000,
    max_connections=20,
    header_timeout_s=0.5,
    body_timeout_s=0.5,
    idle_timeout_s=1.0,
)


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[RunningReceiver]:
    out = tmp_path / "received"
    child, url = start_receiver(out, tmp_path / "receiver.log", name="rx", limits=SMALL)
    try:
        yield RunningReceiver(child, url, out, int(url.rsplit(":", 1)[1]))
    finally:
        if child.alive():
            child.stop()


def _exchange(port: int, data: bytes, timeout_s: float = 5.0) -> bytes:
    """Send raw bytes; the receiver's answer (after any 100 Continue), or what came before it
    closed the connection. A receiver that neither answers nor closes fails the test."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        with contextlib.suppress(OSError):  # refused mid-request: the answer may still come
            sock.sendall(data)
        answer = b""
        try:
            while not _complete(answer) and (chunk := sock.recv(65536)):
                answer += chunk
        except ConnectionResetError:
            pass
    return answer


def _complete(answer: bytes) -> bool:
    """A whole final answer: headers, then Content-Length bytes of body (a HEAD has none)."""
    start = answer.rfind(b"HTTP/1.1 ")
    end = answer.find(b"\r\n\r\n", start)
    if start < 0 or end < 0 or answer.startswith(b"HTTP/1.1 100", start):
        return False
    length = re.search(rb"Content-Length: (\d+)", answer[start:end])
    body = len(answer) - end - 4
    return body >= int(length.group(1)) if length else True


def test_an_unrecordable_id_is_refused_and_recording_goes_on(receiver):
    """A lone surrogate id was answered 202 and stopped every later flush (the run recorded 0)."""
    bad = [
        structured_event('{"specversion":"1.0","source":"s","type":"t","id":"\\ud800"}'),
        binary_event(b"ce-x", b'{"evbenchid":"\\ud800","pad":"x"}'),
        structured_event('{"specversion":"1.0","source":"s","type":"t","id":null}'),
        structured_event('{"specversion":"1.0","source":"s","type":"t","id":{"a":1}}'),
    ]
    assert _exchange(receiver.port, binary_event(b"before")).startswith(b"HTTP/1.1 202")
    for request in bad:
        assert _exchange(receiver.port, request).startswith(b"HTTP/1.1 400")
    for i in range(5):
        assert _exchange(receiver.port, binary_event(b"after-%d" % i)).startswith(b"HTTP/1.1 202")
    wait_until(lambda: receiver.stats()["rows_written"] == 6, 5, "6 rows written")
    stats = receiver.stats()
    assert stats["invalid_ids"] == len(bad) and stats["quarantined"] == 0
    receiver.child.signal(signal.SIGTERM)
    assert receiver.child.wait(10) == 0
    ids = sorted(read_parts(receiver.out, RECEIVED_FIELDS).column("event_id").to_pylist())
    assert ids == ["after-0", "after-1", "after-2", "after-3", "after-4", "before"]


BIG = b"x" * 100_000
LIMIT_CASES = [
    ("URL over the limit", b"GET /" + b"u" * 2000 + b" HTTP/1.1\r\nHost: r\r\n\r\n", b"414"),
    ("one huge header", b"POST / HTTP/1.1\r\nx-big: " + BIG + b"\r\n\r\n", b"431"),
    ("many headers", b"POST / HTTP/1.1\r\n" + b"x-h: 0123456789\r\n" * 2000 + b"\r\n", b"431"),
    ("declared body", b"POST / HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n", b"413"),
    (
        "chunked body",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        + (b"8000\r\n" + b"b" * 0x8000 + b"\r\n") * 4
        + b"0\r\n\r\n",
        b"413",
    ),
    ("unknown expectation", binary_event(b"e", extra=b"Expect: teapot\r\n"), b"417"),
    ("CONNECT", b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n", b"501"),
    ("Upgrade", b"GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", b"501"),
]


@pytest.mark.parametrize(
    ("what", "request_bytes", "status"), LIMIT_CASES, ids=[case[0] for case in LIMIT_CASES]
)
def test_requests_beyond_the_limits_get_their_status(strict, what, request_bytes, status):
    answer = _exchange(strict.port, request_bytes)
    assert answer.startswith(b"HTTP/1.1 " + status), (what, answer[:200])
    assert b"Connection: close" in answer
    assert strict.child.alive()
    assert httpx.get(strict.url + "/healthz").status_code == 200
    assert "Traceback" not in Path(strict.child.log_path).read_text()


def test_a_blank_line_split_across_reads_is_not_taken_for_endless_headers(strict):
    """The header limit is checked before parsing; a body larger than it that follows a blank
    line split across two reads is still a body."""
    request = binary_event(b"split", b"{" + b"x" * 60_000 + b"}")
    cut = request.index(b"\r\n\r\n") + 3
    with socket.create_connection(("127.0.0.1", strict.port), timeout=5) as sock:
        sock.sendall(request[:cut])
        time.sleep(0.05)  # two reads on the receiver's side (merged ones pass trivially)
        sock.sendall(request[cut:])
        assert sock.recv(4096).startswith(b"HTTP/1.1 202")


def test_expect_continue_head_and_keep_alive_answers(strict):
    answer = _exchange(strict.port, binary_event(b"exp", extra=b"Expect: 100-continue\r\n"))
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202")
    # HEAD, then GET on the same connection: the GET's answer must follow the HEAD's headers
    # directly (a body after them would be taken as the start of the next answer).
    both = _exchange(strict.port, b"HEAD /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n")
    head, get = both.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200") and b"Content-Length: 3" in head
    assert get.startswith(b"HTTP/1.1 200") and get.endswith(b"\r\n\r\nok\n")
    assert strict.stats()["received"] == 1


def test_stalled_requests_and_idle_connections_are_closed(strict):
    # Each is closed by the receiver at its own timeout: a 408 (or, for the silent one, the
    # close) comes back, where the client would have given up after 10 s and failed the test
    # (_exchange). And not at once: no sooner than the timeout after the bytes were sent, which
    # a slow machine can only make later. (The silent one has the idle timeout its answers
    # would tell to begin a request: a client may be writing on a spare connection just then.)
    for data, timeout_s in (
        (b"POST / HTTP/1.1\r\nHost: r\r\nx-a: 1\r\n", SMALL.header_timeout_s),  # slowloris
        (binary_event(b"slow", b"{" + b"x" * 100)[:-50], SMALL.body_timeout_s),  # stalled body
        (b"", SMALL.idle_timeout_s),  # silent
    ):
        sent = time.monotonic()
        answer = _exchange(strict.port, data, 10)
        assert time.monotonic() - sent >= timeout_s, (data, answer)
        assert answer.startswith(b"HTTP/1.1 408") if data else answer == b""
    stats = strict.stats()
    assert stats["timed_out"] == 2 and stats["idle_closed"] >= 1


def test_connections_beyond_the_cap_get_503_and_the_others_are_served(tmp_path):
    # Held between requests (a silent one would make room: test_failure_silent), for longer
    # than the test takes.
    limits = replace(SMALL, idle_timeout_s=60.0)
    child, url = start_receiver(tmp_path / "rx", tmp_path / "rx.log", name="rx", limits=limits)
    strict = RunningReceiver(child, url, tmp_path / "rx", int(url.rsplit(":", 1)[1]))
    held = [socket.create_connection(("127.0.0.1", strict.port), timeout=5) for _ in range(20)]
    try:
        for i, sock in enumerate(held):
            sock.sendall(binary_event(b"held-%d" % i))
            assert sock.recv(4096).startswith(b"HTTP/1.1 202")
        # Accepted asynchronously: once all 20 are in, the next one is turned away.
        wait_until(
            lambda: _exchange(strict.port, binary_event(b"over")).startswith(b"HTTP/1.1 503"),
            5,
            "a connection over the cap answered 503",
        )
        held[0].sendall(binary_event(b"held-again"))
        assert held[0].recv(4096).startswith(b"HTTP/1.1 202")
    finally:
        for sock in held:
            sock.close()
    try:
        wait_until(
            lambda: _exchange(strict.port, binary_event(b"later")).startswith(b"HTTP/1.1 202"),
            5,
            "a connection accepted again once the held ones closed",
        )
        stats = strict.stats()
        assert stats["refused_connections"] >= 1 and stats["received"] >= 22
    finally:
        child.stop()


def test_bodies_in_flight_beyond_the_total_get_503(strict):
    """Each body is within the per-event limit, but together they would pass the total."""
    partial = binary_event(b"big", b"{" + b"x" * 60_000 + b"}")[:-5000]
    with socket.create_connection(("127.0.0.1", strict.port), timeout=5) as first:
        first.sendall(partial)  # about 55 KB of body, held until the rest comes
        wait_until(lambda: strict.stats()["buffered_bytes"] >= 50_000, 5, "the first body held")
        second = _exchange(strict.port, partial)
        assert second.startswith(b"HTTP/1.1 503")
    wait_until(lambda: strict.stats()["buffered_bytes"] == 0, 5, "the held body released")
    assert _exchange(strict.port, binary_event(b"fits")).startswith(b"HTTP/1.1 202")


def test_answers_a_client_does_not_read_stop_the_reading(receiver):
    """Pipelined requests whose answers are never read: the receiver stops reading at its
    answer-queue limit, so the client is held back by TCP instead of the receiver buffering
    answers without bound (64 MB of requests would be 40 MB of answers)."""
    request = b"GET /stats HTTP/1.1\r\nHost: r\r\nx-pad: " + b"p" * 900 + b"\r\n\r\n"
    total_bytes = 64 * 2**20
    sent = 0
    with socket.create_connection(("127.0.0.1", receiver.port)) as sock:
        sock.settimeout(2.0)  # a stalled send means the receiver stopped reading
        block = request * 64
        try:
            while sent < total_bytes:
                sent += sock.send(block)
        except TimeoutError:
            pass
    # Kernel socket buffers on loopback hold a few MB each way (auto-tuned: up to ~16 MB was
    # seen on a loaded CI run); the rest, here 64 MB, must not be taken.
    assert sent < total_bytes / 3, f"{sent} of {total_bytes} bytes were accepted"
    assert httpx.get(receiver.url + "/healthz").status_code == 200


def test_a_client_that_never_reads_is_cut_off_after_its_timeout(strict):
    """Answers queued for a client that reads nothing keep a closed connection open: it is
    aborted once the close has had its grace period, and counted once."""
    request = b"GET /stats HTTP/1.1\r\nHost: r\r\n\r\n" * 256
    with socket.create_connection(("127.0.0.1", strict.port)) as sock:
        sock.settimeout(1.0)
        with contextlib.suppress(TimeoutError):
            while True:  # until the receiver stops reading and the socket buffers fill
                sock.sendall(request)
        # Idle timeout 1 s, then 2 s to drain, swept every 0.5 s.
        wait_until(lambda: strict.stats()["open_connections"] == 1, 10, "the reader cut off")
    stats = strict.stats()
    assert stats["idle_closed"] + stats["timed_out"] == 1


def test_a_closed_connection_is_freed_without_the_cyclic_collector(tmp_path):
    """The parser and its protocol referred to each other, so every connection waited for the
    cyclic garbage collector (with its request's buffers) instead of being freed on close."""

    async def scenario() -> int:
        receiver = Receiver(tmp_path / "received", port=0)
        await receiver.start()
        try:
            for i in range(20):
                reader, writer = await asyncio.open_connection("127.0.0.1", receiver.port)
                writer.write(binary_event(b"gc-%d" % i, b"{" + b"x" * 8000 + b"}"))
                assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 202")
                writer.close()
                await writer.wait_closed()
            deadline = time.monotonic() + 5
            while receiver.stats.open_connections and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            return sum(isinstance(o, Connection) for o in gc.get_objects())
        finally:
            await receiver.close()

    gc.collect()
    gc.disable()
    try:
        alive = asyncio.run(scenario())
    finally:
        gc.enable()
    assert alive == 0
