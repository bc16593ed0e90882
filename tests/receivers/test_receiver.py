"""The receiver as a real process on a loopback port."""

import json
import signal
import socket
import sys
import time

import httpx
import pytest

from contract.documents import problems
from contract.receiverlines import Listening, ReceiverStopped
from contract.records import RECEIVED_FIELDS
from loadgen.payload import PayloadBuilder
from runtime.parquet import read_parts
from runtime.procs import Child
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e

BINARY_HEADERS = {
    "ce-specversion": "1.0",
    "ce-type": "dev.evbench.measure",
    "ce-source": "tests",
    "content-type": "application/json",
}


def _binary(client: httpx.Client, url: str, ce_id: str, evbenchid: str | None, body: bytes):
    headers = {**BINARY_HEADERS, "ce-id": ce_id}
    if evbenchid is not None:
        headers["ce-evbenchid"] = evbenchid
    return client.post(url, content=body, headers=headers)


def _received(receiver) -> dict[str, dict]:
    receiver.child.stop()
    table = read_parts(receiver.out, RECEIVED_FIELDS).to_pylist()
    return {row["event_id"]: row for row in table}


def test_binary_and_structured_events_are_identified_and_recorded(receiver):
    payloads = PayloadBuilder(8192, longest_id=32, seed=2)
    before_ns = time.time_ns()
    with httpx.Client(timeout=5) as client:
        # ce-evbenchid wins over ce-id
        assert (
            _binary(client, receiver.url, "ce-1", "ev-1", payloads.build("ev-1")).status_code == 202
        )
        # no extension (a source rewrote ce-id): the payload's id wins over ce-id
        assert (
            _binary(client, receiver.url, "topic/3/17", None, payloads.build("ev-2")).status_code
            == 202
        )
        # no extension, a foreign payload: ce-id is all there is
        assert _binary(client, receiver.url, "ev-3", None, b"plain text").status_code == 202
        structured = {
            "specversion": "1.0",
            "id": "ce-4",
            "source": "s",
            "type": "t",
            "evbenchid": "ev-4",
            "data": {"x": 1},
        }
        response = client.post(
            receiver.url + "/any/path?trigger=1",
            content=json.dumps(structured),
            headers={"content-type": "application/cloudevents+json"},
        )
        assert response.status_code == 202
        structured_data_id = {
            "specversion": "1.0",
            "id": "ce-5",
            "source": "s",
            "type": "t",
            "data": {"evbenchid": "ev-5"},
        }
        response = client.post(
            receiver.url,
            content=json.dumps(structured_data_id),
            headers={"content-type": "application/cloudevents+json; charset=utf-8"},
        )
        assert response.status_code == 202
        stats = client.get(receiver.url + "/stats").json()
    after_ns = time.time_ns()
    assert stats["received"] == 5 and stats["malformed"] == 0
    rows = _received(receiver)
    assert sorted(rows) == ["ev-1", "ev-2", "ev-3", "ev-4", "ev-5"]
    assert rows["ev-2"]["ce_id"] == "topic/3/17"
    assert rows["ev-1"]["payload_bytes"] == 8192
    assert rows["ev-1"]["ce_type"] == "dev.evbench.measure" and rows["ev-1"]["ce_source"] == "tests"
    assert rows["ev-4"]["ce_id"] == "ce-4" and rows["ev-4"]["receiver"] == "rx"
    # Each delivery names its subscriber: the path it came to, without the query.
    assert rows["ev-4"]["subscriber"] == "/any/path"
    assert {rows[e]["subscriber"] for e in ("ev-1", "ev-2", "ev-3", "ev-5")} == {"/"}
    assert all(before_ns <= r["received_ns"] <= after_ns for r in rows.values())


MALFORMED = [
    ({"ce-specversion": "1.0", "ce-source": "s", "ce-type": "t"}, b"{}", "ce-id"),
    ({"ce-id": "1"}, b"{}", "ce-specversion, ce-source, ce-type"),
    ({"content-type": "application/cloudevents+json"}, b"{not json", "not JSON"),
    ({"content-type": "application/cloudevents+json"}, b"[1, 2]", "not a JSON object"),
    ({"content-type": "application/cloudevents+json"}, b'{"id": "x"}', "specversion, source, type"),
]


