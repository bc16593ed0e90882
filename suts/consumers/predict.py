"""How much a Kafka consumer may buffer, from its documented settings. Pure.

A user sizing a pod wants a number before the measurement and the measurement next to it; each
client bounds what it holds differently:

- librdkafka (confluent-kafka, and the lab's source adapter and dispatcher, which use it): it
  stops fetching once its queue holds `queued.min.messages` messages or
  `queued.max.messages.kbytes` kB (x 1000); both are totals for the consumer, not per partition,
  since every partition's queue forwards to the consumer's one queue. A fetch response already
  on its way still lands, up to `fetch.max.bytes` (when unset librdkafka derives it:
  max(min(52428800, kbytes x 1024), message.max.bytes)).
- aiokafka and kafka-python: at most one fetched, undelivered result per partition (each up to
  `max_partition_fetch_bytes`), and one request in flight per broker, whose response carries at
  most `fetch_max_bytes`.
- Sarama (the 2019 Go adapters, seed 003): `ChannelBufferSize` messages per partition and
  subscription.

Against Tansu, the lab's broker, a response gives its first partition all of `fetch.max.bytes`
(its per-partition limit is not applied), so a response can be that large even with one
partition; the bounds below use `fetch.max.bytes` for a response for that reason.
These are buffers only: the process's idle footprint comes on top (measured, not predicted).
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1_000_000


@dataclass(frozen=True)
class Prediction:
    buffer_bytes: int
    formula: str  # the bound in words, with the numbers that went in


def _int(settings: dict[str, str], key: str, default: int) -> int:
    return int(settings.get(key, default))


def librdkafka(settings: dict[str, str], event_bytes: int) -> Prediction:
    kbytes = _int(settings, "queued.max.messages.kbytes", 65536)
    min_messages = _int(settings, "queued.min.messages", 100000)
    message_max = _int(settings, "message.max.bytes", 1000000)
    fetch_max = _int(settings, "fetch.max.bytes", max(min(52428800, kbytes * 1024), message_max))
    queue = min(kbytes * 1000, min_messages * event_bytes)
    return Prediction(
        queue + fetch_max,
        f"queue min({kbytes} kB, {min_messages} x {event_bytes} B) = {queue / MB:.1f} MB "
        f"+ one response (fetch.max.bytes) {fetch_max / MB:.1f} MB",
    )


def per_partition_fetcher(
    settings: dict[str, str], partitions: int, defaults: dict[str, int]
) -> Prediction:
    """aiokafka and kafka-python: one buffered result per partition, one response in flight."""
    per_partition = _int(
        settings, "max_partition_fetch_bytes", defaults["max_partition_fetch_bytes"]
    )
    fetch_max = _int(settings, "fetch_max_bytes", defaults["fetch_max_bytes"])
    buffered = partitions * per_partition
    return Prediction(
        buffered + fetch_max,
        f"{partitions} partitions x {per_partition / MB:.1f} MB buffered "
        f"+ one response (fetch_max_bytes) {fetch_max / MB:.1f} MB",
    )


# Sarama's ChannelBufferSize by default: messages buffered per partition and subscription by the
# 2019 dispatcher (seed 003: "By default, Sarama stores 256 messages for each partition").
SARAMA_BUFFER_MESSAGES = 256


def fanned_out(per_consumer: Prediction, subscriptions: int) -> Prediction:
    """A dispatcher's bound with a consumer (and its pending deliveries) per subscription, as
    the lab's dispatcher has one lane each: the one consumer's bound that many times."""
    if subscriptions == 1:
        return per_consumer
    return Prediction(
        per_consumer.buffer_bytes * subscriptions,
        f"{subscriptions} subscriptions x ({per_consumer.formula})",
    )


def sarama(
    partitions: int, subscriptions: int, buffer_messages: int, event_bytes: int
) -> Prediction:
    """Seed 003's rule for the 2019 dispatcher: partitions x subscriptions x buffer x event."""
    total = partitions * subscriptions * buffer_messages * event_bytes
    return Prediction(
        total,
        f"{partitions} partitions x {subscriptions} subscriptions x {buffer_messages} messages "
        f"x {event_bytes} B",
    )


_KAFKA_PYTHON = {"max_partition_fetch_bytes": 1048576, "fetch_max_bytes": 52428800}
_AIOKAFKA = {"max_partition_fetch_bytes": 1048576, "fetch_max_bytes": 52428800}


def predicted(
    client: str,
    settings: dict[str, str],
    partitions: int,
    event_bytes: int,
    pending_events: int = 0,
) -> Prediction:
    """The buffer bound of `client` (confluent, source, dispatcher, aiokafka, kafka-python).
    `pending_events`: what a source adapter or dispatcher may hold on its way to the subscriber
    on top of its client's buffers (the lab's --max-pending)."""
    if client in ("confluent", "source", "dispatcher"):
        bound = librdkafka(settings, event_bytes)
        if not pending_events:
            return bound
        pending = pending_events * event_bytes
        return Prediction(
            bound.buffer_bytes + pending,
            f"{bound.formula} + {pending_events} pending deliveries x {event_bytes} B "
            f"= {pending / MB:.1f} MB",
        )
    if client == "aiokafka":
        return per_partition_fetcher(settings, partitions, _AIOKAFKA)
    if client == "kafka-python":
        return per_partition_fetcher(settings, partitions, _KAFKA_PYTHON)
    raise ValueError(f"no buffer model for client '{client}'")
