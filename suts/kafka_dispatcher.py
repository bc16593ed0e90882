"""Consumer-group dispatcher: Kafka topic -> HTTP subscriber, committing after delivery.

One process plays three parts of the Knative data plane:
- `channel`: the Kafka channel dispatcher (record headers back to a binary-mode CloudEvent);
- `channel` with `--match`: the Kafka broker's trigger dispatcher, which filters first;
- `source`: the 2019 KafkaSource adapter, which builds its own CloudEvent from the record.

Fan-out (more than one `--subscriber`): a lane per subscriber (`Lane`), each a consumer group of
its own reading the whole topic, as Knative's Kafka broker runs one per trigger; `--matching M`
lets only the first M filter by the trigger, the others by one that takes none of the run's
events.

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
from collections.abc import Sequence
from functools import partial

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


class Lane:
    """One subscription (a trigger, on a Kafka broker): a consumer group of its own on the
    topic, with its own offsets, pending bound and commits, delivering to its own subscriber
    after its own filter, as Knative's Kafka broker runs a consumer group per trigger. The
    first lane's group is the run's (its lag is what the sampler reads); the n-th's adds `.n`."""

    def __init__(
        self, number: int, subscriber: str, event_filter: Filter, config: dict[str, str],
        max_pending: int,
    ) -> None:  # fmt: skip
        self.number = number
        self.subscriber = subscriber
        self.event_filter = event_filter
        group = config.get("group.id", "evbench")
        self.config = config if number == 1 else {**config, "group.id": f"{group}.{number}"}
        self.pending = threading.BoundedSemaphore(max_pending)
        self.book = OffsetBook()
        self.assigned: set[int] = set()
        self.consumed: dict[int, int] = {}  # partition -> records taken, on the loop
        self.assigned_after_s: float | None = None
        self.commits: dict[int, int] = {}  # handed from the loop to the poll thread
        self.commits_lock = threading.Lock()
        self.consumer: Consumer | None = None
        self.thread: threading.Thread | None = None


