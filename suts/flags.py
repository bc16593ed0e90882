"""The lab's settings as flags, each spelled once, and the argv that carries them to a component.

`LAB_FLAGS` is the user's table: one flag per LabSettings field (`evbench run`, `search` and
`memory` offer them through evbench.lab_args). A lab component (`python -m suts <kind>`) takes
the subset of those settings its kind uses, under the same flags, plus what only a component
has (where it listens, whom it delivers to: `COMPONENT_FLAGS`). `ComponentSettings.argv()`
builds a component's argv (suts/driver.py, suts/drivers.py) and `add_component_arguments` /
`component_settings` parse it back (suts/__main__.py): one table, one round trip.

Standard library only (and the floor), like suts/settings.py: every lab process imports it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields, replace
from typing import Any

from runtime.argtypes import (
    SUBSCRIBERS_MAX,
    at_least_one,
    count_list,
    http_url,
    matching_triggers,
    milliseconds,
    non_negative,
    port_number,
    positive_seconds,
)
from suts.settings import KAFKA_SUBSCRIBERS_MAX, LabSettings

REPLACE, EXTEND = "replace", "extend"
# A list of values a campaign runs in turn (evbench.lab_args.campaign_values): LabSettings holds
# one of them, the item's own.
EACH = "each"

# (LabSettings field, flag, argparse keywords, how the user's repeated values combine with the
# default: replace it, extend it, each value in turn, or None for a single value). Defaults
# come from LabSettings.
LAB_FLAGS: tuple[tuple[str, str, dict[str, Any], str | None], ...] = (
    (
        "ingress",
        "--ingress",
        dict(type=http_url, metavar="URL", help="external: where to send (http:// or https://)"),
        None,
    ),
    (
        "kafka_bootstrap",
        "--kafka-bootstrap",
        dict(metavar="HOST:PORT", help="use this Kafka instead of a fresh local Tansu broker"),
        None,
    ),
    (
        "topic",
        "--topic",
        dict(
            help="your Kafka topic (with --kafka-bootstrap): `--sut external` runs and searches "
            "produce to it; `memory` drains it as it is, never writing to it"
        ),
        None,
    ),
    (
        "partitions",
        "--partitions",
        dict(type=at_least_one, help="partitions of the Kafka topic"),
        None,
    ),
    ("replication", "--replication", dict(type=at_least_one, help="replication factor"), None),
    (
        "dispatcher_concurrency",
        "--dispatcher-concurrency",
        dict(type=at_least_one, metavar="N", help="deliveries in flight per dispatcher"),
        None,
    ),
    (
        "ingress_concurrency",
        "--ingress-concurrency",
        dict(
            type=at_least_one,
            metavar="N",
            help="broker-imc: requests the broker ingress forwards to the channel at once",
        ),
        None,
    ),
    (
        "retries",
        "--retries",
        dict(type=non_negative, help="delivery retries on 5xx/429/errors"),
        None,
    ),
    (
        "backoff_ms",
        "--retry-backoff-ms",
        dict(type=milliseconds, metavar="MS", help="first retry delay, doubling"),
        None,
    ),
    (
        "delivery_timeout_s",
        "--delivery-timeout",
        dict(type=positive_seconds, metavar="S", help="per-delivery timeout of every hop"),
        None,
    ),
    (
        "queue_limit",
        "--queue-limit",
        dict(
            type=at_least_one, metavar="N", help="IMC: queued events before the ingress answers 503"
        ),
        None,
    ),
    (
        "max_pending",
        "--max-pending",
        dict(
            type=at_least_one, metavar="N", help="Kafka dispatcher: records taken but undelivered"
        ),
        None,
    ),
    (
        "commit_interval_s",
        "--commit-interval",
        dict(
            type=positive_seconds,
            metavar="S",
            help="Kafka dispatcher: offsets committed this often",
        ),
        None,
    ),
    (
        "producer",
        "--producer",
        dict(
            action="append",
            metavar="KEY=VALUE",
            help="librdkafka producer setting, repeatable, instead of the defaults",
        ),
        REPLACE,
    ),
    (
        "consumer",
        "--consumer",
        dict(
            action="append",
            metavar="KEY=VALUE",
            help="librdkafka consumer setting, repeatable, added to the defaults",
        ),
        EXTEND,
    ),
    (
        "trigger",
        "--trigger",
        dict(
            action="append", metavar="ATTR=VALUE[,...]", help="broker trigger filter, any of these"
        ),
        REPLACE,
    ),
    (
        "fanout",
        "--subscribers",
        dict(
            type=count_list(
                "subscriber counts", SUBSCRIBERS_MAX, "the receiver tells this many paths apart"
            ),
            metavar="N[,N...]",
            help="deliveries per event, each to a path of its own at the receiver: a channel's "
            "subscriptions, a broker's triggers (--triggers and --subscriptions are the same "
            f"flag), 1 to {SUBSCRIBERS_MAX} (the lab's Kafka systems: to "
            f"{KAFKA_SUBSCRIBERS_MAX}); several, as in 1,10,50, run each in turn under one run "
            "id, and the index draws the fan-out's cost against N",
        ),
        EACH,
    ),
    (
        "matching",
        "--matching",
        dict(
            type=matching_triggers,
            metavar="M",
            help="brokers: of the --triggers, how many take the run's events (1 to the "
            "--triggers); the others filter every one out (counted as filtered, never lost) "
            "(default: all)",
        ),
        None,
    ),
    (
        "ready_timeout_s",
        "--ready-timeout",
        dict(
            type=positive_seconds,
            metavar="S",
            help="wait this long for the SUT (e.g. partition assignment)",
        ),
        None,
    ),
)

# Other names a user may give a lab flag: a broker's subscriptions are its triggers.
FLAG_ALIASES: dict[str, tuple[str, ...]] = {"fanout": ("--triggers", "--subscriptions")}

# (ComponentSettings field, flag, argparse keywords): what only a component has.
COMPONENT_FLAGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("host", "--host", dict(help="address to bind (default %(default)s)")),
    ("port", "--port", dict(type=port_number, help="port; 0 picks a free one (the default)")),
    ("subscribers", "--subscriber", dict(action="append", metavar="URL", help="deliver here")),
    ("channel", "--channel", dict(metavar="URL", help="the channel the ingress forwards to")),
    ("topic", "--topic", dict(help="the Kafka topic")),
    ("mode", "--mode", dict(choices=("channel", "source"), help="channel, or a source adapter")),
    ("rate_per_s", "--rate", dict(type=float, metavar="N", help="events/s forwarded at most")),
)

# Which settings each kind takes (ComponentSettings fields, then LabSettings fields), and which
# of them it cannot do without.
_DELIVERY = ("dispatcher_concurrency", "retries", "backoff_ms", "delivery_timeout_s")
COMPONENTS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "imc-channel": (
        "in-memory channel: ingress, queue, fan-out dispatcher",
        ("subscribers", "queue_limit", *_DELIVERY),
        ("subscribers",),
    ),
    "broker-ingress": (
        "broker ingress forwarding to a channel",
        ("channel", "ingress_concurrency", "delivery_timeout_s"),
        ("channel",),
    ),
    "trigger-filter": (
        "every trigger's filter, each in front of its subscriber (--subscriber per trigger)",
        ("subscribers", "trigger", "matching", *_DELIVERY),
        ("subscribers",),
    ),
    "kafka-ingress": (
        "HTTP ingress producing to a Kafka topic",
        ("topic", "producer"),
        ("topic",),
    ),
    "kafka-dispatcher": (
        "consumer-group dispatcher to HTTP subscribers, a group per --subscriber",
        (
            "topic",
            "subscribers",
            "mode",
            "trigger",
            "matching",
            "consumer",
            "max_pending",
            "commit_interval_s",
            *_DELIVERY,
        ),
        ("topic", "subscribers"),
    ),
    "capacity": (
        "a system of known capacity: bounded queue, paced forwarding",
        (
            "subscribers",
            "rate_per_s",
            "queue_limit",
            "dispatcher_concurrency",
            "delivery_timeout_s",
        ),
        ("subscribers", "rate_per_s"),
    ),
}
_LAB_FIELDS = frozenset(f.name for f in fields(LabSettings))
_OWN_FIELDS = frozenset(name for name, _, _ in COMPONENT_FLAGS)


@dataclass(frozen=True)
class ComponentSettings:
    """One lab process: its kind, where it listens and whom it talks to, and the lab settings
    its kind takes (`lab`; the rest of `lab` is not passed on)."""

    kind: str
    host: str = "127.0.0.1"
    port: int = 0
    subscribers: tuple[str, ...] = ()
    channel: str | None = None
    topic: str | None = None
    mode: str = "channel"
    rate_per_s: float | None = None
    lab: LabSettings = field(default_factory=LabSettings)

    def argv(self) -> list[str]:
        """`python -m suts` arguments that parse back to these settings."""
        args = [self.kind]
        for name, flag in _flags(self.kind):
            value = getattr(self if name in _OWN_FIELDS else self.lab, name)
            if isinstance(value, tuple):
                args += [arg for item in value for arg in (flag, item)]
            elif value is not None:
                args += [flag, str(value)]
        return args

    def taken(self) -> ComponentSettings:
        """These settings as a component sees them: lab settings its kind does not take at
        their defaults, repeated ones it does take as given (none unless given)."""
        keep = set(COMPONENTS[self.kind][1])
        lab = {n: getattr(self.lab, n) for n in (_LAB_FIELDS - _OWN_FIELDS) & keep}
        return replace(self, lab=replace(_component_lab_defaults(), **lab))


def _component_lab_defaults() -> LabSettings:
    """A component's defaults: LabSettings', but a repeated setting is only what is given."""
    return LabSettings(producer=(), consumer=(), trigger=())


def _flags(kind: str) -> list[tuple[str, str]]:
    """(field, flag) of every setting `kind` takes, in the table's order."""
    takes = ("host", "port", *COMPONENTS[kind][1])
    own = [(n, f) for n, f, _ in COMPONENT_FLAGS if n in takes]
    # A component's `topic` is its own (the run's topic), not the lab's (external's).
    return own + [(n, f) for n, f, _, _ in LAB_FLAGS if n in takes and n not in _OWN_FIELDS]


