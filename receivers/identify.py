"""Which event a request carries (pure): its evbench id and CloudEvent attributes, validated.

Everything identified here is written to Parquet, so it must be a string Parquet can hold: valid
Unicode (no lone surrogates such as the JSON escape "\\ud800", which UTF-8 cannot encode) and of
bounded length. A value that is not is the sender's (or a hostile client's) fault and gets a 400;
it must never reach the record buffer, where one unencodable row would stop every later flush.
"""

from __future__ import annotations

import json
from typing import NamedTuple, Protocol

from contract.records import PAYLOAD_ID_PREFIX

STRUCTURED = b"application/cloudevents+json"
# evbench's own ids are ~30 characters; CloudEvents ids from other tools (UUIDs, partition/offset)
# are well under this. Attributes (type, source) may be URIs, so they get more room.
MAX_ID_CHARS = 256
MAX_ATTRIBUTE_CHARS = 2048


class Malformed(Exception):
    """A request that is not a CloudEvent this receiver can identify; answered with 400."""


class InvalidId(Malformed):
    """An id or attribute that cannot be recorded (not a string, empty, not Unicode, too long)."""


class EventHeaders(Protocol):
    """The request headers identification reads (raw bytes, None when absent)."""

    h_evbenchid: bytes | None
    h_ce_id: bytes | None
    h_ce_type: bytes | None
    h_ce_source: bytes | None
    h_ce_specversion: bytes | None
    h_content_type: bytes | None


class Identity(NamedTuple):  # a tuple: built once per request, on the receiver's hot path
    event_id: str
    ce_id: str
    ce_type: str
    ce_source: str


def checked(name: str, value: object, max_chars: int = MAX_ID_CHARS) -> str:
    """`value` if it is a recordable string, else InvalidId naming `name` and the rule."""
    if not isinstance(value, str):
        raise InvalidId(f"{name} must be a string, not {type(value).__name__}")
    if not value:
        raise InvalidId(f"{name} is empty")
    if len(value) > max_chars:
        raise InvalidId(f"{name} is longer than {max_chars} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidId(f"{name} is not valid Unicode (a lone surrogate)") from None
    return value


def decoded(name: str, raw: bytes, max_chars: int = MAX_ID_CHARS) -> str:
    """A header value as a recordable string: strict UTF-8, no silent replacement characters.
    (A strict decode never yields a surrogate, so unlike `checked` nothing is re-encoded.)"""
    if len(raw) > 4 * max_chars:  # before decoding: a huge value costs nothing to refuse
        raise InvalidId(f"{name} is longer than {max_chars} characters")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidId(f"{name} is not valid UTF-8") from None
    if not text:
        raise InvalidId(f"{name} is empty")
    if len(text) > max_chars:
        raise InvalidId(f"{name} is longer than {max_chars} characters")
    return text


def payload_event_id(body: bytes) -> str | None:
    """The id the sender put in the payload: a fast prefix match, then any JSON object.

    None when the payload carries no id; InvalidId when it carries one that cannot be recorded.
    """
    if body.startswith(PAYLOAD_ID_PREFIX):
        start = len(PAYLOAD_ID_PREFIX)
        end = body.find(b'"', start, start + 4 * MAX_ID_CHARS)
        raw = body[start:end]
        if end > start and b"\\" not in raw:  # an escape is left to the JSON parser
            return decoded("payload evbenchid", raw)
    if body[:1] == b"{":
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):  # nested past Python's limit: not our payload
            return None
        value = doc.get("evbenchid") if isinstance(doc, dict) else None
        return None if value is None else checked("payload evbenchid", value)
    return None


