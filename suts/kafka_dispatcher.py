"""Consumer-group dispatcher: Kafka topic -> HTTP subscriber, committing after delivery.

One process plays three parts of the Knative data plane:
- `channel`: the Kafka channel dispatcher (record headers back to a binary-mode CloudEvent);
- `channel` with `--match`: the Kafka broker's trigger dispatcher, which filters first;
- `source`: the 2019 KafkaSource adapter, which builds its own CloudEvent from the record.

Consuming runs on its own thread (confluent-kafka's calls block in C); records are handed to the
event loop, delivered with bounded concurrency, and their offsets committed only up to the first
undelivered one, every `--commit-interval`. `--max-pending` bounds records taken but not yet
delivered, so a slow subscriber slows consumption instead of filling memory (the backlog stays in
Kafka, where the consumer-lag sampler sees it). `/ready` answers 200 once partitions are assigned.
`/metrics` reports the records taken per partition as eventing-kafka's dispatcher does
(`eventing_kafka_consumed_msg_count`).
"""

from __future__ import annotations

import asyncio
import threading
import time

from aiohttp import web
from confluent_kafka import Consumer, KafkaException, TopicPartition
from prometheus_client.metrics_core import Metric

from contract.receiverlines import Assigned
from suts.cloudevents import (
    Filter,
    filter_attributes,
    from_kafka_headers,
    matches,
    source_event_headers,
)
from suts.metrics import consumed_family, librdkafka_consumer_name
from suts.offsets import OffsetBook
from suts.serving import Component, Deliverer, emit

_BATCH = 500


class KafkaDispatcher(Component):
    kind = "kafka-dispatcher"

    def __init__(
        self,
        topic: str,
        subscriber: str,
        mode: str,
        event_filter: Filter,
        consumer_config: dict[str, str],
        concurrency: int,
        retries: int,
        backoff_ms: float,
        timeout_s: float,
        max_pending: int,
        commit_interval_s: float,
    ) -> None:
        super().__init__()
        self.topic = topic
        self.subscriber = subscriber
        self.mode = mode
        self.event_filter = event_filter
        self.consumer_config = consumer_config
        self.deliverer = Deliverer(concurrency, retries, backoff_ms, timeout_s, self.stats)
        self.pending = threading.BoundedSemaphore(max_pending)
        self.commit_interval_s = commit_interval_s
        self.book = OffsetBook()
        self.assigned: set[int] = set()
        self.consumed: dict[int, int] = {}  # partition -> records taken, on the loop
        self.assigned_after_s: float | None = None
        self._commits: dict[int, int] = {}  # handed from the loop to the poll thread
        self._commits_lock = threading.Lock()
        self._closing = threading.Event()
        self._tasks: set[asyncio.Task] = set()

    def is_ready(self) -> bool:
        return bool(self.assigned)

    def ready_doc(self) -> dict[str, object]:
        return {"partitions": len(self.assigned), "assigned_after_s": self.assigned_after_s}

    def stats_doc(self) -> dict[str, int]:
        return {**self.stats, "in_flight": len(self._tasks), "partitions": len(self.assigned)}

    def gauges(self) -> dict[str, float]:
        return {"in_flight_events": len(self._tasks), "assigned_partitions": len(self.assigned)}

    def metric_families(self) -> list[Metric]:
        # Copied at once: the poll thread's rebalance callbacks change it while the scrape reads.
        assigned = set(self.assigned)
        name = librdkafka_consumer_name(self.consumer_config)
        consumed = consumed_family(self.topic, name, self.consumed, assigned)
        return [*super().metric_families(), consumed]

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.deliverer.start()
        self.consumer = Consumer(self.consumer_config)
        self._subscribed_at = time.monotonic()
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self._thread = threading.Thread(target=self._consume_forever, name="consumer")
        self._thread.start()
        self._committer = asyncio.ensure_future(self._commit_forever())

    async def stop(self) -> None:
        self._committer.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2.0)
        self._hand_over_commits()
        self._closing.set()
        await asyncio.to_thread(self._thread.join)

    def routes(self, app: web.Application) -> None:
        pass  # no ingress: records come from the topic

    # consumer thread
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned.update(p.partition for p in partitions)
        if self.assigned_after_s is None and self.assigned:
            self.assigned_after_s = round(time.monotonic() - self._subscribed_at, 3)
            after_s = self.assigned_after_s
            emit(Assigned(event="assigned", partitions=len(self.assigned), after_s=after_s))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = [p.partition for p in partitions]
        self.assigned.difference_update(revoked)
        self.loop.call_soon_threadsafe(self.book.forget, revoked)

    def _consume_forever(self) -> None:
        try:
            while not self._closing.is_set():
                self._commit_handed_over()
                records = self.consumer.consume(_BATCH, 0.05)
                taken = []
                for record in records:
                    if record.error():
                        self.stats["consume_errors"] += 1
                        continue
                    while not self.pending.acquire(timeout=0.1):
                        if self._closing.is_set():
                            return
                    taken.append(record)
                if taken:
                    self.loop.call_soon_threadsafe(self._dispatch_all, taken)
        finally:
            self._commit_handed_over()
            self.consumer.close()

    def _commit_handed_over(self) -> None:
        with self._commits_lock:
            commits, self._commits = self._commits, {}
        if not commits:
            return
        offsets = [TopicPartition(self.topic, p, o) for p, o in commits.items()]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
            self.stats["commits"] += 1
        except KafkaException:
            self.stats["commit_errors"] += 1

    # event loop
    def _dispatch_all(self, records: list) -> None:
        for record in records:
            partition = record.partition()
            self.book.taken(partition, record.offset())
            self.consumed[partition] = self.consumed.get(partition, 0) + 1
            task = asyncio.ensure_future(self._dispatch(record))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _dispatch(self, record) -> None:
        try:
            if self.mode == "source":
                content_type = dict(record.headers() or ()).get("content-type")
                headers = source_event_headers(
                    self.topic,
                    record.partition(),
                    record.offset(),
                    record.key(),
                    content_type.decode() if content_type else None,
                )
            else:
                headers = from_kafka_headers(record.headers())
            if matches(self.event_filter, filter_attributes(headers)):
                await self.deliverer.deliver(self.subscriber, headers, record.value() or b"")
            else:
                self.stats["filtered"] += 1
        finally:
            # Delivered, filtered or given up on after the retries: done either way, as in
            # Knative without a dead-letter sink.
            self.book.done(record.partition(), record.offset())
            self.pending.release()

    def _hand_over_commits(self) -> None:
        moved = self.book.to_commit()
        if moved:
            with self._commits_lock:
                self._commits.update(moved)

    async def _commit_forever(self) -> None:
        while True:
            await asyncio.sleep(self.commit_interval_s)
            self._hand_over_commits()
