"""The scraper against endpoints of the test's own: one that answers, one that never does and
one whose body trickles in. Each costs only itself, and stopping them all costs about one
interval, not one per endpoint or per attempt."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from contract.parquet import read_parts
from contract.records import METRIC_SAMPLE_FIELDS
from evbench.scrape import Scraper, ScrapeTarget

pytestmark = pytest.mark.e2e

INTERVAL_S = 0.5


class Endpoints:
    def __init__(self) -> None:
        self.released = threading.Event()
        self.answered = 0
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if self.path == "/hang":
                    endpoints.released.wait(30)
                    return
                if self.path == "/trickle":  # a byte every 0.1 s of a promised kilobyte
                    self.send_response(200)
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    for _ in range(1000):
                        if endpoints.released.wait(0.1):
                            return
                        self.wfile.write(b"#")
                        self.wfile.flush()
                    return
                endpoints.answered += 1
                body = f"# TYPE done_total counter\ndone_total {endpoints.answered}\n".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoints() -> Iterator[Endpoints]:
    started = Endpoints()
    yield started
    started.close()


def test_hung_and_trickling_endpoints_cost_only_themselves_and_one_interval_to_stop(
    tmp_path: Path, endpoints: Endpoints
) -> None:
    scraper = Scraper(tmp_path / "metrics", INTERVAL_S)
    for name in ("hang", "trickle", "ok"):
        scraper.add(ScrapeTarget(name, f"{endpoints.url}/{name}"))
    deadline = time.monotonic() + 20
    while any(doc["failures"] < 2 for doc in scraper.docs() if doc["name"] != "ok"):
        assert time.monotonic() < deadline, scraper.docs()
        time.sleep(0.05)
    began = time.monotonic()
    scraper.stop()
    stopping_s = time.monotonic() - began
    # Bound: an attempt under way (about 1.5 intervals at worst) and nothing more for the
    # endpoints that failed; half a second of margin for a busy machine.
    assert stopping_s < 1.5 * INTERVAL_S + 0.5 + 0.5
    docs = {doc["name"]: doc for doc in scraper.docs()}
    for name in ("hang", "trickle"):
        assert docs[name]["failures"] == docs[name]["scrapes"], docs[name]
        assert "no answer within the interval" in (docs[name]["last_error"] or "")
        # Each attempt gave up after about the interval, never the trickle's 100 s.
        assert docs[name]["slowest_s"] < 1.5 * INTERVAL_S + 0.5
    # The healthy endpoint was never held up by the others: a sample every interval.
    assert docs["ok"]["failures"] == 0 and docs["ok"]["scrapes"] >= 3
    rows = read_parts(tmp_path / "metrics", METRIC_SAMPLE_FIELDS).to_pylist()
    done = sorted(r["value"] for r in rows if r["metric"] == "done_total")
    assert done == [float(n) for n in range(1, endpoints.answered + 1)]  # every answer kept
