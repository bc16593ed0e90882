"""What shapes a lab system's results: LabSettings, recorded in run.json.

Standard library only (and the record contract), because every SUT process imports it for its
defaults, and a process measured for its memory and CPU must load only what it uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.records import EVENT_TYPE, WARMUP_EVENT_TYPE

# The trigger of the broker SUTs: Knative's exact attribute match, any of these alternatives.
# Warmup events pass so they warm the whole path; decoys (DECOY_EVENT_TYPE) do not.
DEFAULT_TRIGGER = (f"type={EVENT_TYPE}", f"type={WARMUP_EVENT_TYPE}")


@dataclass(frozen=True)
class LabSettings:
    """Everything that changes results; all of it is recorded in run.json."""

    partitions: int = 100
    replication: int = 1
    dispatcher_concurrency: int = 256  # deliveries in flight per dispatcher
    retries: int = 3
    backoff_ms: float = 100.0
    delivery_timeout_s: float = 30.0
    queue_limit: int = 100_000
    max_pending: int = 10_000
    ingress_concurrency: int = 1024  # broker-imc: requests the ingress forwards at once
    commit_interval_s: float = 1.0  # Kafka dispatchers: how often offsets are committed
    # Producer/consumer settings on top of librdkafka's defaults. A 6 s session timeout gets
    # the group assigned in ~3 s on Tansu (the 45 s default takes ~23 s); acks=all as Knative.
    # Tansu does not answer a waiting fetch when records arrive, as Kafka does, but only at
    # fetch.wait.max.ms: at the 500 ms default that added ~200-400 ms to every delivery
    # (measured), an artifact of the local broker, so the wait is capped at 50 ms.
    producer: tuple[str, ...] = ("acks=all", "linger.ms=5")
    consumer: tuple[str, ...] = (
        "fetch.wait.max.ms=50",
        "session.timeout.ms=6000",
        "heartbeat.interval.ms=1000",
        "auto.offset.reset=earliest",
        "enable.auto.commit=false",
    )
    trigger: tuple[str, ...] = DEFAULT_TRIGGER
    # Fan-out: deliveries per event (a channel's subscriptions, a broker's triggers), each to a
    # path of its own at the receiver (subscriber_paths); of a broker's triggers the first
    # `matching` take the run's events and the others filter every one out (None: all take).
    fanout: int = 1
    matching: int | None = None
    kafka_bootstrap: str | None = None  # a real Kafka instead of a fresh Tansu
    ingress: str | None = None  # external: where the sender sends (HTTP)
    topic: str | None = None  # external: produce to this topic on --kafka-bootstrap
    ready_timeout_s: float = 120.0


# The lab's Kafka systems run a consumer group per subscriber (a trigger, a subscription), in
# one dispatcher: measured on a busy 2-core host, 256 were ready in 3.6 s (a 2 s pace took 57 s);
# 1,024 started 5,013 threads in 890 MB and were not ready after 45 s.
KAFKA_SUBSCRIBERS_MAX = 256


def subscriber_paths(fanout: int) -> tuple[str, ...]:
    """The path at the receiver each subscription (or trigger) delivers to: `/` for one, as
    before fan-out, `/subscriber-1` ... `/subscriber-N` for N; the received records name it
    (`subscriber`), so every delivery is counted for its own subscriber."""
    if fanout == 1:
        return ("/",)
    return tuple(f"/subscriber-{i}" for i in range(1, fanout + 1))


def subscriber_urls(receiver_url: str, fanout: int) -> tuple[str, ...]:
    """`subscriber_paths` at a receiver's base URL."""
    base = receiver_url.rstrip("/")
    return tuple(base + path for path in subscriber_paths(fanout))


def matching_count(fanout: int, matching: int | None) -> int:
    """How many of the subscribers take the run's events (the first ones)."""
    return fanout if matching is None else matching


# A trigger that takes none of the run's events (`matching` below `fanout`): no event evbench
# sends has this type, so its filter drops every one, counted as `filtered`.
NO_MATCH_TRIGGER = ("type=dev.evbench.matches-nothing",)


def trigger_paths(fanout: int) -> tuple[str, ...]:
    """Where the broker's channel delivers each trigger's copy at the one filter process (as
    Knative's, one filter serves every trigger, by path): `/` for one trigger, as before."""
    if fanout == 1:
        return ("/",)
    return tuple(f"/triggers/{i}" for i in range(1, fanout + 1))
