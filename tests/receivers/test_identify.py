"""Identification and validation of what the receiver records (pure, from tables)."""

from dataclasses import dataclass

import pytest

from receivers.identify import (
    MAX_ID_CHARS,
    Identity,
    InvalidId,
    Malformed,
    identify,
    payload_event_id,
    subscriber_path,
)


@dataclass
class Headers:
    h_evbenchid: bytes | None = None
    h_ce_id: bytes | None = b"ce-1"
    h_ce_type: bytes | None = b"t"
    h_ce_source: bytes | None = b"s"
    h_ce_specversion: bytes | None = b"1.0"
    h_content_type: bytes | None = b"application/json"


STRUCTURED = Headers(h_content_type=b"application/cloudevents+json")


def _doc(id_json: str, extra: str = "") -> bytes:
    return ('{"specversion":"1.0","source":"s","type":"t","id":' + id_json + extra + "}").encode()


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        (Headers(h_evbenchid=b"ev-1"), b"{}", Identity("ev-1", "ce-1", "t", "s")),
        (Headers(), b'{"evbenchid":"ev-2","pad":"x"}', Identity("ev-2", "ce-1", "t", "s")),
        (Headers(), b"plain", Identity("ce-1", "ce-1", "t", "s")),
        # an escape in the fast path is decoded as JSON, not taken literally
        (Headers(), b'{"evbenchid":"a\\u00e9"}', Identity("a\u00e9", "ce-1", "t", "s")),
        (STRUCTURED, _doc('"c"', ',"evbenchid":"ev-3"'), Identity("ev-3", "c", "t", "s")),
        (STRUCTURED, _doc('"c"', ',"data":{"evbenchid":"ev-4"}'), Identity("ev-4", "c", "t", "s")),
        (STRUCTURED, _doc('"c"'), Identity("c", "c", "t", "s")),
    ],
)
def test_identifies_valid_events(headers, body, expected):
    assert identify(headers, body) == expected


@pytest.mark.parametrize(
    ("headers", "body", "reason"),
    [
        (STRUCTURED, _doc('"\\ud800"'), "id is not valid Unicode"),
        (STRUCTURED, _doc('"c"', ',"evbenchid":"\\udfff"'), "evbenchid is not valid Unicode"),
        (STRUCTURED, _doc("null"), "id must be a string, not NoneType"),
        (STRUCTURED, _doc('{"a":1}'), "id must be a string, not dict"),
        (STRUCTURED, _doc("true"), "id must be a string, not bool"),
        (STRUCTURED, _doc("7"), "id must be a string, not int"),
        (STRUCTURED, _doc('""'), "id is empty"),
        (STRUCTURED, _doc('"c"', ',"evbenchid":5'), "evbenchid must be a string"),
        (STRUCTURED, _doc('"' + "x" * (MAX_ID_CHARS + 1) + '"'), "longer than 256"),
        (Headers(), b'{"evbenchid":"\\ud800","pad":"x"}', "payload evbenchid is not valid"),
        (Headers(), b'{"evbenchid":null}', None),  # no id in the payload: falls back to ce-id
        (Headers(h_evbenchid=b"\xff"), b"{}", "ce-evbenchid is not valid UTF-8"),
        (Headers(h_ce_id=b"\xc3("), b"{}", "ce-id is not valid UTF-8"),
        (Headers(h_ce_id=b"x" * 2000), b"{}", "ce-id is longer than 256"),
        (Headers(h_ce_type=b"\xed\xa0\x80"), b"{}", "ce-type is not valid UTF-8"),
        (Headers(h_ce_id=None), b"{}", "lacks ce-id"),
        (STRUCTURED, b"[" * 200_000, "nested too deeply"),
    ],
)
def test_refuses_what_cannot_be_recorded(headers, body, reason):
    if reason is None:
        assert identify(headers, body).event_id == "ce-1"
        return
    with pytest.raises(Malformed, match=reason) as caught:
        identify(headers, body)
    if "lacks" not in reason and "nested" not in reason:
        assert isinstance(caught.value, InvalidId)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"evbenchid":"ev-9","pad":"xx"}', "ev-9"),
        (b'{"other":1}', None),
        (b"not json at all", None),
        (b"[1,2]", None),
        (b"{" + b'"a":[' * 100_000, None),  # nested past the recursion limit
    ],
)
def test_payload_id(body, expected):
    assert payload_event_id(body) == expected


@pytest.mark.parametrize(
    "target, expected",
    [
        (b"/", "/"),
        (b"", "/"),  # nothing before the query: the root
        (b"?x=1", "/"),
        (b"/subscribers/3", "/subscribers/3"),
        (b"/triggers/t-07?attempt=2&x=?", "/triggers/t-07"),
        (b"/caf\xc3\xa9", "/caf\u00e9"),
        (b"/bad\xff", "/bad\ufffd"),  # not UTF-8: recorded replaced, never refused
    ],
)
def test_the_subscriber_is_the_request_path(target, expected):
    found = subscriber_path(target)
    assert found == expected
    found.encode("utf-8")  # what Parquet will hold
