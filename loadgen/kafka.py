"""Kafka records straight to a topic (the KafkaSource path): publish latency is the produce ack.

The id travels as the record key, as a `ce_evbenchid` header (Kafka binary content mode) and in
the payload, so it survives a source adapter that builds its own CloudEvent.

`produce()` only queues the record in librdkafka and returns; acks come back through callbacks
that run inside `poll()`. Polling happens on the event loop's own thread, without waiting
(`poll(0)`), every millisecond, so an ack is stamped about a millisecond at most after
librdkafka has it, and no second Python thread competes with the pacer for the GIL.

One broker response can ack hundreds of records at once (a slow broker, many partitions), and
their callbacks would run back to back inside one `poll()` while due slots wait: 400 acks took
2.5 ms at 10,000/s against a 100-partition topic. So a poll has a time budget: the callback that
finds it spent raises, librdkafka yields (`rd_kafka_yield`) and keeps the rest of that response's
reports queued, and the next poll runs after the loop has fired the due slots.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

from confluent_kafka import KafkaError, KafkaException, Producer

from contract.records import (
    DECOY_EVENT_TYPE,
    EVENT_ID_HEADER,
    EVENT_TYPE,
    KAFKA_ACK_STATUS,
    WARMUP_EVENT_TYPE,
)
from contract.senderlines import TransportStats
from loadgen.payload import PayloadBuilder
from loadgen.request import Complete, Request

# Defaults that keep the sender honest on one machine: acks from the leader and its replicas,
# and a short linger so batching does not dominate publish latency at 1-2 k/s.
PRODUCER_DEFAULTS: dict[str, str] = {"acks": "all", "linger.ms": "5", "enable.idempotence": "false"}
_POLL_INTERVAL_S = 0.001
# Callbacks per poll stop after this much time (wall ns: they stamp the wall clock anyway), so
# a burst of acks delays a due slot by about this much at most. ~15 acks at ~6 µs each.
_POLL_BUDGET_NS = 100_000
_NO_BUDGET_NS = 1 << 62  # close() flushes with no budget: nothing to pace any more


class _PollBudgetSpent(Exception):
    """Raised by a delivery callback to make librdkafka stop serving callbacks for this poll."""


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
        payloads: PayloadBuilder,
        request_timeout_s: float = 30.0,
        config: dict[str, str] | None = None,
    ) -> None:
        self.bootstrap, self.topic = parse_kafka_target(url)
        self.payloads = payloads
        settings = {
            **PRODUCER_DEFAULTS,
            "bootstrap.servers": self.bootstrap,
            "delivery.timeout.ms": str(int(request_timeout_s * 1000)),
            **(config or {}),
        }
        try:
            self.producer = Producer(settings)
        except KafkaException as exc:
            why = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
            raise ValueError(f"Kafka producer settings rejected: {why}") from None
        common: list[tuple[str, str | bytes | None]] = [
            ("ce_specversion", b"1.0"),
            ("ce_source", source.encode()),
            ("content-type", b"application/json"),
        ]
        self._headers = [
            [*common, ("ce_type", ce_type.encode())]
            for ce_type in (EVENT_TYPE, WARMUP_EVENT_TYPE, DECOY_EVENT_TYPE)
        ]
        self._id_header = EVENT_ID_HEADER.replace("-", "_")
        self._complete: Complete | None = None
        self._poller: asyncio.TimerHandle | None = None
        self._poll_deadline_ns = _NO_BUDGET_NS
        self.queue_full = 0
        self.poll_yields = 0

    def bind(self, complete: Complete) -> None:
        self._complete = complete

    async def prepare(self, rate_per_s: int) -> None:
        if self._poller is None:
            self._poll()

    def _poll(self) -> None:
        delay_s = _POLL_INTERVAL_S
        self._poll_deadline_ns = time.time_ns() + _POLL_BUDGET_NS
        try:
            self.producer.poll(0)
        except _PollBudgetSpent:
            # More reports are queued: read them on the loop's next turn, after the due slots
            # (a timer due now runs after the I/O that is ready, the pacer's wake-up included).
            self.poll_yields += 1
            delay_s = 0.0
        finally:  # one failing callback must not stop every later ack from being read
            self._poll_deadline_ns = _NO_BUDGET_NS
            self._poller = asyncio.get_running_loop().call_later(delay_s, self._poll)

    def send(self, request: Request) -> None:
        if self._poller is None:  # a run that starts late skips prepare()
            self._poll()
        eid = request.event_id
        headers: list[tuple[str, str | bytes | None]] = [
            *self._headers[request.kind],
            ("ce_id", eid),
            (self._id_header, eid),
        ]
        complete = self._complete
        assert complete is not None

        def delivered(err, msg) -> None:  # inside poll(), on the loop's thread
            ack_ns = time.time_ns()
            if err is None:
                complete(request, KAFKA_ACK_STATUS, None, ack_ns)
            else:
                complete(request, 0, f"Kafka {err.name()}: {err.str()}"[:500], ack_ns)
            if ack_ns > self._poll_deadline_ns:
                raise _PollBudgetSpent  # this report is recorded; the rest wait for the next poll

        try:
            self.producer.produce(
                self.topic,
                value=self.payloads.prefix + eid + self.payloads.tail(len(eid)),
                key=eid,
                headers=headers,
                on_delivery=delivered,
            )
        except BufferError:
            self.queue_full += 1
            complete(request, 0, "producer queue full (queue.buffering.max.messages)", None)
        except KafkaException as exc:
            # By its kind, as a delivery error is ("Kafka _UNKNOWN_TOPIC: ..."): the failure's
            # cause (runtime.failcause) is the part before the colon.
            error: Any = exc.args[0] if exc.args else None
            kind = error.name() if isinstance(error, KafkaError) else "produce"
            complete(request, 0, f"Kafka {kind}: {exc}"[:500], None)

    def abandon(self, request: Request) -> None:
        """A queued record cannot be recalled; a late ack is ignored (the request is done)."""

    def sweep(self) -> None:
        """Nothing to expire: librdkafka times out its own records (delivery.timeout.ms)."""

    def stats(self) -> TransportStats:
        return {"producer_queue_full": self.queue_full, "producer_poll_yields": self.poll_yields}

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        # Every request is done by now (answered or given up): this only empties the queue.
        self.producer.flush(5)
