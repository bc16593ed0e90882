"""Collecting from peers that are unreachable, failing or hostile, and serving a directory that
holds what is not a record: every case named in one line, nothing taken that is not a record,
nothing written outside the run directory. The hostile peer is a standard-library server
written here, on loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runtime.recordshare import PeerError, fetch_all, listing, server

pytestmark = pytest.mark.e2e


def _parquet_bytes(tmp_path: Path) -> bytes:
    path = tmp_path / "real.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), path)
    return path.read_bytes()


# A route's answer: (status, body, seconds to wait between chunks of the body, chunk size).
Route = tuple[int, bytes, float, int]


@contextmanager
def _peer(routes: dict[str, Route], headers: dict[str, str] | None = None) -> Iterator[str]:
    """A records server that says what `routes` tell it to (with `headers` on every answer);
    its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name for it
            status, body, pause_s, chunk = routes.get(self.path, (404, b"no\n", 0.0, 1 << 20))
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for start in range(0, len(body), chunk):
                    self.wfile.write(body[start : start + chunk])
                    self.wfile.flush()
                    time.sleep(pause_s)
            except OSError:
                pass  # the collector gave up on us, as it should

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _listed(*files: tuple[str, int]) -> Route:
    body = json.dumps({"files": [{"path": p, "bytes": n} for p, n in files]}).encode()
    return (200, body, 0.0, 1 << 20)


def _file(body: bytes, pause_s: float = 0.0, chunk: int = 1 << 20) -> Route:
    return (200, body, pause_s, chunk)


def _cases(real: bytes) -> list[tuple[str, dict[str, Route], str]]:
    """(case, routes, what the error must say)."""
    return [
        ("absolute path", {"/records": _listed(("/etc/passwd", 10))}, "'/etc/passwd': outside"),
        ("dot-dot path", {"/records": _listed(("../../x.parquet", 10))}, "'../../x.parquet'"),
        ("not a listing", {"/records": _file(b"<html>")}, "not a records listing"),
        ("failing peer", {"/records": (500, b"boom", 0.0, 64)}, "HTTP 500"),
        (
            "size unlike the listing",
            {"/records": _listed(("a.parquet", len(real) + 5)), "/records/a.parquet": _file(real)},
            f"{len(real)} bytes where the listing said {len(real) + 5}",
        ),
        (
            "not Parquet",
            {"/records": _listed(("a.parquet", 2)), "/records/a.parquet": _file(b"no")},
            "not a readable Parquet file",
        ),
        (
            "a body that trickles",
            {
                "/records": _listed(("a.parquet", 40)),
                "/records/a.parquet": _file(b"x" * 40, 0.2, 1),
            },
            "stalled",
        ),
        (
            "a body that stops",
            {
                "/records": _listed(("a.parquet", 40)),
                "/records/a.parquet": _file(b"x" * 40, 5.0, 20),
            },
            "no answer within 0.5 s",
        ),
    ]


@pytest.mark.parametrize("case", range(8), ids=lambda i: str(i))
def test_a_hostile_or_failing_peer_is_named_and_nothing_lands_outside(tmp_path, case):
    name, routes, said = _cases(_parquet_bytes(tmp_path))[case]
    into = tmp_path / "run" / "sent"
    # A collector that waited out the trickling or stopped body would get the whole of it and
    # raise nothing: the error is the proof it gave up, no clock needed here.
    pattern = said.replace("(", r"\(").replace(".", r"\.")
    with _peer(routes) as url, pytest.raises(PeerError, match=pattern) as found:
        fetch_all(url, into, timeout_s=0.5)
    assert url in str(found.value), name
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and "run" not in p.parts]
    assert outside == [tmp_path / "real.parquet"], name  # nothing written beside the run
    leftovers = [p for p in into.rglob("*") if p.is_file()] if into.exists() else []
    assert leftovers == [], name  # no half or refused file kept


def test_a_partial_collection_keeps_what_it_fetched_and_names_what_is_missing(tmp_path):
    real = _parquet_bytes(tmp_path)
    routes = {
        "/records": _listed(("a.parquet", len(real)), ("b.parquet", 9), ("c.json", 2)),
        "/records/a.parquet": _file(real),
        "/records/c.json": _file(b"{}"),
    }
    into = tmp_path / "run" / "sent"
    with _peer(routes) as url, pytest.raises(PeerError, match=r"b\.parquet: HTTP 404") as found:
        fetch_all(url, into, timeout_s=2)
    assert found.value.fetched == [into / "a.parquet"] and (into / "a.parquet").read_bytes() == real
    assert found.value.missing == ["b.parquet", "c.json"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_peer_is_named(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(PeerError, match=r"unreachable \(.*[Cc]onnection refused"):
        fetch_all(url, tmp_path / "sent", timeout_s=1)


def _evbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evbench", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (
            ["collect", "--sender", "notaurl", "--receiver", "http://127.0.0.1:1", "--sut", "x"],
            2,
            "argument --sender: 'notaurl' is not an http:// or https:// URL",
        ),
        (
            ["collect", "--sender", "http://127.0.0.1:1", "--receiver", "http://:80", "--sut", "x"],
            2,
            "argument --receiver: 'http://:80' has no usable host and port",
        ),
        (
            ["search", "--sut", "direct", "--from", "2000", "--max", "1000"],
            2,
            "--max 1000 is below --from 2000",
        ),
        (
            ["search", "--sut", "direct", "--hold", "30", "--confirm", "10"],
            2,
            "--confirm 10 is shorter than --hold 30",
        ),
    ],
    ids=["collect bad url", "collect no host", "search max below from", "search confirm < hold"],
)
def test_contradictions_and_bad_urls_are_one_line_errors(args, code, said):
    done = _evbench(*args)
    assert done.returncode == code, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith(("usage", " "))]
    assert len(errors) == 1, done.stderr


