"""Kafka records straight to a topic (the KafkaSource path): publish latency is the produce ack.

The id travels as the record key, as a `ce_evbenchid` header (Kafka binary content mode) and in
the payload, so it survives a source adapter that builds its own CloudEvent.

confluent-kafka acknowledges through callbacks fired inside `poll()`, which blocks in C and would
stall the gevent hub. So `poll()` runs on a real OS thread; each callback stamps nothing itself,
only queues the result and wakes the hub through a thread-safe async watcher, and the waiting
send greenlet returns. The engine stamps the ack as for HTTP, when the greenlet resumes.
"""

from __future__ import annotations

import threading
from collections import deque
from urllib.parse import urlsplit

import gevent
import gevent.event
from confluent_kafka import KafkaException, Producer
from gevent.threadpool import ThreadPool

from evbench.records import EVENT_ID_HEADER, KAFKA_ACK_STATUS

# Defaults that keep the sender honest on one machine: acks from the leader and its replicas,
# and a short linger so batching does not dominate publish latency at 1-2 k/s.
PRODUCER_DEFAULTS: dict[str, str] = {"acks": "all", "linger.ms": "5", "enable.idempotence": "false"}


def parse_kafka_target(url: str) -> tuple[str, str]:
    """`kafka://host:port[,host:port]/topic` -> (bootstrap servers, topic)."""
    parts = urlsplit(url)
    topic = parts.path.strip("/")
    if parts.scheme != "kafka" or not parts.netloc or not topic or "/" in topic:
        raise ValueError(f"Kafka target '{url}' must look like kafka://host:port/topic")
    return parts.netloc, topic


class KafkaTransport:
    def __init__(
        self,
        url: str,
        source: str,
        request_timeout_s: float = 30.0,
        config: dict[str, str] | None = None,
    ) -> None:
        self.bootstrap, self.topic = parse_kafka_target(url)
        self.source = source.encode()
        settings = {
            **PRODUCER_DEFAULTS,
            "bootstrap.servers": self.bootstrap,
            "delivery.timeout.ms": str(int(request_timeout_s * 1000)),
            **(config or {}),
        }
        try:
            self.producer = Producer(settings)
        except KafkaException as exc:
            raise ValueError(f"Kafka producer settings rejected: {exc}") from None
        self._done: deque[tuple[gevent.event.AsyncResult, str | None]] = deque()
        self._wake = gevent.get_hub().loop.async_()
        self._wake.start(self._resolve)
        self._closing = threading.Event()
        self._pool = ThreadPool(1)
        self._poller = self._pool.spawn(self._poll_forever)

    def _poll_forever(self) -> None:  # on a real thread
        while not self._closing.is_set():
            self.producer.poll(0.05)
        self.producer.flush(5)

    def _on_delivery(self, result: gevent.event.AsyncResult, err, msg) -> None:  # poll thread
        self._done.append((result, None if err is None else f"Kafka {err.name()}: {err.str()}"))
        self._wake.send()

    def _resolve(self) -> None:  # in the hub
        while self._done:
            result, error = self._done.popleft()
            result.set(error)

    def send(self, event_id: str, payload: bytes, ce_type: str) -> tuple[int, str | None, bool]:
        result = gevent.event.AsyncResult()
        key = event_id.encode()
        headers = [
            ("ce_specversion", b"1.0"),
            ("ce_id", key),
            (EVENT_ID_HEADER.replace("-", "_"), key),
            ("ce_source", self.source),
            ("ce_type", ce_type.encode()),
            ("content-type", b"application/json"),
        ]
        try:
            self.producer.produce(
                self.topic,
                value=payload,
                key=key,
                headers=headers,
                on_delivery=lambda err, msg: self._on_delivery(result, err, msg),
            )
        except BufferError:
            return 0, "producer queue full (queue.buffering.max.messages)", False
        except KafkaException as exc:
            return 0, f"Kafka produce: {exc}"[:500], False
        error = result.get()
        if error is None:
            return KAFKA_ACK_STATUS, None, True
        return 0, error[:500], True

    def close(self) -> None:
        self._closing.set()
        self._poller.get()
        self._pool.kill()
        self._wake.stop()
