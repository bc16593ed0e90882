"""Consumer lag per partition, sampled every few seconds from outside the consumer group.

A consumer with the group's id that never subscribes can read the group's committed offsets
without joining it (joining would trigger a rebalance of the system under test).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from evbench.shared.parquet import PartWriter
from evbench.shared.records import CONSUMER_LAG_FIELDS, ConsumerLagRow


def partition_lag(end_offset: int, committed: int | None, low_offset: int) -> int:
    """Records not yet committed; before any commit, everything from the low watermark."""
    start = committed if committed is not None and committed >= 0 else low_offset
    return max(0, end_offset - start)


DESCRIBE_COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)


def describe_lines(
    group: str,
    topic: str,
    partitions: list[tuple[int, int | None, int]],
    member: tuple[str, str, str] | None = None,
) -> list[str]:
    """`kafka-consumer-groups --describe --group G` as Kafka's tool prints it, from (partition,
    committed offset or None, log-end offset) rows: columns padded to at least 15, and `-` for
    the offset and the lag of a partition with nothing committed and for an absent member."""
    consumer_id, host, client_id = member or ("-", "-", "-")
    widths = [max(15, len(group)), max(15, len(topic)), 10, 15, 15, 15]
    widths += [max(15, len(consumer_id)), max(15, len(host))]

    def line(values: tuple[str, ...]) -> str:
        padded = [v.ljust(w) for v, w in zip(values, widths, strict=False)]
        return " ".join([*padded, values[-1]])

    rows = [line(DESCRIBE_COLUMNS)]
    for partition, committed, end in partitions:
        known = committed is not None and committed >= 0
        current, lag = (str(committed), str(end - committed)) if known else ("-", "-")
        rows.append(
            line(
                (group, topic, str(partition), current, str(end), lag, consumer_id, host, client_id)
            )
        )
    return rows


class ConsumerLagSampler:
    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        out_dir: Path,
        interval_s: float = 5.0,
    ) -> None:
        self.group = group
        self.topic = topic
        self.interval_s = interval_s
        self.writer = PartWriter(out_dir, CONSUMER_LAG_FIELDS, prefix="lag")
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self.errors = 0
        self.last_total_lag: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def sample(self) -> int:
        """One sample of every partition; returns the total lag."""
        metadata = self.consumer.list_topics(self.topic, timeout=5)
        partitions = [
            TopicPartition(self.topic, p) for p in sorted(metadata.topics[self.topic].partitions)
        ]
        committed = self.consumer.committed(partitions, timeout=5)
        now_ns = time.time_ns()
        total = 0
        for tp in committed:
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, tp.partition), timeout=5, cached=False
            )
            offset = tp.offset if tp.offset >= 0 else None
            lag = partition_lag(high, offset, low)
            total += lag
            self.writer.append(
                ConsumerLagRow(now_ns, self.group, self.topic, tp.partition, high, offset, lag)
            )
        self.last_total_lag = total
        return total

    def _run(self) -> None:
        while True:
            try:
                self.sample()
                self.writer.flush()
            except (KafkaException, KeyError):
                self.errors += 1  # the broker may be gone at the very end: keep what we have
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.writer.flush()
        self.consumer.close()
