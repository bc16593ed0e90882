"""Predicted consumer buffers from documented settings (pure)."""

import pytest

from suts.consumers.predict import predicted, sarama

EVENT = 8192
LOW_MEMORY = {  # seed 001's low-memory set
    "queued.min.messages": "1",
    "queued.max.messages.kbytes": "3000",
    "fetch.max.bytes": "3000000",
}


@pytest.mark.parametrize(
    ("client", "settings", "partitions", "expected"),
    [
        # defaults: a 65,536 kB queue plus a 50 MiB response
        ("confluent", {}, 100, 65_536_000 + 52_428_800),
        ("source", {}, 1, 65_536_000 + 52_428_800),  # librdkafka's bound has no partition term
        # one queued message stops fetching; a 3 MB response still lands
        ("confluent", LOW_MEMORY, 100, EVENT + 3_000_000),
        # fetch.max.bytes unset: librdkafka derives it from the queue limit
        ("confluent", {"queued.max.messages.kbytes": "3000"}, 1, 3_000_000 + 3_072_000),
        # a small queue by count: 1000 events of 8 KiB
        ("confluent", {"queued.min.messages": "1000"}, 1, 1000 * EVENT + 52_428_800),
        ("aiokafka", {}, 100, 100 * 1_048_576 + 52_428_800),
        ("kafka-python", {}, 1, 1_048_576 + 52_428_800),
        ("kafka-python", {"max_partition_fetch_bytes": "65536"}, 50, 50 * 65_536 + 52_428_800),
    ],
)
def test_buffer_bounds(client, settings, partitions, expected):
    got = predicted(client, settings, partitions, EVENT)
    assert got.buffer_bytes == expected
    assert "MB" in got.formula


def test_the_2019_dispatcher_rule_gives_seed_003s_example():
    # "10 Subscriptions * 4 Partitions * 256 Msgs * 10kB Msg Size = ~100mB HEAP"
    assert sarama(4, 10, 256, 10_000).buffer_bytes == 102_400_000


def test_an_unknown_client_is_refused():
    with pytest.raises(ValueError, match="no buffer model for client 'franz'"):
        predicted("franz", {}, 1, EVENT)


def test_a_lab_consumer_adds_what_it_holds_for_the_subscriber():
    bare = predicted("source", {}, 10, 8192)
    lab = predicted("source", {}, 10, 8192, pending_events=10_000)
    assert lab.buffer_bytes - bare.buffer_bytes == 10_000 * 8192
    assert "10000 pending deliveries" in lab.formula
