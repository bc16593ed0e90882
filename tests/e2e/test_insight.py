"""Looking inside the user's system during a run: its Prometheus endpoints scraped (one good,
one that hangs, one that answers garbage) and a Go-style pprof endpoint fetched for a step,
all served by a stdlib server of the test's own beside an HTTP hop of its own; and py-spy
profiles of a lab system's processes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from contract.documents import RunDoc
from contract.records import METRIC_SAMPLE_FIELDS, RECEIVED_FIELDS
from runtime.parquet import read_parts
from tests.e2e.hops import HttpHop

pytestmark = pytest.mark.e2e

CPU_PROFILE = os.urandom(40_000)  # what a Go service's /debug/pprof/profile answers: opaque bytes
HEAP_PROFILE = os.urandom(9_000)


class UsersService:
    """The user's service: /metrics (a counter that grows, a gauge), /hang (never answers in
    time), /garbage (not Prometheus text), and /debug/pprof/{profile,heap} answering fixed
    bytes, the CPU profile after the seconds it was asked for, as Go's does."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.profile_asks: list[tuple[int, int]] = []  # (arrived_ns, seconds)
        self.dispatched = 0
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                where = urlsplit(self.path)
                if where.path == "/metrics":
                    service.dispatched += 10
                    body = (
                        "# TYPE svc_dispatched_total counter\n"
                        f'svc_dispatched_total{{queue="a"}} {service.dispatched}\n'
                        "# TYPE svc_queue_depth gauge\nsvc_queue_depth 3\n"
                    ).encode()
                elif where.path == "/hang":
                    service.stopping.wait(30)
                    return
                elif where.path == "/garbage":
                    body = b"<html>this is not metrics</html>"
                elif where.path == "/debug/pprof/profile":
                    seconds = int(parse_qs(where.query)["seconds"][0])
                    service.profile_asks.append((time.time_ns(), seconds))
                    service.stopping.wait(seconds)
                    body = CPU_PROFILE
                elif where.path == "/debug/pprof/heap":
                    body = HEAP_PROFILE
                else:
                    self.send_error(404)
                    return
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
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def service() -> Iterator[UsersService]:
    started = UsersService()
    yield started
    started.close()


