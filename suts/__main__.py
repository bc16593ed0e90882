"""`python -m suts <component>`: one process of the lab's data plane (see suts/drivers.py).

Its flags are suts/flags.py's (the lab's settings by the user's names, and where it listens and
delivers); the defaults are LabSettings', so a component started by hand behaves as in a run."""

from __future__ import annotations

import argparse
import sys

from suts.cloudevents import Filter, parse_filter, subscriber_filters
from suts.flags import ComponentSettings, add_component_arguments, component_settings
from suts.serving import Component, serve
from suts.settings import LabSettings


def _key_values(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"'{item}' is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def trigger_filters(subscribers: tuple[str, ...], lab: LabSettings) -> list[tuple[str, Filter]]:
    """Each subscriber's filter (a trigger's; none matches nothing: suts.cloudevents)."""
    if not subscribers:
        raise ValueError("takes at least one --subscriber")
    return subscriber_filters(subscribers, parse_filter(lab.trigger), lab.matching)


def _one(subscribers: tuple[str, ...]) -> str:
    if len(subscribers) != 1:
        raise ValueError(f"takes one --subscriber, not {len(subscribers)}")
    return subscribers[0]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m suts", description=__doc__)
    add_component_arguments(parser)
    return parser


def component_from(c: ComponentSettings) -> Component:
    # Imported here: each process loads only the clients it uses.
    lab = c.lab
    delivery = (lab.dispatcher_concurrency, lab.retries, lab.backoff_ms, lab.delivery_timeout_s)
    if c.kind == "imc-channel":
        from suts.imc import InMemoryChannel

        return InMemoryChannel(list(c.subscribers), *delivery, lab.queue_limit)
    if c.kind == "broker-ingress":
        from suts.broker import BrokerIngress

        assert c.channel is not None  # required by its flags
        return BrokerIngress(c.channel, lab.ingress_concurrency, lab.delivery_timeout_s)
    if c.kind == "trigger-filter":
        from suts.broker import TriggerFilter

        return TriggerFilter(trigger_filters(c.subscribers, lab), *delivery)
    if c.kind == "capacity":
        from suts.capacity import CapacityHop

        assert c.rate_per_s is not None  # required by its flags
        subscriber, limit = _one(c.subscribers), lab.queue_limit
        return CapacityHop(
            subscriber, c.rate_per_s, limit, lab.dispatcher_concurrency, lab.delivery_timeout_s
        )
    assert c.topic is not None  # required by the Kafka components' flags
    if c.kind == "kafka-ingress":
        from suts.kafka_ingress import KafkaIngress

        return KafkaIngress(c.topic, _key_values(lab.producer))
    from suts.kafka_dispatcher import KafkaDispatcher

    return KafkaDispatcher(
        c.topic,
        trigger_filters(c.subscribers, lab),
        c.mode,
        _key_values(lab.consumer),
        *delivery,
        lab.max_pending,
        lab.commit_interval_s,
    )


def main(argv: list[str] | None = None) -> int:
    settings = component_settings(build_parser().parse_args(argv))
    try:
        component = component_from(settings)
    except ValueError as exc:
        print(f"suts {settings.kind}: {exc}", file=sys.stderr)
        return 2
    return serve(component, settings.host, settings.port)


if __name__ == "__main__":
    sys.exit(main())