def add_component_arguments(parser: argparse.ArgumentParser) -> None:
    """A subcommand per kind with the flags it takes; defaults: ComponentSettings' and the
    component's LabSettings (so a component started by hand behaves as in a run)."""
    kinds = parser.add_subparsers(dest="kind", required=True)
    own, lab = ComponentSettings(""), _component_lab_defaults()
    options = {n: k for n, _, k in COMPONENT_FLAGS} | {n: k for n, _, k, _ in LAB_FLAGS}
    for kind, (help_text, _, required) in COMPONENTS.items():
        sub = kinds.add_parser(kind, help=help_text, description=help_text)
        for name, flag in _flags(kind):
            kwargs = {**options[name], "dest": name, "required": name in required}
            if kwargs.get("action") != "append":  # a repeated one is what is given, or none
                kwargs["default"] = getattr(own if name in _OWN_FIELDS else lab, name)
            sub.add_argument(flag, **kwargs)


def component_settings(args: argparse.Namespace) -> ComponentSettings:
    """The settings a component's argv (as add_component_arguments parsed it) holds."""
    own: dict[str, Any] = {}
    lab: dict[str, Any] = {}
    for name, _ in _flags(args.kind):
        value = getattr(args, name)
        if name in _REPEATED:
            value = tuple(value or ())
        (own if name in _OWN_FIELDS else lab)[name] = value
    return ComponentSettings(args.kind, **own, lab=replace(_component_lab_defaults(), **lab))


_REPEATED = frozenset(
    [n for n, _, k in COMPONENT_FLAGS if k.get("action") == "append"]
    + [n for n, _, k, _ in LAB_FLAGS if k.get("action") == "append"]
)
