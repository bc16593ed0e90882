"""The scraper against endpoints of the test's own, in this process: one that answers, one that
never does and one whose body trickles in. Each costs only itself: the scraper gives up on
every attempt at the others (the endpoints never let go: they count what the scraper did), and
stopping does not wait for them. Counters and order only, no durations: a slow machine cannot
fail it, and a scraper that waits on a hung endpoint still does (at a wait's deadline)."""

from __future__ import annotations

import select
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from contract.records import METRIC_SAMPLE_FIELDS
from evbench.scrape import Scraper, ScrapeTarget
from runtime.parquet import read_parts
from tests.conftest import wait_until

INTERVAL_S = 0.5
TRICKLE_BYTES = 1000  # a byte every 0.1 s: 100 s, were the scraper to wait for all of it


class Endpoints:
    """/ok answers, /hang and /trickle hold each request until the client gives it up (or the
    test ends); `requests`, `abandoned` and `finished` count per endpoint what happened."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.answered = 0
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.abandoned: Counter[str] = Counter()  # the client closed before the server was done
        self.finished: Counter[str] = Counter()
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                name = self.path.strip("/")
                endpoints.count(endpoints.requests, name)
                if name == "hang":
                    endpoints.hold(self.connection)
                elif name == "trickle":
                    endpoints.trickle(self)
                else:
                    endpoints.answer(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, counter: Counter[str], name: str) -> None:
        with self._lock:
            counter[name] += 1

    def hold(self, connection: socket.socket) -> None:
        """No answer at all, until the client hangs up."""
        while not self.released.is_set():
            if select.select([connection], [], [], 0.05)[0] and not _peek(connection):
                self.count(self.abandoned, "hang")
                return

    def trickle(self, handler: BaseHTTPRequestHandler) -> None:
        """A kilobyte promised, a byte every 0.1 s, until the client hangs up."""
        handler.send_response(200)
        handler.send_header("Content-Length", str(TRICKLE_BYTES))
        handler.end_headers()
        try:
            for _ in range(TRICKLE_BYTES):
                if self.released.wait(0.1):
                    return
                handler.wfile.write(b"#")
                handler.wfile.flush()
        except OSError:  # the client closed: its attempt was over
            self.count(self.abandoned, "trickle")
            handler.close_connection = True
            return
        self.count(self.finished, "trickle")

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.answered += 1
            body = f"# TYPE done_total counter\ndone_total {self.answered}\n".encode()
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def _peek(connection: socket.socket) -> bytes:
    """What is waiting on a readable connection: b"" once the peer has closed it."""
    try:
        return connection.recv(1, socket.MSG_PEEK)
    except OSError:
        return b""


@pytest.fixture
def endpoints() -> Iterator[Endpoints]:
    started = Endpoints()
    yield started
    started.close()


def test_hung_and_trickling_endpoints_cost_only_themselves_and_stopping_waits_on_neither(
    tmp_path: Path, endpoints: Endpoints
) -> None:
    scraper = Scraper(tmp_path / "metrics", INTERVAL_S)
    for name in ("hang", "trickle", "ok"):
        scraper.add(ScrapeTarget(name, f"{endpoints.url}/{name}"))
    # Two attempts given up at each: an attempt waiting for the trickle's 100 s never gets here.
    wait_until(
        lambda: all(d["failures"] >= 2 for d in scraper.docs() if d["name"] != "ok"),
        20,
        "two failed attempts at each of the hung and the trickling endpoint",
    )
    # Stopping returns while both endpoints still hold their requests: it waits on neither.
    stopper = threading.Thread(target=scraper.stop, daemon=True)
    stopper.start()
    stopper.join(timeout=20)
    assert not stopper.is_alive(), "stop() is waiting on a hung endpoint"
    assert not endpoints.released.is_set()
    # Every request the two got, the scraper gave up itself; none was served to the end.
    wait_until(
        lambda: all(endpoints.abandoned[n] == endpoints.requests[n] for n in ("hang", "trickle")),
        10,
        "the scraper to hang up on every request the hung and the trickling endpoint got",
    )
    assert endpoints.finished["trickle"] == 0
    docs = {doc["name"]: doc for doc in scraper.docs()}
    for name in ("hang", "trickle"):
        assert docs[name]["failures"] == docs[name]["scrapes"] >= 2, docs[name]
        assert "no answer within the interval" in (docs[name]["last_error"] or "")
    # The healthy endpoint was never held up by the others: a sample every interval.
    assert docs["ok"]["failures"] == 0 and docs["ok"]["scrapes"] >= 3
    rows = read_parts(tmp_path / "metrics", METRIC_SAMPLE_FIELDS).to_pylist()
    done = sorted(r["value"] for r in rows if r["metric"] == "done_total")
    assert done == [float(n) for n in range(1, endpoints.answered + 1)]  # every answer kept
