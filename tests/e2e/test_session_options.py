"""Every command that drives a system takes the session's options with one meaning: the receiver
listens where --receiver-port says, and the user's own system, started here outside the lab's
drivers (an HTTP hop of the test's own, a Kafka broker of the test's own), gets the events."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from contract.parquet import read_parts
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from suts.tansu import Tansu

pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Hop:
    """The user's system: an HTTP ingress that forwards every event, headers and body, to one
    subscriber URL and answers 202, counting what it forwarded."""

    def __init__(self, subscriber: str) -> None:
        self.forwarded = 0
        hop = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                request = urllib.request.Request(subscriber, body, headers, method="POST")
                try:
                    with urllib.request.urlopen(request, timeout=5):
                        hop.forwarded += 1
                    self.send_response(202)
                except OSError:
                    self.send_response(502)  # the subscriber is not there: a wiring mistake
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_port() -> int:
    return _free_port()


@pytest.fixture
def hop(receiver_port: int) -> Iterator[_Hop]:
    started = _Hop(f"http://127.0.0.1:{receiver_port}/")
    yield started
    started.close()


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[str]:
    broker = Tansu(tmp_path / "users-kafka.log")
    bootstrap = broker.start()
    yield bootstrap
    broker.stop()


def _evbench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "evbench", *args, "--runs-dir", str(tmp_path / "runs")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=240)


def _run(tmp_path: Path, port: int, hop: _Hop, kafka: str) -> Path:
    done = _evbench(
        tmp_path, "run", "--sut", "external", "--ingress", hop.url, "--receiver-port",
        str(port), "--pace", "100:2", "--run-id", "r", "--no-analyze", "--payload-bytes", "512",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").glob("r-*")  # named for the inline pace
    return run_dir / "external"


def _search(tmp_path: Path, port: int, hop: _Hop, kafka: str) -> Path:
    done = _evbench(
        tmp_path, "search", "--sut", "external", "--ingress", hop.url, "--receiver-port",
        str(port), "--from", "200", "--max", "200", "--hold", "2", "--confirm", "2",
        "--settle", "0.5", "--grace", "1", "--run-id", "s", "--no-analyze",
        "--payload-bytes", "512",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    root = tmp_path / "runs" / "s-search" / "external"
    # A receiver nobody delivers to made this search "break at every rate": the hop holds
    # 200/s (the sender on two busy cores may not: that is never a break either).
    probes = json.loads((root / "run.json").read_text())["search"]["probes"]
    assert probes and all(p["verdict"] != "breaks" for p in probes), done.stderr[-3000:]
    return root


def _memory(tmp_path: Path, port: int, hop: _Hop, kafka: str) -> Path:
    done = _evbench(
        tmp_path, "memory", "--consumers", "source", "--kafka-bootstrap", kafka,
        "--receiver-port", str(port), "--partitions", "2", "--fill-events", "200",
        "--consume", "10", "--run-id", "m", "--no-analyze",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp_path / "runs" / "m-memory" / "source-p2"


COMMANDS: dict[str, Callable[[Path, int, _Hop, str], Path]] = {
    "run": _run,
    "search": _search,
    "memory": _memory,
}


@pytest.mark.parametrize("command", COMMANDS)
def test_the_receiver_listens_where_asked_and_the_users_system_gets_the_events(
    tmp_path, receiver_port, hop, kafka, command
):
    root = COMMANDS[command](tmp_path, receiver_port, hop, kafka)
    received = read_parts(root / "received", RECEIVED_FIELDS).to_pylist()
    if command == "memory":
        # the user's broker held the backlog, under names of the scenario's own; the lab's
        # source adapter delivered all of it to the receiver on the port asked for
        result = json.loads((root / "scenario.json").read_text())
        assert result["kafka"]["bootstrap"] == kafka
        assert result["kafka"]["broker"] == "given with --kafka-bootstrap"
        assert result["kafka"]["topic"].startswith("evbench-m-")
        assert result["receiver_url"] == f"http://127.0.0.1:{receiver_port}"
        assert result["consumed"] == result["produced"] == 200 == len(received)
        return
    # Only a receiver on that port gets what the hop forwards: every event sent arrived.
    sent = read_parts(root / "sent", SENT_FIELDS).to_pylist()
    assert sent and {r["event_id"] for r in received} == {r["event_id"] for r in sent}
    assert hop.forwarded == len(sent)
    run = json.loads((root / "run.json").read_text())
    assert run["status"] == "completed" and run["instrument_failures"] == []


@pytest.mark.parametrize("command", ["run", "search"])
def test_a_receiver_port_already_taken_is_named_not_a_traceback(tmp_path, command):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        pace = ["--pace", "100:1"] if command == "run" else ["--from", "200", "--max", "200"]
        done = _evbench(
            tmp_path, command, "--sut", "direct", "--receiver-port", port, "--no-analyze",
            "--run-id", "busy", *pace,
        )  # fmt: skip
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and 'File "' not in done.stderr, done.stderr[-3000:]
    assert f"could not listen on 127.0.0.1:{port}" in done.stderr, done.stderr[-3000:]
    assert "address already in use" in done.stderr and "--receiver-port free" in done.stderr
