"""CloudEvent attributes across hops and trigger filters (pure)."""

import pytest

from suts.cloudevents import (
    forward_headers,
    from_kafka_headers,
    http_attributes,
    matches,
    parse_filter,
    source_event_headers,
    to_kafka_headers,
)
from suts.offsets import OffsetBook, PartitionOffsets

BINARY = {
    "ce-specversion": "1.0",
    "ce-id": "a-0-1",
    "ce-source": "s",
    "ce-type": "t",
    "ce-evbenchid": "a-0-1",
    "content-type": "application/json",
    "Host": "x",
}


@pytest.mark.parametrize(
    ("headers", "body", "error"),
    [
        ({"ce-id": "1", "ce-source": "s", "ce-type": "t"}, b"", "missing specversion"),
        ({}, b"{}", "missing specversion, id, source, type"),
        ({"content-type": "application/cloudevents+json"}, b"nope", "not JSON"),
        ({"content-type": "application/cloudevents+json"}, b"[1]", "not a JSON object"),
        ({"content-type": "application/cloudevents+json"}, b'{"id":"1"}', "missing specversion"),
    ],
)
def test_not_an_event_is_named(headers, body, error):
    with pytest.raises(ValueError, match=error):
        http_attributes(headers, body)


def test_attributes_from_binary_and_structured_modes():
    assert http_attributes(BINARY, b"")["evbenchid"] == "a-0-1"
    structured = b'{"specversion":"1.0","id":"7","source":"s","type":"t","data":{"x":1}}'
    got = http_attributes({"content-type": "application/cloudevents+json"}, structured)
    assert got == {"specversion": "1.0", "id": "7", "source": "s", "type": "t"}


def test_headers_survive_a_kafka_hop():
    forwarded = forward_headers(BINARY)
    assert "Host" not in forwarded
    kafka = to_kafka_headers(forwarded)
    assert ("ce_evbenchid", b"a-0-1") in kafka
    assert from_kafka_headers(kafka) == {k.lower(): v for k, v in forwarded.items()}
    assert from_kafka_headers(None) == {}


def test_source_adapter_builds_its_own_event():
    headers = source_event_headers("topic", 3, 42, b"a-0-1", None)
    assert headers["ce-id"] == "partition:3/offset:42"
    assert headers["ce-key"] == "a-0-1" and "ce-evbenchid" not in headers


@pytest.mark.parametrize(
    ("specs", "attributes", "passes"),
    [
        ([], {"type": "x"}, True),
        (["type=a"], {"type": "a"}, True),
        (["type=a"], {"type": "b"}, False),
        (["type=a", "type=b"], {"type": "b"}, True),
        (["type=a,source=s"], {"type": "a", "source": "s"}, True),
        (["type=a,source=s"], {"type": "a", "source": "z"}, False),
        (["TYPE = a"], {"type": "a"}, True),
        (["type=a"], {}, False),
    ],
)
def test_trigger_filter(specs, attributes, passes):
    assert matches(parse_filter(specs), attributes) is passes


@pytest.mark.parametrize("spec", ["type", "=a", "type=a,source"])
def test_bad_filter_names_the_pair(spec):
    with pytest.raises(ValueError, match="is not ATTRIBUTE=VALUE"):
        parse_filter([spec])


def test_commit_stops_at_the_first_undelivered_offset():
    offsets = PartitionOffsets()
    assert offsets.committable() is None
    for offset in (10, 11, 12, 13):
        offsets.taken(offset)
    offsets.done(11)
    offsets.done(13)
    assert offsets.committable() == 10  # 10 still pending: a restart must re-read it
    offsets.done(10)
    assert offsets.committable() == 12
    offsets.done(12)
    assert offsets.committable() == 14


def test_offset_book_hands_over_only_moves():
    book = OffsetBook()
    book.taken(0, 5)
    book.taken(1, 7)
    book.done(1, 7)
    assert book.to_commit() == {0: 5, 1: 8}
    assert book.to_commit() == {}
    book.done(0, 5)
    assert book.to_commit() == {0: 6}
    book.forget([0])
    book.taken(0, 9)
    assert book.to_commit() == {0: 9}


@pytest.mark.parametrize(
    ("end", "committed", "low", "lag"),
    [(10, 4, 0, 6), (10, None, 0, 10), (10, None, 3, 7), (10, 10, 0, 0), (5, 9, 0, 0)],
)
def test_partition_lag(end, committed, low, lag):
    from suts.lag import partition_lag

    assert partition_lag(end, committed, low) == lag
