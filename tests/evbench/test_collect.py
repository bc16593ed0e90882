"""Records served over HTTP and collected into a run directory that analyses like the local
run it came from."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.job import AnalyzeOptions, analyze_sut
from contract.documents import RunDoc, problems
from evbench.instruments import start_receiver
from runtime.procs import Child
from runtime.recordshare import fetch_all, listing, resolve, server
from tests.conftest import WITHOUT_HOST_RULE

pytestmark = pytest.mark.e2e


def test_only_complete_record_files_are_listed_and_served(tmp_path):
    (tmp_path / "sent").mkdir()
    pq.write_table(pa.table({"x": [1]}), tmp_path / "sent" / "sent-w0-00000.parquet")
    record = (tmp_path / "sent" / "sent-w0-00000.parquet").read_bytes()
    (tmp_path / "sent" / ".sent-w0-00001.parquet.tmp").write_bytes(b"half")  # being written
    (tmp_path / "sent" / "_sender-w0.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("not a record")
    assert listing(tmp_path) == {
        "files": [
            {"path": "sent/_sender-w0.json", "bytes": 2},
            {"path": "sent/sent-w0-00000.parquet", "bytes": len(record)},
        ]
    }
    assert resolve(tmp_path, "/records/sent/_sender-w0.json") == tmp_path / "sent/_sender-w0.json"
    for refused in (
        "/records/../etc/passwd",
        "/records/notes.txt",
        "/records/sent/.sent-w0-00001.parquet.tmp",
    ):
        assert resolve(tmp_path, refused) is None

    httpd = server(tmp_path, "127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        fetched = fetch_all(f"http://127.0.0.1:{httpd.server_port}", tmp_path / "home")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert sorted(p.relative_to(tmp_path / "home").as_posix() for p in fetched) == [
        "sent/_sender-w0.json",
        "sent/sent-w0-00000.parquet",
    ]
    assert (tmp_path / "home/sent/sent-w0-00000.parquet").read_bytes() == record


def _evbench(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evbench", *args], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr


def test_a_collected_run_analyses_like_the_local_run_it_came_from(tmp_path, spark):
    _evbench(
        "run", "--sut", "direct", "--pace", "200:2", "--runs-dir", str(tmp_path / "there"),
        "--run-id", "a", "--no-analyze",
    )  # fmt: skip
    there = tmp_path / "there" / "a-200x2" / "direct"
    # As in a cluster: a receiver serves its records, `evbench serve-records` the sender's.
    receiver, receiver_url = start_receiver(there / "received", tmp_path / "rx.log")
    serving = Child(
        "serve",
        [sys.executable, "-m", "evbench", "serve-records", str(there / "sent"), "--port", "0"],
        tmp_path / "serve.log",
    )
    try:
        port = serving.wait_for("listening", 30)["port"]
        _evbench(
            "collect", "--sender", f"http://127.0.0.1:{port}", "--receiver", receiver_url,
            "--sut", "direct", "--runs-dir", str(tmp_path / "home"), "--run-id", "b",
            "--no-analyze",
        )  # fmt: skip
        # A peer whose pace this host cannot read is the peer's failure (exit 1, naming its
        # summary), not the user's bad input (exit 2) (issue 33, item 11).
        summary = there / "sent" / "_sender-w0.json"
        original = summary.read_text()
        doc = json.loads(original)
        doc["argv"][doc["argv"].index("--pace") + 1] = "no-such-pace"
        summary.write_text(json.dumps(doc))
        bad = subprocess.run(
            [sys.executable, "-m", "evbench", "collect", "--sender", f"http://127.0.0.1:{port}",
             "--receiver", receiver_url, "--sut", "direct", "--runs-dir", str(tmp_path / "bad"),
             "--no-analyze"],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert bad.returncode == 1, bad.stderr
        assert "_sender-w0.json: not a sender's summary" in bad.stderr, bad.stderr
        summary.write_text(original)  # as the run left it, for the comparison below
    finally:
        serving.stop()
        receiver.stop()
    home = tmp_path / "home" / "b-200x2" / "direct"
    for records in ("sent", "received"):
        assert listing(home / records) == listing(there / records)
    collected = json.loads((home / "run.json").read_text())
    assert problems(collected, RunDoc) == []
    assert (
        collected["status"] == "completed"
        and collected["schedule"]["start_ns"]
        == json.loads((there / "run.json").read_text())["schedule"]["start_ns"]
    )

    # The records come home, the local session's host samples do not (they are the machine the
    # run was conducted from): judged without the host rule, each step's host figures aside.
    local = analyze_sut(spark, there, AnalyzeOptions(thresholds=WITHOUT_HOST_RULE))
    remote = analyze_sut(spark, home, AnalyzeOptions(thresholds=WITHOUT_HOST_RULE))
    for step in (*local["steps"], *remote["steps"]):
        step.pop("host")
    for key in ("counts", "latency_ms", "steps", "verdict", "breaking_point_per_s"):
        assert remote[key] == local[key], key
