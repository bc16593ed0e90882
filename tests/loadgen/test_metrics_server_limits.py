"""The sender's /metrics and a fleet master's, held by hostile clients: each a real process on
loopback, its server found by its `metrics_listening` line. Many silent clients hold no more
than a bounded number of descriptors and are closed at the deadline, a head trickled a byte at
a time and a keep-alive connection left idle are closed too, and a real scrape is answered all
the while (at worst told 503 until a slot frees)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from loadgen.settings import SenderSettings, SendKnobs
from runtime.procs import Child
from tests.conftest import RunningReceiver, wait_until
from tests.slowclients import close_all, open_count, open_many, patient_get, still_open, trickle

pytestmark = pytest.mark.e2e

# Both servers keep the same terms (the fleet's master serves what one sender would), the
# defaults a user gets: loadgen.sendmetrics' CLIENT_TIMEOUT_S and MAX_CONNECTIONS.
CLIENT_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 64
SLACK_S = 4 * CLIENT_TIMEOUT_S  # a slow CI's margin over the deadline


def _sender(tmp_path: Path, receiver: RunningReceiver) -> Child:
    settings = SenderSettings(
        target=receiver.url + "/",
        pace="20:300",  # long enough to outlast the test; stopped at its end
        out=tmp_path / "sent",
        knobs=SendKnobs(metrics_port=0),
    )
    return settings.start(tmp_path / "sender.log")


def _master(tmp_path: Path, receiver: RunningReceiver) -> Child:
    # A master waiting for a worker that never comes serves /metrics meanwhile.
    settings = SenderSettings(
        target=receiver.url + "/",
        pace="20:1",
        out=tmp_path / "sent",
        knobs=SendKnobs(metrics_port=0),
        workers=1,
    )
    fleet = [sys.executable, "-m", "loadgen.fleet", "master", *settings.argv()]
    command = [*fleet, "--bind-port", "0", "--expect-timeout", "300"]
    return Child("master", command, tmp_path / "master.log")


@pytest.fixture(params=["sender", "fleet master"])
def serving(request, tmp_path, receiver) -> Iterator[tuple[Child, int]]:
    child = (_sender if request.param == "sender" else _master)(tmp_path, receiver)
    try:
        yield child, int(child.wait_for("metrics_listening", 60)["port"])
    finally:
        child.stop()


def test_many_silent_clients_hold_a_bounded_number_of_descriptors(serving):
    # Before: every connection kept open, for good (a fleet master's) or for 5 s (a sender's)
    # with no bound: 300 clients, 300 descriptors.
    child, port = serving
    before = psutil.Process(child.pid).num_fds()
    held = open_many(port, 300, send=b"")
    try:
        # Accepted in order: once a later scrape is answered, all 300 have been accepted.
        # (A master's is empty until its workers report: the status is what is asked.)
        status, _ = patient_get(f"http://127.0.0.1:{port}/metrics", 60)
        assert status == 200
        fds = psutil.Process(child.pid).num_fds()
        assert fds <= before + MAX_CONNECTIONS + 8, f"{fds - before} descriptors for 300 clients"
        wait_until(lambda: open_count(held) == 0, SLACK_S, "the silent clients to be closed")
    finally:
        close_all(held)


def test_a_head_trickled_a_byte_at_a_time_is_closed_at_the_deadline(serving):
    _, port = serving
    start = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "
    assert trickle(port, every_s=0.5, for_s=SLACK_S, start=start) is not None


def test_a_keep_alive_connection_left_idle_is_closed(serving):
    _, port = serving
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
        assert connection.recv(65536).startswith(b"HTTP/1.1 200")
        connection.setblocking(False)
        wait_until(lambda: not still_open(connection), SLACK_S, "the idle connection to close")