def test_collect_from_peers_that_are_not_there_names_each_and_exits_1(tmp_path):
    sender, receiver = (f"http://127.0.0.1:{_free_port()}" for _ in range(2))
    done = _evbench(
        "collect", "--sender", sender, "--receiver", receiver, "--sut", "x",
        "--runs-dir", str(tmp_path), "--no-analyze",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    for url in (sender, receiver):
        assert f"{url}/records: unreachable" in done.stderr, done.stderr
    assert f"{receiver}/stats: unreachable" in done.stderr
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # nothing half-made


def _serve(directory: Path) -> tuple[ThreadingHTTPServer, Callable[[str], int]]:
    httpd = server(directory, "127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def status(path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{httpd.server_port}{path}") as answer:
                return int(answer.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    return httpd, status


def test_serve_records_serves_only_records_inside_its_directory(tmp_path, capsys):
    served, secret = tmp_path / "served", tmp_path / "secret.parquet"
    (served / "sent").mkdir(parents=True)
    (served / "sent" / "part-000000.parquet").write_bytes(_parquet_bytes(tmp_path))
    secret.write_bytes(_parquet_bytes(tmp_path))
    os.symlink(secret, served / "sent" / "evil.parquet")  # a readable Parquet file, outside
    os.symlink(served / "sent" / "part-000000.parquet", served / "sent" / "alias.parquet")
    (served / "a.parquet").write_bytes(b"no")  # named like a record, is not one
    (served / "dir.parquet").mkdir()
    assert [f["path"] for f in listing(served)["files"]] == [
        "sent/alias.parquet",  # a link that stays inside is a record like its target
        "sent/part-000000.parquet",
    ]
    httpd, status = _serve(served)
    try:
        assert status("/records") == 200
        assert status("/records/sent/part-000000.parquet") == 200
        for path in ("/records/sent/evil.parquet", "/records/a.parquet", "/records/dir.parquet"):
            assert status(path) == 404, path
    finally:
        httpd.shutdown()
        httpd.server_close()
    logged = capsys.readouterr().err
    assert f"sent/evil.parquet: not served (a link to {secret}, outside" in logged
    assert "a.parquet: not served (not a readable Parquet file)" in logged


def test_a_receivers_records_are_served_on_the_same_terms(tmp_path, receiver):
    # The receiver's GET /records shares the listing: a link pointing out of its records and a
    # file that only looks like Parquet are neither listed nor served.
    secret = tmp_path / "secret.parquet"
    secret.write_bytes(_parquet_bytes(tmp_path))
    receiver.out.mkdir(parents=True, exist_ok=True)
    os.symlink(secret, receiver.out / "evil.parquet")
    (receiver.out / "a.parquet").write_bytes(b"no")
    with urllib.request.urlopen(f"{receiver.url}/records", timeout=10) as answer:
        listed = [f["path"] for f in json.load(answer)["files"]]
    assert "evil.parquet" not in listed and "a.parquet" not in listed
    for name in ("evil.parquet", "a.parquet"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{receiver.url}/records/{name}", timeout=10)
        assert refused.value.code == 404, name


def _raw_listing(files: list[object]) -> Route:
    return (200, json.dumps({"files": files}).encode(), 0.0, 1 << 20)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"path": "a\x00.parquet", "bytes": 1}, "not a relative path"),
        ({"path": "", "bytes": 1}, "not a relative path"),
        ({"path": ".", "bytes": 1}, "not a record's name"),
        ({"path": "sent\\..\\x.json", "bytes": 1}, "not a relative path"),
        ({"path": "notes.txt", "bytes": 1}, "not a record's name"),
        ({"path": ["x"], "bytes": 1}, "not a relative path"),
        ({"path": "a.json", "bytes": True}, "a size of True bytes"),
        ({"path": "a.json", "bytes": -1}, "a size of -1 bytes"),
        ({"path": "a.json", "bytes": 1 << 40}, "a size of"),
        # Before: a RecursionError or ENAMETOOLONG out of mkdir (and out of the `finally` that
        # removes the part file, over the peer's error): a traceback instead of a refusal.
        ({"path": "a/" * 2000 + "x.json", "bytes": 1}, "a path too deep or too long"),
        ({"path": "a/" * 100 + "x.json", "bytes": 1}, "a path too deep or too long"),
        ({"path": "a" * 256 + ".json", "bytes": 1}, "a path too deep or too long"),
    ],
    ids=[
        "NUL",
        "empty",
        "dot",
        "backslashes",
        "not a record",
        "a list",
        "a bool",
        "<0",
        "huge",
        "2000 levels",
        "100 levels",
        "a 256-byte name",
    ],
)
def test_a_listed_entry_that_is_no_record_is_refused(tmp_path, entry, said):
    with _peer({"/records": _raw_listing([entry])}) as url, pytest.raises(PeerError, match=said):
        fetch_all(url, tmp_path / "sent", timeout_s=2)


