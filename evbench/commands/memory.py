"""`evbench memory`: consumers draining a Kafka backlog, their memory over time (seeds 000/001)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from contract.errors import EvbenchError
from evbench.commands import Subcommands, echo
from evbench.commands.analyze import add_verbose_argument
from evbench.lab_args import add_lab_arguments
from evbench.session_args import add_flags, add_session_arguments, session_kwargs
from runtime.argtypes import at_least_one, count_list, payload_bytes, positive_seconds
from suts.consumers.predict import SARAMA_BUFFER_MESSAGES

if TYPE_CHECKING:  # the command's imports are deferred: --help must not load the clients
    from evbench.consumers import ConsumerSpec


# The matrix's flags: one table (evbench.session_args has the session's).
_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--partitions", dict(
        type=count_list("partition counts"), default=(1, 50, 100), metavar="P,P",
        help="partition counts of the topic, one scenario each (default 1,50,100)",
    )),
    ("--consumers", dict(
        default="source",
        help="which consumers, comma-separated (default: source, seed 000's matrix): source is "
        "the lab's source adapter (seed 000's KafkaSource) and dispatcher the lab's Kafka "
        "channel dispatcher, each delivering to a receiver; confluent, confluent-lowmem (seed "
        "001's low-memory set), aiokafka and kafka-python are seed 001's bare clients",
    )),
    ("--consumer", dict(
        action="append", default=[], metavar="KEY=VALUE",
        help="a client setting (repeatable): librdkafka's dotted names go to confluent, e.g. "
        "fetch.queue.backoff.ms=50; the Python clients' names to aiokafka and kafka-python, "
        "e.g. max_partition_fetch_bytes=65536",
    )),
    ("--consume", dict(
        type=positive_seconds, default=250.0, metavar="S",
        help="how long the consumer runs and is sampled (default 250)",
    )),
    ("--event-bytes", dict(
        type=payload_bytes, default=8192, metavar="N",
        help="each backlog event's size (default 8192)",
    )),
    ("--max-backlog-mib", dict(
        type=at_least_one, default=4096, metavar="MIB",
        help="never fill more than this (a fresh local broker keeps every record in memory; "
        "default 4096)",
    )),
    ("--memory-limit-mib", dict(
        type=at_least_one, default=None, metavar="MIB",
        help="cap each bare client's data segment (RLIMIT_DATA)",
    )),
    ("--malloc-arena-max", dict(
        type=at_least_one, default=None, metavar="N", help="glibc's MALLOC_ARENA_MAX",
    )),
    ("--trim-after-drain", dict(
        action="store_true",
        help="malloc_trim(0) in the consumer once drained: what stays is held, not cached",
    )),
    ("--python-heap", dict(
        action="store_true",
        help="trace the Python clients' heap with tracemalloc (off by default: it slows "
        "pure-Python clients, kafka-python's first message came at 12 s instead of 4 s on the "
        "development machine, and its own bookkeeping, reported apart, adds to RSS)",
    )),
)  # fmt: skip


def add(commands: Subcommands) -> None:
    memory = commands.add_parser(
        "memory",
        help="measure Kafka consumers' memory while they drain a backlog",
        description="Per partition count and consumer: a fresh local broker (or your Kafka, "
        "--kafka-bootstrap, a topic of the scenario's own on it), a topic filled "
        "with 8 KB events as fast as it takes them, then one consumer (a process of its own) "
        "draining it while its RSS, USS and high-water mark are sampled every second. Prints "
        "a line every 5 s, the lag per partition as kafka-consumer-groups prints it, and a "
        "table of idle, peak and post-drain memory next to the predicted buffer bound. The "
        "defaults are seed 000's matrix (1, 50 and 100 partitions, 120 s fill, 250 s drain). "
        "--subscriptions S,S (the dispatcher only): a scenario per count, each subscription a "
        "consumer group of the dispatcher's own delivering to a path of its own at the "
        "receiver, and the table puts seed 003's sizing rule (partitions x subscriptions x "
        f"{SARAMA_BUFFER_MESSAGES} messages x event size) beside the measured peak.",
    )
    add_flags(memory, _FLAGS)
    fill = memory.add_mutually_exclusive_group()
    fill.add_argument(
        "--fill",
        type=positive_seconds,
        default=120.0,
        metavar="S",
        help="fill the topic for this long, as fast as the broker takes events (default 120)",
    )
    fill.add_argument(
        "--fill-events",
        type=at_least_one,
        default=None,
        metavar="N",
        help="fill the topic with N events instead (never more than --max-backlog-mib)",
    )
    # --subscriptions S,S (the lab's --subscribers): the dispatcher's, one scenario each, a
    # consumer group per subscription; the table puts seed 003's rule beside the peak.
    add_lab_arguments(memory, only=("kafka_bootstrap", "topic", "replication", "fanout"))
    memory.add_argument(
        "--keep-topics",
        action="store_true",
        help="with --kafka-bootstrap: keep the scenarios' own topics (evbench-<run>-<scenario>) "
        "instead of deleting them at each scenario's end",
    )
    add_session_arguments(
        memory, only=("run_id", "runs_dir", "no_analyze", "scrape", "scrape_interval")
    )
    add_verbose_argument(memory)
    memory.set_defaults(main=main)


def _checked_specs(args: argparse.Namespace) -> tuple[ConsumerSpec, ...]:
    """The consumers asked for, each client's settings checked before anything starts (a
    client refusing them would fail in its own process, later)."""
    from evbench.consumers import LIBRDKAFKA_CLIENTS, consumer_specs
    from evbench.lab_args import librdkafka_problem

    try:
        specs = tuple(consumer_specs(args.consumers, tuple(args.consumer)))
    except ValueError as exc:
        raise EvbenchError(str(exc)) from None
    for spec in specs:
        if spec.client in LIBRDKAFKA_CLIENTS:
            given = tuple(f"{key}={value}" for key, value in spec.settings)
            if problem := librdkafka_problem("--consumer", given):
                raise EvbenchError(problem)
    return specs


def _note_bare_only(args: argparse.Namespace, lab: list[str]) -> None:
    """Says which given flags the lab's consumers ignore: they are the lab's own processes,
    started as the lab starts them."""
    bare_only = [
        flag
        for flag, given in (
            ("--memory-limit-mib", args.memory_limit_mib),
            ("--trim-after-drain", args.trim_after_drain),
            ("--python-heap", args.python_heap),
        )
        if given
    ]
    if lab and bare_only:
        echo(
            f"note: {', '.join(bare_only)} apply to the bare clients only, not to "
            f"{', '.join(lab)} (each scenario.json says what applied)"
        )


def main(args: argparse.Namespace) -> int:
    from evbench.consumers import LAB_CONSUMERS, BareClientOptions
    from evbench.memory import run_memory
    from evbench.options import MemoryOptions

    specs = _checked_specs(args)
    _note_bare_only(args, [s.name for s in specs if s.client in LAB_CONSUMERS])
    options = MemoryOptions(
        **session_kwargs(args),  # run_id None: the next free one, worked out by run_memory
        partitions=args.partitions,
        consumers=specs,
        fill_s=args.fill,
        fill_events=args.fill_events,
        consume_s=args.consume,
        event_bytes=args.event_bytes,
        max_backlog_bytes=args.max_backlog_mib * 2**20,
        bare=BareClientOptions(
            tracemalloc=args.python_heap,
            trim_after_drain=args.trim_after_drain,
            memory_limit_bytes=args.memory_limit_mib * 2**20 if args.memory_limit_mib else None,
        ),
        malloc_arena_max=args.malloc_arena_max,
        keep_topics=args.keep_topics,
    )
    fanouts = options.campaign_fanouts()
    if max(fanouts) > 1 and (others := [s.name for s in specs if s.client != "dispatcher"]):
        raise EvbenchError(
            f"--subscriptions {','.join(map(str, fanouts))}: only the dispatcher has "
            f"subscriptions (a consumer group each), not {', '.join(others)}: give "
            "--consumers dispatcher"
        )
    root, failed = run_memory(options, echo)
    echo(f"-> {root}")
    if failed:
        echo(f"{len(failed)} scenario(s) failed: {', '.join(f['scenario'] for f in failed)}")
    code = 0
    scenarios = len(options.partitions) * len(specs) * len(fanouts)
    if not args.no_analyze and len(failed) < scenarios:
        from evbench.commands.analyze import analyze_memory_path

        code = analyze_memory_path(root, "local[*]", verbose=args.verbose)
    return code or (1 if failed else 0)