class KafkaDispatcher(Component):
    kind = "kafka-dispatcher"

    def __init__(
        self,
        topic: str,
        lanes: Sequence[tuple[str, Filter]],
        mode: str,
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
        self.mode = mode
        self.consumer_config = consumer_config
        self.lanes = [
            Lane(number, url, event_filter, consumer_config, max_pending)
            for number, (url, event_filter) in enumerate(lanes, start=1)
        ]
        self.deliverer = Deliverer(concurrency, retries, backoff_ms, timeout_s, self.stats)
        self.commit_interval_s = commit_interval_s
        self.assigned_after_s: float | None = None  # when every lane had its partitions
        self._closing = threading.Event()
        self._tasks: set[asyncio.Task] = set()
        # The lanes' threads count into the shared stats, and the first to see every lane
        # assigned says so: one at a time.
        self._counting = threading.Lock()

    @property
    def assigned(self) -> set[int]:
        """The first lane's partitions (every lane's group reads the whole topic)."""
        return self.lanes[0].assigned

    def is_ready(self) -> bool:
        return all(lane.assigned for lane in self.lanes)

    def ready_doc(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "partitions": len(self.assigned), "assigned_after_s": self.assigned_after_s
        }  # fmt: skip
        if len(self.lanes) > 1:
            doc["groups"] = len(self.lanes)
        return doc

    def stats_doc(self) -> dict[str, int]:
        return {**self.stats, "in_flight": len(self._tasks), "partitions": len(self.assigned)}

    def gauges(self) -> dict[str, float]:
        return {"in_flight_events": len(self._tasks), "assigned_partitions": len(self.assigned)}

    def metric_families(self) -> list[Metric]:
        name = librdkafka_consumer_name(self.consumer_config)
        # Copied at once: the poll threads' rebalance callbacks change them while this reads.
        lanes = [
            (
                name.replace("#consumer-1", f"#consumer-{lane.number}"),
                lane.consumed,
                set(lane.assigned),
            )
            for lane in self.lanes
        ]
        return [*super().metric_families(), consumed_family(self.topic, lanes)]

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.deliverer.start()
        self._subscribed_at = time.monotonic()
        for lane in self.lanes:
            lane.consumer = Consumer(lane.config)
            lane.consumer.subscribe(
                [self.topic],
                on_assign=partial(self._on_assign, lane),
                on_revoke=partial(self._on_revoke, lane),
            )
            lane.thread = threading.Thread(
                target=self._consume_forever, args=(lane,), name=f"consumer-{lane.number}"
            )
            lane.thread.start()
        self._committer = asyncio.ensure_future(self._commit_forever())

    async def stop(self) -> None:
        self._committer.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2.0)
        self._hand_over_commits()
        self._closing.set()
        for lane in self.lanes:
            if lane.thread is not None:
                await asyncio.to_thread(lane.thread.join)

    def routes(self, app: web.Application) -> None:
        pass  # no ingress: records come from the topic

    # consumer threads
    def _on_assign(self, lane: Lane, _: Consumer, partitions: list[TopicPartition]) -> None:
        lane.assigned.update(p.partition for p in partitions)
        if lane.assigned_after_s is None and lane.assigned:
            lane.assigned_after_s = round(time.monotonic() - self._subscribed_at, 3)
        with self._counting:
            if self.assigned_after_s is not None or not self.is_ready():
                return
            self.assigned_after_s = max(lane.assigned_after_s or 0.0 for lane in self.lanes)
        after_s = self.assigned_after_s
        emit(Assigned(event="assigned", partitions=len(self.assigned), after_s=after_s))

    def _on_revoke(self, lane: Lane, _: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = [p.partition for p in partitions]
        lane.assigned.difference_update(revoked)
        self.loop.call_soon_threadsafe(lane.book.forget, revoked)

    def _consume_forever(self, lane: Lane) -> None:
        assert lane.consumer is not None
        try:
            while not self._closing.is_set():
                self._commit_handed_over(lane)
                records = lane.consumer.consume(_BATCH, 0.05)
                taken = []
                for record in records:
                    if record.error():
                        self._count("consume_errors")
                        continue
                    while not lane.pending.acquire(timeout=0.1):
                        if self._closing.is_set():
                            return
                    taken.append(record)
                if taken:
                    self.loop.call_soon_threadsafe(self._dispatch_all, lane, taken)
        finally:
            self._commit_handed_over(lane)
            lane.consumer.close()

    def _commit_handed_over(self, lane: Lane) -> None:
        with lane.commits_lock:
            commits, lane.commits = lane.commits, {}
        if not commits or lane.consumer is None:
            return
        offsets = [TopicPartition(self.topic, p, o) for p, o in commits.items()]
        try:
            lane.consumer.commit(offsets=offsets, asynchronous=False)
            self._count("commits")
        except KafkaException:
            self._count("commit_errors")

    def _count(self, name: str) -> None:
        with self._counting:
            self.stats[name] += 1

    # event loop
    def _dispatch_all(self, lane: Lane, records: list) -> None:
        for record in records:
            partition = record.partition()
            lane.book.taken(partition, record.offset())
            lane.consumed[partition] = lane.consumed.get(partition, 0) + 1
            task = asyncio.ensure_future(self._dispatch(lane, record))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _dispatch(self, lane: Lane, record) -> None:
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
            if matches(lane.event_filter, filter_attributes(headers)):
                await self.deliverer.deliver(lane.subscriber, headers, record.value() or b"")
            else:
                self.stats["filtered"] += 1
        finally:
            # Delivered, filtered or given up on after the retries: done either way, as in
            # Knative without a dead-letter sink.
            lane.book.done(record.partition(), record.offset())
            lane.pending.release()

    def _hand_over_commits(self) -> None:
        for lane in self.lanes:
            moved = lane.book.to_commit()
            if moved:
                with lane.commits_lock:
                    lane.commits.update(moved)

    async def _commit_forever(self) -> None:
        while True:
            await asyncio.sleep(self.commit_interval_s)
            self._hand_over_commits()