def test_infinity_is_no_size(tmp_path):
    body = b'{"files": [{"path": "a.json", "bytes": Infinity}]}'
    answer = {"/records": (200, body, 0.0, 1 << 20)}
    with _peer(answer) as url, pytest.raises(PeerError, match="a size of inf bytes"):
        fetch_all(url, tmp_path / "sent", timeout_s=2)


def test_a_file_listed_twice_or_by_two_peers_is_refused(tmp_path):
    twice = {"/records": _listed(("a.json", 2), ("a.json", 2)), "/records/a.json": _file(b"{}")}
    with _peer(twice) as url, pytest.raises(PeerError, match="listed twice"):
        fetch_all(url, tmp_path / "one", timeout_s=2)
    routes = {"/records": _listed(("a.json", 2)), "/records/a.json": _file(b"{}")}
    taken: set[str] = set()
    with _peer(routes) as first, _peer(routes) as second:
        fetch_all(first, tmp_path / "two", timeout_s=2, taken=taken)
        with pytest.raises(PeerError, match="listed twice"):
            fetch_all(second, tmp_path / "two", timeout_s=2, taken=taken)


def test_a_redirect_is_an_answer_not_followed(tmp_path):
    elsewhere = {"Location": "ftp://127.0.0.1/records"}
    answer = {"/records": (302, b"", 0.0, 1)}
    with _peer(answer, elsewhere) as url, pytest.raises(PeerError, match="HTTP 302"):
        fetch_all(url, tmp_path / "sent", timeout_s=2)


@contextmanager
def _raw_peer(answer: bytes) -> Iterator[str]:
    """A peer that answers every connection with `answer`, HTTP or not, then closes."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                connection.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.mark.parametrize(
    "answer",
    [b"hello\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"],
    ids=["not HTTP", "a body cut short"],
)
def test_a_malformed_answer_is_named_not_a_traceback(tmp_path, answer):
    with _raw_peer(answer) as url, pytest.raises(PeerError, match=url):
        fetch_all(url, tmp_path / "sent", timeout_s=2)


def test_collect_keeps_what_it_fetched_names_the_rest_and_a_bad_stats(tmp_path):
    real = _parquet_bytes(tmp_path)
    sender_routes = {
        "/records": _listed(("sent-w0-000000.parquet", len(real)), ("_sender-w0.json", 2)),
        "/records/sent-w0-000000.parquet": _file(real),
    }
    receiver_routes = {"/records": _listed(), "/stats": _file(b'{"not": "counters"}')}
    with _peer(sender_routes) as sender, _peer(receiver_routes) as receiver:
        done = _evbench(
            "collect", "--sender", sender, "--receiver", receiver, "--sut", "x",
            "--runs-dir", str(tmp_path / "runs"), "--no-analyze",
        )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    kept = tmp_path / "runs" / ".collecting-x" / "sent" / "sent-w0-000000.parquet"
    assert kept.read_bytes() == real and f"kept in {kept.parent.parent}" in done.stderr
    assert f"sender {sender}/records/_sender-w0.json: HTTP 404" in done.stderr
    assert "1 files fetched, missing: _sender-w0.json" in done.stderr
    assert f"receiver the receiver's counters at {receiver} without" in done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--sut", "x/../../victim"], "argument --sut: --sut 'x/../../victim' is not allowed"),
        (["--sut", "x", "--sender", "http://h:1/a b"], "holds a space or a control character"),
    ],
    ids=["a --sut that is a path", "a URL with a space"],
)
def test_collect_refuses_what_would_become_a_bad_path_or_url(args, said):
    sender = [] if "--sender" in args else ["--sender", "http://127.0.0.1:1"]
    done = _evbench("collect", *sender, "--receiver", "http://127.0.0.1:1", *args)
    assert done.returncode == 2 and said in done.stderr, done.stderr


def test_a_grace_longer_than_its_cap_is_refused_naming_both():
    done = _evbench("run", "--sut", "direct", "--pace", "10:1", "--grace", "10", "--grace-cap", "5")
    assert done.returncode == 2, done.stderr
    assert "--grace 10 is longer than --grace-cap 5" in done.stderr
