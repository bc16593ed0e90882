"""Consumer lag per partition, sampled every few seconds from outside the consumer group.

A consumer with the group's id that never subscribes can read the group's committed offsets
without joining it (joining would trigger a rebalance of the system under test).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from contract.records import CONSUMER_LAG_FIELDS, ConsumerLagRow
from runtime.parquet import PartWriter


def partition_lag(end_offset: int, committed: int | None, low_offset: int) -> int:
    """Records not yet committed; before any commit, everything from the low watermark."""
    start = committed if committed is not None and committed >= 0 else low_offset
    return max(0, end_offset - start)


class ConsumerLagSampler:
    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        out_dir: Path,
        interval_s: float = 5.0,
        timeout_s: float = 5.0,  # each call to the broker; a busy broker may need more
    ) -> None:
        self.timeout_s = timeout_s
        self.group = group
        self.topic = topic
        self.interval_s = interval_s
        self.writer = PartWriter(out_dir, CONSUMER_LAG_FIELDS, prefix="lag")
        self.client_log = OnceLog(f"consumer-lag sampler ({bootstrap})")
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                # Its client's complaints (a broker gone: one per retry, every second) go
                # through evbench, said once and then counted, never to the console per retry.
                "logger": self.client_log.logger,
            }
        )
        self.errors = 0
        self.last_total_lag: int | None = None
        self.last_rows: list[ConsumerLagRow] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def sample(self, end_floor: Mapping[int, int] | None = None) -> int:
        """One sample of every partition; returns the total lag (each partition's row is in
        `last_rows`). Also called from outside the sampling thread (`evbench search` asks
        before each warm probe), hence the lock. `end_floor`: ends known from the producer's
        own delivery reports, where the broker may report less (Tansu answers ListOffsets with
        the base offset of a partition's last batch)."""
        with self._lock:
            return self._sample(end_floor or {})

    def _sample(self, end_floor: Mapping[int, int]) -> int:
        metadata = self.consumer.list_topics(self.topic, timeout=self.timeout_s)
        partitions = [
            TopicPartition(self.topic, p) for p in sorted(metadata.topics[self.topic].partitions)
        ]
        committed = self.consumer.committed(partitions, timeout=self.timeout_s)
        now_ns = time.time_ns()
        rows = []
        for tp in committed:
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, tp.partition), timeout=self.timeout_s, cached=False
            )
            high = max(high, end_floor.get(tp.partition, 0))
            offset = tp.offset if tp.offset >= 0 else None
            lag = partition_lag(high, offset, low)
            rows.append(
                ConsumerLagRow(now_ns, self.group, self.topic, tp.partition, high, offset, lag)
            )
        for row in rows:
            self.writer.append(row)
        self.last_rows = rows
        self.last_total_lag = sum(row.lag for row in rows)
        return self.last_total_lag

    def try_sample(self) -> int | None:
        """A sample, or None (counted in `errors`) when the broker cannot answer: it may be gone
        at the very end, and what was sampled is kept."""
        try:
            return self.sample()
        except (KafkaException, KeyError):
            self.errors += 1
            return None
        finally:
            self.consumer.poll(0)  # hands the client's queued log lines to `client_log`

    def _run(self) -> None:
        while True:
            if self.try_sample() is not None:
                self.writer.flush()
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # a one-off reader (`evbench memory`) never started
            self._thread.join(timeout=30)
        self.writer.flush()
        self.consumer.close()


class OnceLog:
    """A Kafka client's log, said once: its first line of each facility (CONNECT, FAIL, ...) to
    stderr with who said it, the rest counted (a dead broker makes librdkafka log every retry,
    and the run's own lines would drown)."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.said: set[str] = set()
        self.counted = 0
        self.logger = logging.Logger(f"evbench.kafka.{id(self)}")
        self.logger.addFilter(self._once)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"{who}: %(message)s"))
        self.logger.addHandler(handler)

    def _once(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        facility = str(args[0]) if args else record.getMessage()
        if facility in self.said:
            self.counted += 1
            return False
        self.said.add(facility)
        record.msg = f"{record.getMessage()} (its next lines of this kind are counted, not shown)"
        record.args = None
        return True
