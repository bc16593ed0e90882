"""The three Python Kafka clients of seed 001 behind one small interface: poll a batch, report the
client's own queue, close (committing). Each subscribes with `auto.offset.reset=earliest` so a
new group reads the backlog from its start, and commits automatically as the seed's did."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Protocol

from contract.consumerlines import ConsumerQueue

_BATCH = 500
_POLL_S = 0.2
# Group timing only, no buffer. Tansu assigns a new group about half a session timeout after
# the join (measured: librdkafka's 45 s default ~23 s, kafka-python's 10 s ~24 s, 6 s ~3-4 s
# for each), which would read as a late claim; a user's setting still wins.
_SESSION_TIMEOUT_MS = 6000
_HEARTBEAT_MS = 1000
_PY_GROUP_TIMING = {
    "session_timeout_ms": _SESSION_TIMEOUT_MS,
    "heartbeat_interval_ms": _HEARTBEAT_MS,
}


class Client(Protocol):
    def poll(self) -> list[tuple[int, str | None]]:
        """(partition, None) per message consumed, (-1, error text) per error."""
        ...

    def queue(self) -> ConsumerQueue:
        """What the client says it holds (empty when it says nothing)."""
        ...

    def close(self) -> None: ...


def _value(text: str) -> object:
    """A setting as the pure-Python clients want it (librdkafka takes strings)."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(text)
    except ValueError:
        return text


class Confluent:
    """confluent-kafka (librdkafka), with its statistics every second: the fetch queue."""

    def __init__(self, bootstrap: str, topic: str, group: str, settings: dict[str, str]) -> None:
        from confluent_kafka import Consumer

        self._stats: ConsumerQueue = {}
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "statistics.interval.ms": 1000,
            "stats_cb": self._on_stats,
            "session.timeout.ms": _SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": _HEARTBEAT_MS,
            **settings,
        }
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic])

    def _on_stats(self, text: str) -> None:
        # Every assigned partition's fetch queue forwards to the consumer's one queue, so each
        # reports the same total: take the largest, never the sum.
        stats = json.loads(text)
        queues = [
            (p.get("fetchq_size", 0), p.get("fetchq_cnt", 0))
            for t in stats.get("topics", {}).values()
            for key, p in t.get("partitions", {}).items()
            if key != "-1"
        ]
        size, count = max(queues, default=(0, 0))
        self._stats = {"fetchq_bytes": size, "fetchq_messages": count, "replyq": stats["replyq"]}

    def poll(self) -> list[tuple[int, str | None]]:
        out: list[tuple[int, str | None]] = []
        for message in self.consumer.consume(num_messages=_BATCH, timeout=_POLL_S):
            error = message.error()
            partition = message.partition()
            out.append((-1, str(error)) if error or partition is None else (partition, None))
        return out

    def queue(self) -> ConsumerQueue:
        return self._stats.copy()

    def close(self) -> None:
        self.consumer.close()


class KafkaPython:
    def __init__(self, bootstrap: str, topic: str, group: str, settings: dict[str, str]) -> None:
        from kafka import KafkaConsumer

        options = {**_PY_GROUP_TIMING, **{k: _value(v) for k, v in settings.items()}}
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            **options,
        )

    def poll(self) -> list[tuple[int, str | None]]:
        batches = self.consumer.poll(timeout_ms=int(_POLL_S * 1000), max_records=_BATCH)
        return [(tp.partition, None) for tp, records in batches.items() for _ in records]

    def queue(self) -> ConsumerQueue:
        return {}

    def close(self) -> None:
        self.consumer.close()


class AioKafka:
    """aiokafka on an event loop of its own, driven one batch at a time."""

    def __init__(self, bootstrap: str, topic: str, group: str, settings: dict[str, str]) -> None:
        from aiokafka import AIOKafkaConsumer

        self.loop = asyncio.new_event_loop()
        options = {**_PY_GROUP_TIMING, **{k: _value(v) for k, v in settings.items()}}

        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                **options,
            )
            await consumer.start()
            return consumer

        self.consumer = self.loop.run_until_complete(start())

    def poll(self) -> list[tuple[int, str | None]]:
        batches = self.loop.run_until_complete(
            self.consumer.getmany(timeout_ms=int(_POLL_S * 1000), max_records=_BATCH)
        )
        return [(tp.partition, None) for tp, records in batches.items() for _ in records]

    def queue(self) -> ConsumerQueue:
        return {}

    def close(self) -> None:
        self.loop.run_until_complete(self.consumer.stop())
        self.loop.close()


def open_client(
    name: str, bootstrap: str, topic: str, group: str, settings: dict[str, str]
) -> Client:
    kinds: dict[str, Callable[[str, str, str, dict[str, str]], Client]] = {
        "confluent": Confluent,
        "kafka-python": KafkaPython,
        "aiokafka": AioKafka,
    }
    return kinds[name](bootstrap, topic, group, settings)
