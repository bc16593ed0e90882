"""The sender's Kafka path as a real process against a real Kafka-protocol broker (Tansu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.records import KAFKA_ACK_STATUS, SENT_FIELDS
from loadgen.settings import SenderSettings
from runtime.parquet import read_parts
from suts.tansu import Tansu, create_topic

pytestmark = pytest.mark.e2e


def test_a_burst_of_acks_is_read_across_polls_and_every_record_is_acked_once(tmp_path: Path):
    """A 300 ms linger makes one broker response ack ~300 records; their callbacks take far
    longer than one poll's 100 µs budget (a Python callback costs microseconds), so the poll must
    yield part-way through and the rest must still arrive, each exactly once."""
    broker = Tansu(tmp_path / "tansu.log")
    bootstrap = broker.start()
    try:
        create_topic(bootstrap, "burst", 2, 1)
        child = SenderSettings(
            target=f"kafka://{bootstrap}/burst",
            pace="1000:2",
            out=tmp_path / "sent",
            kafka_config=("linger.ms=300",),
            start_delay_s=0.2,
        ).start(tmp_path / "sender.log")
        step = child.wait_for("step_end", 60)
        done = child.wait_for("done", 60)
        assert child.wait(10) == 0
    finally:
        broker.stop()
    assert step["producer_poll_yields"] > 0, "no poll ever ran out of its budget"
    rows = read_parts(tmp_path / "sent", SENT_FIELDS).to_pylist()
    assert len(rows) == 2000 == done["ok"]
    assert len({r["seq"] for r in rows}) == 2000
    assert {r["status"] for r in rows} == {KAFKA_ACK_STATUS}
    assert all(r["ack_ns"] >= r["sent_ns"] for r in rows)