def _run(tmp_path: Path, run_id: str, hop: HttpHop, *more: str) -> tuple[Path, str]:
    """The run's directory and what it said on stderr."""
    argv = [
        sys.executable, "-m", "evbench", "run", "--sut", "external", "--ingress", hop.url,
        "--pace", "200:2,200:2", "--run-id", run_id, "--no-analyze", "--payload-bytes", "512",
        "--runs-dir", str(tmp_path / "runs"), *more,
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").glob(f"{run_id}-*")
    return run_dir / "external", done.stderr


@contextlib.contextmanager
def _hop(receiver_port: int) -> Iterator[HttpHop]:
    hop = HttpHop(f"http://127.0.0.1:{receiver_port}/")
    try:
        yield hop
    finally:
        hop.close()


def _counts(root: Path) -> tuple[int, int, int]:
    run: RunDoc = json.loads((root / "run.json").read_text())
    sender, receiver = run["sender"]["summary"], run["receiver"]["stats"]
    return sender["sent"], sender["ok"], receiver["received"]  # type: ignore[typeddict-item]


def test_the_users_endpoints_are_scraped_and_profiled_without_touching_the_run(
    tmp_path: Path, service: UsersService
) -> None:
    port, sender_port = _free_port(), _free_port()
    with _hop(port) as hop:
        watched, said = _run(
            tmp_path, "watched", hop, "--receiver-port", str(port),
            "--scrape", f"svc={service.url}/metrics", "--scrape", f"stuck={service.url}/hang",
            "--scrape", f"junk={service.url}/garbage", "--scrape-interval", "0.5",
            "--profile", "2:1", "--pprof", f"api={service.url}/debug/pprof",
            # evbench's own live figures, scraped as Prometheus would during the run
            "--sender-metrics-port", str(sender_port),
            "--scrape", f"receiver=http://127.0.0.1:{port}/metrics",
            "--scrape", f"sender=http://127.0.0.1:{sender_port}/metrics",
        )  # fmt: skip
    assert f"the sender's live figures: http://127.0.0.1:{sender_port}/metrics" in said
    # The run's figures are a healthy hop's: every event sent, acked and received, as without
    # the endpoints (a hung scrape or a slow profile never holds the sender or the receiver).
    assert _counts(watched) == (800, 800, 800)
    run: RunDoc = json.loads((watched / "run.json").read_text())
    assert run["status"] == "completed" and not run["instrument_failures"]
    scrapes = {doc["name"]: doc for doc in run["scrapes"]}
    assert scrapes["svc"]["failures"] == 0 and scrapes["svc"]["scrapes"] >= 6
    assert scrapes["stuck"]["failures"] >= 1
    assert "no answer within the interval" in (scrapes["stuck"]["last_error"] or "")
    assert scrapes["junk"]["failures"] == scrapes["junk"]["scrapes"] >= 6
    assert "not Prometheus text" in (scrapes["junk"]["first_error"] or "")
    _check_samples(watched)
    _check_pprof(watched, run, service)


def _check_samples(root: Path) -> None:
    rows = read_parts(root / "samples" / "metrics", METRIC_SAMPLE_FIELDS).to_pylist()
    svc = [r for r in rows if r["endpoint"] == "svc" and r["metric"] == "svc_dispatched_total"]
    assert {(r["kind"], r["labels"]) for r in svc} == {("counter", '{queue="a"}')}
    values = [r["value"] for r in sorted(svc, key=lambda r: r["t_ns"])]
    assert values == sorted(values) and len(values) >= 6
    up = {(r["endpoint"], r["value"]) for r in rows if r["metric"] == "up"}
    assert {("svc", 1.0), ("stuck", 0.0), ("junk", 0.0), ("receiver", 1.0)} <= up
    assert ("svc", 0.0) not in up  # (the receiver's is scraped from before it starts)
    # The receiver's own /metrics, read by Prometheus' parser all through the run, counted
    # every delivery stamped before its last scrape began (that scrape can come up to half an
    # interval before the end: evbench.scrape's last attempt), never more than were sent; the
    # sender's (up only while it ran) never more than it sent.
    received = [r for r in rows if r["endpoint"] == "receiver"]
    counted = [r for r in received if r["metric"] == "evbench_receiver_events_received_total"]
    last = max(counted, key=lambda r: r["t_ns"])
    stamps = read_parts(root / "received", RECEIVED_FIELDS).column("received_ns").to_pylist()
    assert sum(stamp < last["t_ns"] for stamp in stamps) <= last["value"] <= 800
    assert last["value"] == _highest(rows, "receiver", "evbench_receiver_events_received_total")
    assert 0 < _highest(rows, "sender", "evbench_sender_events_sent_total") <= 800
    # Garbage is kept out whole: only the scraper's own rows say the endpoint was there.
    junk = {r["metric"] for r in rows if r["endpoint"] == "junk"}
    assert junk == {"up", "scrape_duration_seconds"}


def _highest(rows: list[dict[str, object]], endpoint: str, metric: str) -> float:
    values = [r["value"] for r in rows if r["endpoint"] == endpoint and r["metric"] == metric]
    return max(values)  # type: ignore[type-var]


def _check_pprof(root: Path, run: RunDoc, service: UsersService) -> None:
    profiles = {doc["kind"]: doc for doc in run["profiles"]}
    cpu, heap = profiles["pprof-cpu"], profiles["pprof-heap"]
    assert (cpu["step"], cpu["target"], cpu["duration_s"], cpu["error"]) == (2, "api", 1, None)
    assert (root / cpu["files"][0]).read_bytes() == CPU_PROFILE  # stored whole, as it came
    assert (root / heap["files"][0]).read_bytes() == HEAP_PROFILE
    assert cpu["files"] == ["profiles/step-2/api.cpu.pb.gz"]
    assert cpu["open_with"] == "go tool pprof -http=: profiles/step-2/api.cpu.pb.gz"
    # Asked for the second the profile was to cover, while step 2 ran.
    ((arrived_ns, seconds),) = service.profile_asks
    step_2_start_ns = run["schedule"]["start_ns"] + 2 * 1_000_000_000  # step 1, then no gap
    gap_ns = int(run["schedule"]["step_gap_s"] * 1e9)
    assert seconds == 1
    assert 0 <= arrived_ns - (step_2_start_ns + gap_ns) < 1_000_000_000


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_lab_step_is_profiled_and_the_lab_scraped(tmp_path: Path) -> None:
    argv = [
        sys.executable, "-m", "evbench", "run", "--sut", "channel-imc", "--pace", "200:2,200:2",
        "--run-id", "lab", "--no-analyze", "--payload-bytes", "512", "--profile", "2:1",
        "--runs-dir", str(tmp_path / "runs"),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "profiling step 2 for 1 s" in done.stderr
    (root,) = (tmp_path / "runs").glob("lab-*/channel-imc")
    run: RunDoc = json.loads((root / "run.json").read_text())
    roles = set(run["sut_settings"]["components"])
    spied = {doc["target"]: doc for doc in run["profiles"] if doc["kind"] == "py-spy"}
    assert set(spied) == roles  # every Python process of the lab, none of the instruments
    for role, doc in spied.items():
        assert doc["error"] is None and doc["step"] == 2, doc
        assert doc["samples"] > 0 and doc["profiler_cpu_s"] >= 0
        assert doc["files"] == [f"profiles/step-2/{role}.{end}" for end in _PY_SPY_FILES]
        assert "<svg" in (root / doc["files"][0]).read_text()
        assert json.loads((root / doc["files"][1]).read_text())["profiles"][0]["type"] == "sampled"
    scrapes = {doc["name"]: doc for doc in run["scrapes"]}
    assert set(scrapes) == roles
    assert all(doc["origin"] == "lab" and doc["failures"] == 0 for doc in scrapes.values())


_PY_SPY_FILES = ("svg", "speedscope.json", "raw.txt")
