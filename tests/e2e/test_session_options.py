"""Every command that drives a system takes the session's options with one meaning: the receiver
listens where --receiver-port says, and the user's own system, started here outside the lab's
drivers (an HTTP hop of the test's own, a Kafka broker of the test's own), gets the events."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from contract.documents import RunDoc, problems
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from evbench.searchplan import Resolution
from runtime.parquet import read_parts
from suts.tansu import Tansu, create_topic
from tests.e2e.hops import HttpHop, KafkaHop

pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def receiver_port() -> int:
    return _free_port()


@pytest.fixture
def hop(receiver_port: int) -> Iterator[HttpHop]:
    started = HttpHop(f"http://127.0.0.1:{receiver_port}/")
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


def _run(tmp_path: Path, port: int, hop: HttpHop, kafka: str) -> Path:
    done = _evbench(
        tmp_path, "run", "--sut", "external", "--ingress", hop.url, "--receiver-port",
        str(port), "--pace", "100:2", "--run-id", "r", "--no-analyze", "--payload-bytes", "512",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").glob("r-*")  # named for the inline pace
    return run_dir / "external"


def _search(tmp_path: Path, port: int, hop: HttpHop, kafka: str) -> Path:
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


def _memory(tmp_path: Path, port: int, hop: HttpHop, kafka: str) -> Path:
    done = _evbench(
        tmp_path, "memory", "--consumers", "source", "--kafka-bootstrap", kafka,
        "--receiver-port", str(port), "--partitions", "2", "--fill-events", "200",
        "--consume", "10", "--run-id", "m", "--no-analyze",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp_path / "runs" / "m-memory" / "source-p2"


COMMANDS: dict[str, Callable[[Path, int, HttpHop, str], Path]] = {
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
        # the figures the built-in broker's path reports, and no topic of its own left behind
        assert result["figures"]["peak_bytes"] > 0 and result["lag"] and result["fill_s"] > 0
        assert not [t for t in _topics(kafka) if t.startswith("evbench-")]
        return
    # Only a receiver on that port gets what the hop forwards: every event sent arrived.
    sent = read_parts(root / "sent", SENT_FIELDS).to_pylist()
    assert sent and {r["event_id"] for r in received} == {r["event_id"] for r in sent}
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


@pytest.fixture
def miswired_hop(receiver_port: int) -> Iterator[HttpHop]:
    """A hop whose subscription names a port no receiver listens on: a wiring mistake."""
    started = HttpHop(f"http://127.0.0.1:{_free_port()}/")
    yield started
    started.close()


@pytest.mark.parametrize("command", ["run", "search"])
def test_acks_without_a_single_delivery_are_named_a_wiring_mistake(
    tmp_path, receiver_port, miswired_hop, command
):
    hop = miswired_hop
    common = ["--sut", "external", "--ingress", hop.url, "--receiver-port", str(receiver_port)]
    if command == "run":
        args = ["--pace", "200:1", "--grace", "1"]
    else:  # without the diagnosis, it bisected down to 1/s: 8 probes, 5 minutes
        args = ["--from", "200", "--max", "400", "--hold", "1", "--confirm", "2", "--grace", "1"]
    done = _evbench(tmp_path, command, *common, *args, "--run-id", "w", "--no-analyze")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "wiring mistake, not the system's collapse" in done.stderr, done.stderr[-3000:]
    assert f"delivers to http://127.0.0.1:{receiver_port}/" in done.stderr
    assert hop.forwarder.undeliverable > 0 and hop.forwarder.forwarded == 0
    (run_json,) = (tmp_path / "runs").glob("w-*/external/run.json")
    run = json.loads(run_json.read_text())
    assert run["status"] == "failed" and "wiring mistake" in run["instrument_failures"][0]
    assert run["receiver"]["url"] == f"http://127.0.0.1:{receiver_port}/"
    if command == "search":
        assert len(run["search"]["probes"]) <= 1 and "probe 2" not in done.stderr


def _searched(tmp_path: Path, run_id: str, *args: str) -> dict:
    done = _evbench(
        tmp_path, "search", "--sut", "external", "--from", "200", "--resolution", "10%",
        "--hold", "3", "--confirm", "5", "--settle", "0.5", "--grace", "2",
        "--payload-bytes", "1024", "--run-id", run_id, "--no-analyze", *args,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    root = tmp_path / "runs" / f"{run_id}-search" / "external"
    run = json.loads((root / "run.json").read_text())
    # The whole search is one run: every probe a step, in run.json and in the records, and the
    # system (the user's, which the search cannot restart) kept warm throughout.
    assert problems(run, RunDoc) == [] and run["status"] == "completed"
    probes = run["search"]["probes"]
    assert len(probes) == run["search"]["result"]["probes"] == len(run["pace"]["steps"])
    # The answer held a confirmation; the search may end on one that broke just above it
    # (CI: 315/s held its confirmation, then 332/s broke, within the resolution: done).
    held = run["search"]["result"]["max_sustainable_per_s"]
    assert any(p["confirm"] and p["verdict"] == "holds" and p["rate_per_s"] == held for p in probes)
    assert [p["restarted"] for p in probes] == [None] * len(probes), done.stderr[-3000:]
    steps = {r["step"] for r in read_parts(root / "sent", SENT_FIELDS).to_pylist()}
    assert steps == set(range(1, len(probes) + 1))
    return run["search"]["result"] | {"stderr": done.stderr}


def _brackets(found: dict, capacity: int) -> None:
    """The search's answer is the capacity, within its resolution (10 %) on either side: a hop
    whose queue absorbs a few seconds of excess may hold a confirmation a hair above its rate,
    and its rate is a ceiling, not a promise: one Python thread forwarding each event on two
    busy cores may fall a few percent short of it (CI saw a 330/s Kafka hop break at 325/s)."""
    held, broke = found["highest_hold_per_s"], found["lowest_break_per_s"]
    assert held is not None and broke is not None, found["stderr"][-3000:]
    assert abs(held - capacity) <= 0.1 * capacity, found["stderr"][-3000:]
    assert 0.9 * capacity < broke and Resolution(fraction=0.10).gap_ok(held, broke), found["why"]


# Off the probe grid (200, 400, 800 and the bisection's midpoints): a capacity probed exactly
# has no headroom, and any stall reads as a rise. Alone: a probe below the capacity "holds"
# only with the sender on its slots (lag p99 <= 10 ms), which a busy neighbour can spoil.
@pytest.mark.alone
def test_a_search_brackets_the_capacity_of_the_users_http_hop(tmp_path, receiver_port):
    capacity = 730
    hop = HttpHop(f"http://127.0.0.1:{receiver_port}/", rate_per_s=capacity, queue_limit=300)
    try:
        found = _searched(
            tmp_path, "h", "--ingress", hop.url, "--receiver-port", str(receiver_port)
        )
    finally:
        hop.close()
    _brackets(found, capacity)


@pytest.mark.alone
def test_a_search_brackets_the_capacity_of_the_users_kafka_source(tmp_path, receiver_port, kafka):
    capacity = 330
    create_topic(kafka, "users-events", 4, 1)
    hop = KafkaHop(kafka, "users-events", f"http://127.0.0.1:{receiver_port}/", capacity)
    try:
        hop.wait_assigned()
        found = _searched(
            tmp_path, "k", "--kafka-bootstrap", kafka, "--topic", "users-events",
            "--receiver-port", str(receiver_port),
        )  # fmt: skip
    finally:
        hop.close()
    _brackets(found, capacity)


def _topics(bootstrap: str) -> list[str]:
    return list(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def test_memory_drains_the_users_topic_as_it_is_and_leaves_it(tmp_path, kafka, receiver_port):
    create_topic(kafka, "users-backlog", 3, 1)
    # One record a batch: Tansu answers ListOffsets with the base offset of a partition's last
    # batch (plus one), which is its end only then; a real Kafka answers the end whatever the
    # batching, and evbench takes the broker's word for a topic it did not write.
    producer = Producer({"bootstrap.servers": kafka, "linger.ms": 0})
    for n in range(150):
        producer.produce("users-backlog", value=b"x" * 512, key=str(n).encode())
        assert producer.flush(10) == 0
    done = _evbench(
        tmp_path, "memory", "--consumers", "confluent", "--kafka-bootstrap", kafka,
        "--topic", "users-backlog", "--consume", "8", "--run-id", "d", "--no-analyze",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(
        (tmp_path / "runs" / "d-memory" / "confluent-p3" / "scenario.json").read_text()
    )
    assert result["produced"] == 150 == result["consumed"] and result["partitions"] == 3
    assert result["kafka"]["topic"] == "users-backlog" and result["never_consumed"] == []
    assert "users-backlog" in _topics(kafka)  # drained, never deleted
    assert sum(r["end"] for r in result["lag"]) == 150  # nothing written to it either


def test_memory_refuses_a_topic_that_is_not_there(tmp_path, kafka):
    done = _evbench(
        tmp_path, "memory", "--consumers", "confluent", "--kafka-bootstrap", kafka,
        "--topic", "nobody-made-this", "--run-id", "n", "--no-analyze",
    )  # fmt: skip
    assert done.returncode != 0 and "no topic nobody-made-this" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs" / "n-memory").exists()
