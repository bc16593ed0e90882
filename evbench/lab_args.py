"""`evbench run` flags that shape the system under test; all of them land in run.json."""

from __future__ import annotations

import argparse

from evbench.shared.argtypes import at_least_one, non_negative, port_number
from suts.lab import DEFAULT_TRIGGER, LOCAL_SUTS, SUTS, LabSettings, sut_help

SUT_HELP = sut_help()


def sut_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in SUTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown system '{(unknown or [text])[0]}': choose from {', '.join(SUTS)}"
        )
    return names


def add_lab_arguments(run: argparse.ArgumentParser) -> None:
    defaults = LabSettings()
    run.add_argument(
        "--sut",
        default=None,
        type=sut_list,
        metavar="SUT[,SUT...]",
        help=f"systems under test, in turn: {', '.join(SUTS)} "
        f"(default: all of {', '.join(LOCAL_SUTS)})",
    )
    lab = run.add_argument_group("system under test")
    lab.add_argument("--ingress", default=None, metavar="URL", help="external: where to send")
    lab.add_argument(
        "--kafka-bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="use this Kafka instead of a fresh local Tansu broker",
    )
    lab.add_argument("--topic", default=None, help="external: produce to this topic")
    lab.add_argument(
        "--receiver-host", default="127.0.0.1", help="receiver bind address (default 127.0.0.1)"
    )
    lab.add_argument(
        "--receiver-port", type=port_number, default=0, help="receiver port (default 0: a free one)"
    )
    lab.add_argument(
        "--partitions",
        type=at_least_one,
        default=defaults.partitions,
        help=f"partitions of the Kafka topic (default {defaults.partitions})",
    )
    lab.add_argument(
        "--replication",
        type=at_least_one,
        default=defaults.replication,
        help=f"replication factor (default {defaults.replication})",
    )
    lab.add_argument(
        "--dispatcher-concurrency",
        type=at_least_one,
        default=defaults.concurrency,
        metavar="N",
        help=f"deliveries in flight per dispatcher (default {defaults.concurrency})",
    )
    lab.add_argument(
        "--retries",
        type=non_negative,
        default=defaults.retries,
        help=f"delivery retries on 5xx/429/errors (default {defaults.retries})",
    )
    lab.add_argument(
        "--retry-backoff-ms",
        type=float,
        default=defaults.backoff_ms,
        metavar="MS",
        help=f"first retry delay, doubling (default {defaults.backoff_ms:g})",
    )
    lab.add_argument(
        "--queue-limit",
        type=at_least_one,
        default=defaults.queue_limit,
        metavar="N",
        help=f"IMC: queued events before the ingress answers 503 (default {defaults.queue_limit})",
    )
    lab.add_argument(
        "--max-pending",
        type=at_least_one,
        default=defaults.max_pending,
        metavar="N",
        help=f"Kafka dispatcher: records taken but undelivered (default {defaults.max_pending})",
    )
    lab.add_argument(
        "--producer",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help=f"librdkafka producer setting, repeatable (default {' '.join(defaults.producer)})",
    )
    lab.add_argument(
        "--consumer",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="librdkafka consumer setting, repeatable, added to the defaults "
        f"({' '.join(defaults.consumer)})",
    )
    lab.add_argument(
        "--trigger",
        action="append",
        default=None,
        metavar="ATTR=VALUE[,...]",
        help=f"broker trigger filter, any of these (default: {' or '.join(DEFAULT_TRIGGER)})",
    )
    lab.add_argument(
        "--ready-timeout",
        type=float,
        default=defaults.ready_timeout_s,
        metavar="S",
        help="wait this long for the SUT (e.g. partition assignment)",
    )


def lab_settings(args: argparse.Namespace) -> LabSettings:
    defaults = LabSettings()
    return LabSettings(
        partitions=args.partitions,
        replication=args.replication,
        concurrency=args.dispatcher_concurrency,
        retries=args.retries,
        backoff_ms=args.retry_backoff_ms,
        queue_limit=args.queue_limit,
        max_pending=args.max_pending,
        producer=tuple(args.producer) if args.producer else defaults.producer,
        consumer=(*defaults.consumer, *(args.consumer or ())),
        trigger=tuple(args.trigger) if args.trigger else defaults.trigger,
        kafka_bootstrap=args.kafka_bootstrap,
        ingress=args.ingress,
        topic=args.topic,
        ready_timeout_s=args.ready_timeout,
    )
