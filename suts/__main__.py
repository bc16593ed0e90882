"""`python -m suts <component>`: one process of the lab's data plane (see suts/drivers.py).

The defaults are LabSettings', so a component started by hand behaves as in a run."""

from __future__ import annotations

import argparse
import sys

from suts.cloudevents import parse_filter
from suts.serving import Component, serve
from suts.settings import LabSettings


def _key_values(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"'{item}' is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def build_parser() -> argparse.ArgumentParser:
    lab = LabSettings()
    parser = argparse.ArgumentParser(prog="python -m suts", description=__doc__)
    parts = parser.add_subparsers(dest="component", required=True)

    def part(name: str, help_text: str, delivery: bool = True) -> argparse.ArgumentParser:
        sub = parts.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--host", default="127.0.0.1")
        sub.add_argument("--port", type=int, default=0, help="0 picks a free port")
        if delivery:
            sub.add_argument(
                "--concurrency", type=int, default=lab.concurrency, help="deliveries at once"
            )
            sub.add_argument(
                "--retries", type=int, default=lab.retries, help="retries per delivery"
            )
            sub.add_argument(
                "--backoff-ms",
                type=float,
                default=lab.backoff_ms,
                help="first retry delay (doubles)",
            )
            sub.add_argument(
                "--timeout", type=float, default=lab.delivery_timeout_s, help="per-delivery seconds"
            )
        return sub

    imc = part("imc-channel", "in-memory channel: ingress, queue, fan-out dispatcher")
    imc.add_argument("--subscriber", action="append", required=True, help="repeatable URL")
    imc.add_argument(
        "--queue-limit", type=int, default=lab.queue_limit, help="queued events before 503"
    )

    ingress = part("broker-ingress", "broker ingress forwarding to a channel", delivery=False)
    ingress.add_argument("--channel", required=True, help="channel URL")
    ingress.add_argument("--concurrency", type=int, default=lab.ingress_concurrency)
    ingress.add_argument("--timeout", type=float, default=lab.delivery_timeout_s)

    trigger = part("trigger-filter", "trigger filter in front of a subscriber")
    trigger.add_argument("--subscriber", required=True)
    trigger.add_argument("--match", action="append", default=[], metavar="ATTR=VALUE[,...]")

    kafka_in = part("kafka-ingress", "HTTP ingress producing to a Kafka topic", delivery=False)
    kafka_in.add_argument("--topic", required=True)
    kafka_in.add_argument("--producer", action="append", default=[], metavar="KEY=VALUE")

    dispatcher = part("kafka-dispatcher", "consumer-group dispatcher to an HTTP subscriber")
    dispatcher.add_argument("--topic", required=True)
    dispatcher.add_argument("--subscriber", required=True)
    dispatcher.add_argument("--mode", choices=("channel", "source"), default="channel")
    dispatcher.add_argument("--match", action="append", default=[], metavar="ATTR=VALUE[,...]")
    dispatcher.add_argument("--consumer", action="append", default=[], metavar="KEY=VALUE")
    dispatcher.add_argument("--max-pending", type=int, default=lab.max_pending)
    dispatcher.add_argument("--commit-interval", type=float, default=lab.commit_interval_s)
    capacity = part("capacity", "a system of known capacity: bounded queue, paced forwarding")
    capacity.add_argument("--subscriber", required=True)
    capacity.add_argument("--rate", type=float, required=True, help="events/s forwarded at most")
    capacity.add_argument("--queue-limit", type=int, default=1000, help="queued events before 503")
    return parser


def component_from(args: argparse.Namespace) -> Component:
    # Imported here: each process loads only the clients it uses.
    if args.component == "imc-channel":
        from suts.imc import InMemoryChannel

        return InMemoryChannel(
            args.subscriber,
            args.concurrency,
            args.retries,
            args.backoff_ms,
            args.timeout,
            args.queue_limit,
        )
    if args.component == "broker-ingress":
        from suts.broker import BrokerIngress

        return BrokerIngress(args.channel, args.concurrency, args.timeout)
    if args.component == "trigger-filter":
        from suts.broker import TriggerFilter

        return TriggerFilter(
            args.subscriber,
            parse_filter(args.match),
            args.concurrency,
            args.retries,
            args.backoff_ms,
            args.timeout,
        )
    if args.component == "capacity":
        from suts.capacity import CapacityHop

        return CapacityHop(
            args.subscriber, args.rate, args.queue_limit, args.concurrency, args.timeout
        )
    if args.component == "kafka-ingress":
        from suts.kafka_ingress import KafkaIngress

        return KafkaIngress(args.topic, _key_values(args.producer))
    from suts.kafka_dispatcher import KafkaDispatcher

    return KafkaDispatcher(
        args.topic,
        args.subscriber,
        args.mode,
        parse_filter(args.match),
        _key_values(args.consumer),
        args.concurrency,
        args.retries,
        args.backoff_ms,
        args.timeout,
        args.max_pending,
        args.commit_interval,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        component = component_from(args)
    except ValueError as exc:
        print(f"suts {args.component}: {exc}", file=sys.stderr)
        return 2
    return serve(component, args.host, args.port)


if __name__ == "__main__":
    sys.exit(main())
