"""The backlog `evbench memory` drains (seeds 000/001): a fresh Tansu's topic filled as fast as
it takes events, a topic of the scenario's own on the user's Kafka (deleted at the end unless
kept), or the user's existing topic drained as it is; and its lag per partition afterwards."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from contract.errors import EvbenchError
from contract.memorydocs import PartitionLagDoc
from evbench.consumers import Backlog
from evbench.options import MemoryOptions
from evbench.session import Session
from suts.driver import Sut
from suts.lag import ConsumerLagSampler
from suts.settings import LabSettings
from suts.tansu import Tansu, create_topic, delete_topic, topic_backlog

_LAG_TIMEOUT_S = 10.0  # each offset query after the drain: a just-filled broker may be slow
_CE_HEADERS = [
    ("ce_specversion", b"1.0"),
    ("ce_type", b"dev.evbench.measure"),
    ("ce_source", b"evbench/memory"),
    ("content-type", b"application/octet-stream"),
]


def partition_counts(options: MemoryOptions) -> tuple[int, ...]:
    """The matrix's partition counts; an existing topic (--topic) is drained as it is, with its
    own partitions."""
    topic, kafka = options.lab.topic, options.lab.kafka_bootstrap
    if not topic:
        return options.partitions
    if not kafka:
        raise EvbenchError("--topic names a topic of your Kafka to drain: give --kafka-bootstrap")
    return (len(topic_backlog(kafka, topic)),)


def backlog(
    session: Session, options: MemoryOptions, partitions: int
) -> tuple[Backlog, float, dict[int, int], str]:
    """The backlog to drain, the fill's time, each partition's end and where it is: an
    existing topic of the user's (--topic, drained as it is and never changed), a topic of the
    scenario's own on the user's Kafka (filled, and deleted at the end unless --keep-topics),
    or the fresh Tansu's, under the names seed 000 used."""
    lab, echo = options.lab, session.echo
    own_kafka = lab.kafka_bootstrap is not None
    bootstrap = session.start_system()  # the broker: a fresh Tansu, or the user's
    scenario = options.system_dir()  # its own topic and group: one per fan-out too
    name = f"evbench-{session.run_id}-{scenario}"
    group = name if own_kafka else f"memory-{scenario}"
    if lab.topic:
        offsets = topic_backlog(bootstrap, lab.topic)
        produced = sum(end - low for low, end in offsets.values())
        echo(f"  draining {lab.topic} as it is: {produced} events in {len(offsets)} partitions")
        ends = {p: end for p, (_, end) in offsets.items()}
        return Backlog(bootstrap, lab.topic, group, produced), 0.0, ends, "the user's topic"
    topic = name if own_kafka else "backlog"
    create_topic(bootstrap, topic, partitions, lab.replication)
    if own_kafka and not options.keep_topics:
        session.on_teardown(lambda: _delete(session, bootstrap, topic))
    produced, fill_s, ends = fill(bootstrap, topic, options)
    mib = produced * options.event_bytes / 2**20
    echo(f"  filled {produced} events ({mib:.0f} MiB) in {fill_s:.1f} s")
    where = "given with --kafka-bootstrap" if own_kafka else "Tansu (fresh for this scenario)"
    return Backlog(bootstrap, topic, group, produced), fill_s, ends, where


def _delete(session: Session, bootstrap: str, topic: str) -> None:
    """The scenario's own topic, gone; a cluster that refuses (deletion disabled, no ACL) is
    said, and the measurement stands."""
    try:
        delete_topic(bootstrap, topic)
    except EvbenchError as exc:
        session.echo(f"  {exc}: delete it yourself (or pass --keep-topics)")


class BacklogBroker(Sut):
    """The system of a memory scenario: a Kafka-protocol broker alone, a fresh Tansu (or the
    user's --kafka-bootstrap, started by nobody), which the session starts, watches and stops
    as it does every system; the scenario's topic and consumer are its own."""

    name = "kafka-broker"
    summary = "a Kafka-protocol broker alone: the backlog `evbench memory` drains"
    topology = "producer -> topic -> consumer"
    local = False
    settings_shape_results = False
    lab_processes = False

    def _start(self, subscriber: str) -> str:
        if self.settings.kafka_bootstrap:
            self.bootstrap = self.settings.kafka_bootstrap
        else:
            self.broker = Tansu(self.logs / "tansu.log", self.host)
            self.bootstrap = self.broker.start()
        return self.bootstrap


def backlog_broker(name: str, settings: LabSettings, logs: Path, run_id: str, host: str) -> Sut:
    """The session's `make` for a memory scenario (whatever its name): its broker, which
    delivers to no one: the scenario's fan-out is its consumer's, a group per subscription."""
    return BacklogBroker(replace(settings, fanout=1), logs, run_id, host)


def fill(bootstrap: str, topic: str, options: MemoryOptions) -> tuple[int, float, dict[int, int]]:
    """Produce 8 KB events as fast as the broker takes them, for the fill time or N events,
    never more than max_backlog_bytes (the broker holds them all in memory). Returns the
    events written, the time taken, and each partition's end offset from the delivery reports:
    Tansu's ListOffsets answers the base offset of a partition's last batch, not its end, which
    a fill in ~1 MB batches puts ~120 events short."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1"})
    payload = b"x" * options.event_bytes
    cap = options.max_backlog_bytes // options.event_bytes
    wanted = min(options.fill_events or cap, cap)
    ends: dict[int, int] = {}
    failed: list[str] = []

    def delivered(err: object, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    started = time.monotonic()
    deadline = started + (options.fill_s if options.fill_events is None else float("inf"))
    sent = 0
    while sent < wanted and time.monotonic() < deadline:
        try:
            # Binary-mode CloudEvent headers, as the lab's Kafka ingress writes them: the
            # channel dispatcher forwards them; the other consumers ignore them.
            producer.produce(
                topic,
                value=payload,
                key=str(sent).encode(),
                headers=[*_CE_HEADERS, ("ce_id", f"memory-{sent}".encode())],
                on_delivery=delivered,
            )
            sent += 1
        except BufferError:
            producer.poll(0.05)  # the producer's queue is full: let it drain
        if sent % 1000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise EvbenchError("the backlog could not be written to the broker within 120 s")
    if failed:
        raise EvbenchError(f"{len(failed)} of {sent} backlog events were not written: {failed[0]}")
    return sent, time.monotonic() - started, ends


def read_lag(session: Session, backlog: Backlog, ends: dict[int, int]) -> list[PartitionLagDoc]:
    """Each partition's committed offset and end, read once from outside the group (no
    rebalance) into samples/consumer-lag. The end is the fill's own where the broker reports
    less (see _fill)."""
    # A broker just filled with gigabytes (and sharing the cores) may answer slowly.
    reader = ConsumerLagSampler(
        backlog.bootstrap,
        backlog.group,
        backlog.topic,
        session.sut_dir.consumer_lag,
        timeout_s=_LAG_TIMEOUT_S,
    )
    try:
        reader.sample(end_floor=ends)
    finally:
        reader.stop()  # flushes the rows to samples/consumer-lag
    return [
        {
            "partition": row.partition,
            "committed": row.committed_offset,
            "end": row.end_offset,
            "lag": row.lag,
        }
        for row in sorted(reader.last_rows, key=lambda r: r.partition)
    ]
