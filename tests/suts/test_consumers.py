"""Each memory-evaluation consumer as a real process draining a real backlog on Tansu."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from runtime.procs import Child
from suts.tansu import Tansu, create_topic

pytestmark = pytest.mark.e2e

EVENTS = 200


def _fill(bootstrap: str, topic: str, events: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(events):
        producer.produce(topic, value=b"x" * 8192, key=str(i).encode())
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def backlog(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("backlog")
    broker = Tansu(tmp / "tansu.log")
    bootstrap = broker.start()
    try:
        create_topic(bootstrap, "backlog", 2, 1)
        _fill(bootstrap, "backlog", EVENTS)
        yield bootstrap
    finally:
        broker.stop()


@pytest.mark.parametrize(
    ("client", "settings"),
    # librdkafka (its fetch queue) and a pure-Python client (its heap); every client, aiokafka
    # and the defaults included, also drains a backlog in tests/e2e/test_memory.py
    [
        ("confluent", ["queued.min.messages=1", "queued.max.messages.kbytes=3000"]),
        ("kafka-python", []),
    ],
)
def test_a_consumer_drains_the_backlog_and_says_what_it_consumed(
    backlog, tmp_path: Path, client, settings
):
    group = f"g-{client}-{len(settings)}"
    argv = [
        sys.executable, "-m", "suts.consumers", client, "--bootstrap", backlog,
        "--topic", "backlog", "--group", group, "--expect", str(EVENTS),
        "--tracemalloc", "--trim-after-drain",
        *(arg for s in settings for arg in ("--setting", s)),
    ]  # fmt: skip
    child = Child(client, argv, tmp_path / "consumer.log")
    try:
        ready = child.wait_for("ready", 60)
        assert ready["client"] == client
        trimmed = child.wait_for("trimmed", 60)  # said once the whole backlog was consumed
        assert trimmed["consumed"] >= EVENTS
        progress = child.wait_for("progress", 10)
        assert progress["py_traced_bytes"] > 0 and progress["first_message_ns"] is not None
        if client == "confluent":  # librdkafka's statistics come once a second
            wait = lambda: "fetchq_bytes" in child.wait_for("progress", 10)  # noqa: E731
            assert any(wait() for _ in range(5)), "no fetch queue reported in 5 s"
        child.signal(signal.SIGTERM)
        done = child.wait_for("done", 30)
        code = child.wait(30)  # a second SIGTERM would land in the interpreter's shutdown
    finally:
        if child.alive():
            child.stop()
    assert code == 0
    assert done["consumed"] == EVENTS == sum(done["per_partition"].values())
    assert sorted(done["per_partition"]) == ["0", "1"]  # every partition was consumed
    assert done["errors"] == []