def test_malformed_events_get_400_and_the_receiver_keeps_serving(receiver):
    with httpx.Client(timeout=5) as client:
        for headers, body, reason in MALFORMED:
            response = client.post(receiver.url, content=body, headers=headers)
            assert response.status_code == 400, headers
            assert reason in response.text
        # not HTTP at all, on a raw socket: 400 and the connection is closed
        with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as raw:
            raw.sendall(b"\x00\x01garbage that is not HTTP\r\n\r\n")
            answer = raw.recv(4096)
            assert answer.startswith(b"HTTP/1.1 400")
            assert raw.recv(4096) == b""  # closed by the receiver
        assert client.get(receiver.url + "/nope").status_code == 404
        ok = _binary(client, receiver.url, "fine", "fine", b"{}")
        assert ok.status_code == 202
        stats = client.get(receiver.url + "/stats").json()
    assert stats["malformed"] == len(MALFORMED) + 1
    assert stats["received"] == 1
    assert receiver.child.alive()
    assert list(_received(receiver)) == ["fine"]


def test_records_reach_disk_within_the_flush_interval_and_survive_sigkill(receiver):
    payloads = PayloadBuilder(1024, longest_id=16, seed=3)
    with httpx.Client(timeout=5) as client:
        for i in range(300):
            assert (
                _binary(
                    client, receiver.url, f"a-{i}", f"a-{i}", payloads.build(f"a-{i}")
                ).status_code
                == 202
            )
        # Flushed by the receiver's own timer (at least once a second), not by a shutdown.
        wait_until(
            lambda: client.get(receiver.url + "/stats").json()["rows_written"] >= 300,
            timeout_s=3,
            what="the first batch on disk",
        )
        for i in range(50):
            _binary(client, receiver.url, f"b-{i}", f"b-{i}", payloads.build(f"b-{i}"))
    receiver.child.signal(signal.SIGKILL)
    assert receiver.child.wait(10) == -signal.SIGKILL
    ids = {row["event_id"] for row in read_parts(receiver.out, RECEIVED_FIELDS).to_pylist()}
    assert {f"a-{i}" for i in range(300)} <= ids  # every part on disk is complete and readable


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_clean_stop_flushes_everything(receiver, sig):
    with httpx.Client(timeout=5) as client:
        for i in range(20):
            assert _binary(client, receiver.url, f"c-{i}", f"c-{i}", b"{}").status_code == 202
    receiver.child.signal(sig)
    assert receiver.child.wait(10) == 0
    ids = {row["event_id"] for row in read_parts(receiver.out, RECEIVED_FIELDS).to_pylist()}
    assert ids == {f"c-{i}" for i in range(20)}


def test_start_up_is_kept_out_of_collections_and_each_collection_is_timed(receiver):
    """A full collection holds the loop for as long as it walks (runtime/gcpauses.py): the
    receiver freezes what start-up made (pyarrow alone leaves tens of thousands of objects)
    and counts its collections and the longest into its stats."""
    with httpx.Client() as client:
        for i in range(1500):  # more than a young collection's 700 objects, as rows
            assert _binary(client, receiver.url, f"g-{i}", f"g-{i}", b"{}").status_code == 202
    stats = httpx.get(f"{receiver.url}/stats", timeout=5).json()
    assert stats["gc_frozen_objects"] > 10_000, stats
    assert stats["gc_pauses"] > 0, stats
    assert 0 < stats["gc_pause_max_ms"] < 60_000, stats


def test_the_receivers_lines_are_their_documented_types(tmp_path):
    child = Child(
        "rx",
        [sys.executable, "-m", "receivers", "--out", str(tmp_path / "rx"), "--port", "0"],
        tmp_path / "rx.log",
    )
    try:
        listening = child.wait_for("listening", 30)
        assert problems(listening, Listening) == []
    finally:
        assert child.stop() == 0
    last = None
    while (doc := child.next_line(5)) is not None:
        last = doc
    assert last is not None and problems(last, ReceiverStopped) == []