def identify(headers: EventHeaders, body: bytes) -> Identity:
    """The event a request carries, or Malformed.

    Order: the ce-evbenchid extension, then the id in the payload, then ce-id. The payload comes
    before ce-id because intermediaries such as a KafkaSource replace ce-id with their own
    (partition/offset) while the payload still carries ours.
    """
    ctype = headers.h_content_type
    if ctype is not None and _is_structured(ctype):
        return _structured(body)
    ce_id, ce_type, ce_source = headers.h_ce_id, headers.h_ce_type, headers.h_ce_source
    if not (headers.h_ce_specversion and ce_id and ce_type and ce_source):
        raise Malformed(f"binary-mode CloudEvent lacks {', '.join(_missing(headers))}")
    evbenchid = headers.h_evbenchid
    # The common case in one go, on the receiver's hot path: strict decodes and the length
    # rules; anything off is sorted out (and named) by `decoded`.
    try:
        event_id = evbenchid.decode() if evbenchid else ""
        ce_id_text, ce_type_text, ce_source_text = (
            ce_id.decode(),
            ce_type.decode(),
            ce_source.decode(),
        )
    except UnicodeDecodeError:
        return _decoded_one_by_one(headers, body)
    if (
        len(event_id) > MAX_ID_CHARS
        or len(ce_id_text) > MAX_ID_CHARS
        or len(ce_type_text) > MAX_ATTRIBUTE_CHARS
        or len(ce_source_text) > MAX_ATTRIBUTE_CHARS
    ):
        return _decoded_one_by_one(headers, body)
    if not event_id:
        event_id = payload_event_id(body) or ce_id_text
    return Identity(event_id, ce_id_text, ce_type_text, ce_source_text)


def _is_structured(content_type: bytes) -> bool:
    """`application/cloudevents+json`, any case, with or without parameters (the parser has
    already stripped surrounding blanks)."""
    end = len(STRUCTURED)
    return content_type[:end].lower() == STRUCTURED and content_type[end : end + 1] in (
        b"",
        b";",
        b" ",
    )


def _missing(headers: EventHeaders) -> list[str]:
    return [
        name
        for name, value in (
            ("ce-specversion", headers.h_ce_specversion),
            ("ce-id", headers.h_ce_id),
            ("ce-source", headers.h_ce_source),
            ("ce-type", headers.h_ce_type),
        )
        if not value
    ]


def _decoded_one_by_one(headers: EventHeaders, body: bytes) -> Identity:
    """The slow path: each value decoded and checked on its own, so the error names it."""
    assert headers.h_ce_id and headers.h_ce_type and headers.h_ce_source
    ce_id = decoded("ce-id", headers.h_ce_id)
    if headers.h_evbenchid:
        event_id = decoded("ce-evbenchid", headers.h_evbenchid)
    else:
        event_id = payload_event_id(body) or ce_id
    return Identity(
        event_id,
        ce_id,
        decoded("ce-type", headers.h_ce_type, MAX_ATTRIBUTE_CHARS),
        decoded("ce-source", headers.h_ce_source, MAX_ATTRIBUTE_CHARS),
    )


def _structured(body: bytes) -> Identity:
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise Malformed(f"structured CloudEvent is not JSON: {exc}") from exc
    except RecursionError:
        raise Malformed("structured CloudEvent is nested too deeply") from None
    if not isinstance(doc, dict):
        raise Malformed("structured CloudEvent is not a JSON object")
    missing = [k for k in ("specversion", "id", "source", "type") if k not in doc]
    if missing:
        raise Malformed(f"structured CloudEvent lacks {', '.join(missing)}")
    ce_id = checked("id", doc["id"])
    data = doc.get("data")
    event_id = doc.get("evbenchid")
    if event_id is None and isinstance(data, dict):
        event_id = data.get("evbenchid")
    return Identity(
        ce_id if event_id is None else checked("evbenchid", event_id),
        ce_id,
        checked("type", doc["type"], MAX_ATTRIBUTE_CHARS),
        checked("source", doc["source"], MAX_ATTRIBUTE_CHARS),
    )


# Subscriber paths a receiver remembers decoded: fan-out has one per subscription (tens); a
# client inventing paths gets each decoded, never a table that grows per request.
MAX_KNOWN_PATHS = 1024


def subscriber_path(target: bytes) -> str:
    """The subscriber a request target names: its path, query left out, as text Parquet can
    hold (bytes that are not UTF-8 replaced, not refused: the event still arrived)."""
    return target.split(b"?", 1)[0].decode("utf-8", "replace") or "/"
