"""CloudEvent attributes across hops (pure): HTTP binary/structured mode, Kafka headers, filters.

Every data-plane hop of the lab passes events on the way Knative's does: binary-mode HTTP
headers `ce-<attr>` become Kafka headers `ce_<attr>` and back (the CloudEvents Kafka binding),
and a trigger filter matches on attributes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from suts.settings import NO_MATCH_TRIGGER, matching_count

REQUIRED_ATTRIBUTES = ("specversion", "id", "source", "type")
STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"

Filter = tuple[dict[str, str], ...]  # any of these alternatives; each: all attributes equal


def http_attributes(headers: Mapping[str, str], body: bytes) -> dict[str, str]:
    """A request's CloudEvent context attributes; raises ValueError when it is not an event."""
    content_type = headers.get("content-type", "")
    if content_type.startswith(STRUCTURED_CONTENT_TYPE):
        try:
            doc = json.loads(body)
        except ValueError:
            raise ValueError("structured CloudEvent body is not JSON") from None
        if not isinstance(doc, dict):
            raise ValueError("structured CloudEvent body is not a JSON object")
        attributes = {k: str(v) for k, v in doc.items() if k not in ("data", "data_base64")}
    else:
        attributes = {
            name[3:].lower(): value
            for name, value in headers.items()
            if name.lower().startswith("ce-")
        }
    missing = [a for a in REQUIRED_ATTRIBUTES if a not in attributes]
    if missing:
        raise ValueError(f"not a CloudEvent: missing {', '.join(missing)}")
    return attributes


def forward_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers a hop passes on: the event's, not the connection's."""
    return {
        name: value
        for name, value in headers.items()
        if name.lower().startswith("ce-") or name.lower() == "content-type"
    }


def to_kafka_headers(headers: Mapping[str, str]) -> list[tuple[str, str | bytes | None]]:
    out: list[tuple[str, str | bytes | None]] = []
    for name, value in headers.items():
        lower = name.lower()
        if lower.startswith("ce-"):
            out.append(("ce_" + lower[3:], value.encode()))
        elif lower == "content-type":
            out.append(("content-type", value.encode()))
    return out


def from_kafka_headers(headers: Iterable[tuple[str, bytes | None]] | None) -> dict[str, str]:
    out = {}
    for name, value in headers or ():
        if value is None:
            continue
        if name.startswith("ce_"):
            out["ce-" + name[3:]] = value.decode(errors="replace")
        elif name == "content-type":
            out["content-type"] = value.decode(errors="replace")
    return out


def source_event_headers(
    topic: str, partition: int, offset: int, key: bytes | None, content_type: str | None
) -> dict[str, str]:
    """What a 2019 KafkaSource made of a record: its own id and type, the key as an extension.

    The sender's ce_ headers are not carried over, as then: the event id survives only in the
    payload, which is why the sender puts it there.
    """
    headers = {
        "ce-specversion": "1.0",
        "ce-id": f"partition:{partition}/offset:{offset}",
        "ce-type": "dev.knative.kafka.event",
        "ce-source": f"/apis/v1/namespaces/evbench/kafkasources/evbench-source#{topic}",
        "ce-subject": f"partition:{partition}#{offset}",
        "content-type": content_type or "application/json",
    }
    if key is not None:
        headers["ce-key"] = key.decode(errors="replace")
    return headers


def parse_filter(specs: Iterable[str]) -> Filter:
    """`--match type=a` `--match type=b,source=s` -> any of (type=a), (type=b and source=s)."""
    alternatives = []
    for spec in specs:
        alternative = {}
        for pair in spec.split(","):
            name, sep, value = pair.partition("=")
            if not sep or not name.strip():
                raise ValueError(f"filter '{spec}': '{pair}' is not ATTRIBUTE=VALUE")
            alternative[name.strip().lower()] = value.strip()
        alternatives.append(alternative)
    return tuple(alternatives)


def matches(event_filter: Filter, attributes: Mapping[str, str]) -> bool:
    """Knative trigger semantics: no filter passes everything."""
    if not event_filter:
        return True
    return any(
        all(attributes.get(name) == value for name, value in alternative.items())
        for alternative in event_filter
    )


def filter_attributes(headers: Mapping[str, str]) -> dict[str, str]:
    """Attributes from binary-mode headers, without validation (for filtering forwarded events)."""
    return {k[3:].lower(): v for k, v in headers.items() if k.lower().startswith("ce-")}


def subscriber_filters(
    subscribers: Sequence[str], trigger: Filter, matching: int | None
) -> list[tuple[str, Filter]]:
    """Each trigger's subscriber and filter: the first `matching` (all, when None) filter by
    the run's trigger, the others by one that matches none of its events."""
    taking = matching_count(len(subscribers), matching)
    return [
        (url, trigger if number <= taking else parse_filter(NO_MATCH_TRIGGER))
        for number, url in enumerate(subscribers, start=1)
    ]
