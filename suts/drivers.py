"""One driver per system under test: which components it starts and how they connect.

Adding a system is one class here and one line in suts/lab.py's registry; the CLI's choices and
help, run.json's topology and the default matrix follow from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from contract.errors import EvbenchError
from suts.driver import LabSettings, Sut
from suts.settings import KAFKA_SUBSCRIBERS_MAX, subscriber_urls, trigger_paths


class Direct(Sut):
    name = "direct"
    summary = "sender -> receiver (the instruments' own floor)"
    topology = "sender -> receiver"
    settings_shape_results = False
    instruments_only = True
    lab_processes = False

    def _start(self, subscriber: str) -> str:
        return subscriber


class ChannelImc(Sut):
    name = "channel-imc"
    summary = "HTTP ingress -> in-memory queue -> dispatcher -> receiver"
    topology = "sender -> imc-channel (queue, dispatcher) -> receiver"
    roles: ClassVar[tuple[str, ...]] = ("channel",)
    aliases: ClassVar[dict[str, str]] = {
        "dispatcher": "channel"
    }  # the queue and its dispatcher are one process

    fanout = "subscriptions"

    def _start(self, subscriber: str) -> str:
        urls = subscriber_urls(subscriber, self.settings.fanout)
        return self._component("channel", "imc-channel", subscribers=urls)


class BrokerImc(ChannelImc):
    name = "broker-imc"
    summary = "broker ingress -> in-memory channel -> trigger filter -> receiver"
    topology = "sender -> broker-ingress -> imc-channel -> trigger-filter -> receiver"
    roles: ClassVar[tuple[str, ...]] = ("filter", "channel", "ingress")
    fanout = "triggers"

    def _start(self, subscriber: str) -> str:
        count = self.settings.fanout
        urls = subscriber_urls(subscriber, count)
        filters = self._component("filter", "trigger-filter", subscribers=urls)
        # The channel's subscriptions: one per trigger, each at its path of the filter.
        triggers = tuple(filters.rstrip("/") + path for path in trigger_paths(count))
        channel = self._component("channel", "imc-channel", subscribers=triggers)
        return self._component("ingress", "broker-ingress", channel=channel)


class _KafkaSut(Sut):
    """A topic of its own, a consumer-group dispatcher to the receiver, and a way in."""

    kafka = True
    roles: ClassVar[tuple[str, ...]] = ("dispatcher", "ingress")
    dispatch_mode = "channel"  # or "source": the dispatcher adapts records to CloudEvents
    filters = False  # the dispatcher applies the trigger (a Kafka broker)
    most_subscribers = KAFKA_SUBSCRIBERS_MAX

    def _start(self, subscriber: str) -> str:
        s = self.settings
        self._kafka_topic()
        joined = (f"group.id={self.group}", f"bootstrap.servers={self.bootstrap}")
        self._component(
            "dispatcher",
            "kafka-dispatcher",
            topic=self.topic,
            subscribers=subscriber_urls(subscriber, s.fanout),
            mode=self.dispatch_mode,
            lab=replace(
                s, consumer=(*s.consumer, *joined), trigger=s.trigger if self.filters else ()
            ),
        )
        return self._ingress()

    def _ingress(self) -> str:
        s = self.settings
        producer = (*s.producer, f"bootstrap.servers={self.bootstrap}")
        return self._component(
            "ingress", "kafka-ingress", topic=self.topic, lab=replace(s, producer=producer)
        )


class ChannelKafka(_KafkaSut):
    name = "channel-kafka"
    summary = "HTTP ingress -> Kafka topic -> consumer-group dispatcher -> receiver"
    topology = "sender -> kafka-ingress -> topic -> kafka-dispatcher -> receiver"
    fanout = "subscriptions"  # a consumer group each


class BrokerKafka(_KafkaSut):
    name = "broker-kafka"
    summary = "as channel-kafka, with the trigger filter in the dispatcher"
    topology = "sender -> kafka-ingress -> topic -> kafka-dispatcher (trigger filter) -> receiver"
    filters = True
    fanout = "triggers"  # a consumer group each


class SourceKafka(_KafkaSut):
    name = "source-kafka"
    summary = "sender produces Kafka records -> source adapter -> receiver"
    topology = "sender (Kafka producer) -> topic -> kafka-dispatcher (source adapter) -> receiver"
    dispatch_mode = "source"
    roles: ClassVar[tuple[str, ...]] = ("dispatcher",)
    aliases: ClassVar[dict[str, str]] = {
        "adapter": "dispatcher"
    }  # the dispatcher adapts records to CloudEvents

    def _ingress(self) -> str:
        return f"kafka://{self.bootstrap}/{self.topic}"  # the sender produces to the topic


class External(Sut):
    name = "external"
    summary = (
        "your system: --ingress URL (or --kafka-bootstrap and --topic); subscribe it\n"
        "to the receiver, which listens on --receiver-host/--receiver-port"
    )
    topology = "sender -> your system -> receiver"
    local = False
    lab_processes = False
    fanout = "subscriptions"

    def start_message(self, receiver_url: str) -> str | None:
        urls = subscriber_urls(receiver_url, self.settings.fanout)
        if len(urls) == 1:
            return f"receiver listening at {receiver_url} : point your subscription there"
        listed = "\n".join(f"  {url}" for url in urls)
        return (
            f"receiver listening at {receiver_url} : point each of your {len(urls)} "
            f"subscriptions (or triggers) at one of these, every one at its own:\n{listed}"
        )

    def _start(self, subscriber: str) -> str:
        s = self.settings
        if s.ingress:
            return s.ingress
        if s.kafka_bootstrap and s.topic:
            self.bootstrap, self.topic = s.kafka_bootstrap, s.topic
            return f"kafka://{s.kafka_bootstrap}/{s.topic}"
        raise EvbenchError(
            "--sut external needs --ingress URL, or --kafka-bootstrap HOST:PORT with --topic"
        )


class KnownCapacity(Sut):
    """A hop that forwards at most `rate_per_s` events/s with a bounded queue (suts/capacity.py):
    what the capacity search is calibrated against (tests/e2e/test_search.py,
    benchmarks/search_known.py). Not in the lab's registry: it models no real system."""

    name = "capacity"
    summary = "a hop of known capacity (bounded queue, paced forwarding)"
    topology = "sender -> capacity hop -> receiver"
    local = False
    rate_per_s: float = 0.0
    queue_limit: int = 300

    def _start(self, subscriber: str) -> str:
        return self._component(
            "hop",
            "capacity",
            subscribers=(subscriber,),
            rate_per_s=self.rate_per_s,
            lab=replace(self.settings, queue_limit=self.queue_limit),
        )


def known_capacity(rate_per_s: float, queue_limit: int = 300) -> Callable[..., Sut]:
    """`evbench.search.search`'s `make` for a KnownCapacity hop."""

    def make(name: str, settings: LabSettings, logs: Path, run_id: str, host: str = "127.0.0.1"):
        system = KnownCapacity(settings, logs, run_id, host)
        system.rate_per_s, system.queue_limit = rate_per_s, queue_limit
        return system

    return make
