"""No event fails to a keep-alive close (issue 51, item 8): a real receiver that closes
connections idle past its limit, and a real sender whose pooled connections wait past it.

The race: the receiver closes a connection it holds idle just as the sender writes a request on
it, before the sender has read the close; the request then fails "connection closed before the
answer" and never reaches the receiver. At 10,000/s on a busy host, 21 of 100,000 failed so. The
receiver now tells its limit (`Keep-Alive: timeout=N`) and holds a connection that never began
a request for that same limit, and the sender retires a connection before it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import uvloop

from contract.records import SENT_FIELDS
from evbench.instruments import start_receiver
from loadgen.http import HttpTransport
from loadgen.keepalive import keep_alive_timeout_s, retire_age_ns
from loadgen.payload import PayloadBuilder
from loadgen.request import MEASURE, Request
from loadgen.settings import SenderSettings, SendKnobs
from receivers.limits import Limits
from runtime.parquet import read_parts
from tests.conftest import RunningReceiver, wait_until

# Short limits, so the test waits seconds: a request's headers within 1 s, and 3 s between
# requests. Before the fix a connection that had not begun a request was closed at the first.
LIMITS = Limits(header_timeout_s=1.0, idle_timeout_s=3.0)


@pytest.fixture
def rx(tmp_path: Path) -> Iterator[RunningReceiver]:
    out = tmp_path / "received"
    child, url = start_receiver(out, tmp_path / "rx.log", name="rx", limits=LIMITS)
    try:
        yield RunningReceiver(child, url, out, int(url.rsplit(":", 1)[1]))
    finally:
        if child.alive():
            child.stop()


def _stats(rx: RunningReceiver) -> dict[str, Any]:
    return cast(dict[str, Any], httpx.get(rx.url + "/stats", timeout=5).json())


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

    def send(self, count: int) -> None:
        for _ in range(count):
            self.seq += 1
            now_ns = time.time_ns()  # the engine's clock read for the slot: sent_ns
            request = Request(
                self.seq, b"ka-%06d" % self.seq, MEASURE, now_ns, now_ns, cast(Any, None)
            )
            self.transport.send(request)

    async def answered(self, count: int) -> None:
        deadline = time.monotonic() + 10
        while len(self.answers) < count:
            assert time.monotonic() < deadline, f"{len(self.answers)} of {count} answered"
            await asyncio.sleep(0.01)


async def _pause_past_the_limit(url: str, open_now: Callable[[], int]) -> _Sender:
    transport = HttpTransport(url, "/test", PayloadBuilder(512, 16), max_connections=64)
    sender = _Sender(transport)
    try:
        await transport.prepare(100)  # 8 spare connections, opened now
        sender.send(1)
        await sender.answered(1)  # the first answer tells the receiver's limit
        # The sender's loop held (a pause, a busy host) while the receiver's limits pass for
        # every connection: the receiver closes them all, and the sender has read no close.
        wait_until(lambda: open_now() == 1, 15, "the receiver closing the sender's connections")
        sender.send(8)
        await sender.answered(9)
    finally:
        await transport.close()
    return sender


@pytest.mark.e2e
def test_a_pause_past_the_receivers_limit_fails_no_event(rx: RunningReceiver) -> None:
    """Before: all 8 sent after the pause went out on connections the receiver had closed and
    failed 'connection closed before the answer'. Now the sender retires them unused (their
    age past the limit the answers told) and opens new ones."""
    sender = uvloop.run(_pause_past_the_limit(rx.url + "/", lambda: _stats(rx)["open_connections"]))
    failed = {eid: answer for eid, answer in sender.answers.items() if answer != (202, None)}
    assert failed == {}
    assert _stats(rx)["received"] == 9


@pytest.mark.e2e
def test_a_pace_that_idles_past_the_limit_leaves_no_close_to_the_receiver(
    rx: RunningReceiver, tmp_path: Path
) -> None:
    """A sender process: a step, five seconds at 1/s (every spare but one idle past the 3 s
    limit), a step again. Every event answered, and the receiver closed none of the sender's
    connections for idleness: the sender retired each one before the receiver's limit (before:
    the spares, never used, were closed at the 1 s header timeout, each close a race)."""
    out = tmp_path / "sent"
    settings = SenderSettings(
        target=rx.url + "/",
        pace="400:1,1:5,400:1",
        out=out,
        knobs=SendKnobs(payload_bytes=512, step_gap_s=0.2),
        start_delay_s=0.5,
    )
    child = settings.start(tmp_path / "sender.log")
    assert child.wait(60) == 0
    sent = read_parts(out, SENT_FIELDS)
    errors = [e for e in sent.column("error").to_pylist() if e is not None]
    assert (sent.num_rows, errors) == (805, [])
    stats = wait_until(
        lambda: (s := _stats(rx))["open_connections"] == 1 and s, 10, "the sender's closes"
    )
    assert isinstance(stats, dict)
    assert (stats["received"], stats["idle_closed"]) == (805, 0)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (b"timeout=120", 120),
        (b"timeout=5, max=1000", 5),
        (b"max=100, Timeout = 7", 7),  # any order, any case, spaces around '='
        (b"timeout=0", 0),  # a connection not to be kept
        (b"max=100", None),  # no timeout said
        (b"timeout=", None),
        (b"timeout=1.5", None),  # delta-seconds are whole
        (b"timeout=-3", None),
        (b"timeout=soon", None),
        (b"", None),
    ],
)
def test_keep_alive_timeout(value: bytes, seconds: int | None) -> None:
    assert keep_alive_timeout_s(value) == seconds


@pytest.mark.parametrize(
    ("timeout_s", "age_s"),
    [
        (120, 108.0),  # a tenth of the limit to spare
        (10, 9.0),  # at least a second
        (3, 2.0),
        (2, 1.0),
        (1, 0.5),  # at most half the limit
        (0, 0.0),  # never reused
    ],
)
def test_retire_age(timeout_s: int, age_s: float) -> None:
    assert retire_age_ns(timeout_s) == round(age_s * 1e9)
