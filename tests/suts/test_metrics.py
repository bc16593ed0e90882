"""A lab process's /metrics: names, labels and values as a Prometheus scraper parses them.

Pure: families built from given counts, read back with the client library's own parser. The
endpoints of real processes under load are checked in tests/e2e/test_lab.py."""

from __future__ import annotations

import gc
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from suts.__main__ import component_from
from suts.flags import COMPONENTS, ComponentSettings
from suts.metrics import (
    GcClock,
    consumed_family,
    counter_families,
    counter_name,
    exposition,
    gauge_families,
    gc_family,
    librdkafka_consumer_name,
)
from suts.serving import Component

SampleKey = tuple[str, tuple[tuple[str, str], ...]]


def _read(families: list[Metric]) -> tuple[dict[str, str], dict[SampleKey, float]]:
    """(family name -> type, (sample name, sorted labels) -> value) as a scraper reads them."""

    class Fixed(Collector):
        def collect(self) -> list[Metric]:
            return families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    return parse(exposition(registry, "")[0].decode())


def parse(text: str) -> tuple[dict[str, str], dict[SampleKey, float]]:
    types, values = {}, {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return types, values


@pytest.mark.parametrize(
    ("stat", "name"),
    [
        ("delivered", "evbench_lab_deliveries"),
        ("retries", "evbench_lab_delivery_retries"),
        ("delivery_failed", "evbench_lab_delivery_failures"),
        ("queue_full", "evbench_lab_queue_full"),
        ("accepted", "evbench_lab_accepted"),
        ("odd-key.x", "evbench_lab_odd_key_x"),
        ("seen_total", "evbench_lab_seen"),  # the client adds _total once
    ],
)
def test_counter_names(stat, name):
    assert counter_name(stat) == name


def test_counters_and_gauges_carry_the_hop():
    counts = Counter(delivered=5, retries=2, delivery_failed=1, accepted=6)
    types, values = _read(
        [
            *counter_families("imc-channel", counts),
            *gauge_families("imc-channel", {"queue_depth_events": 3}),
        ]
    )
    hop = (("hop", "imc-channel"),)
    assert values == {
        ("evbench_lab_accepted_total", hop): 6,
        ("evbench_lab_deliveries_total", hop): 5,
        ("evbench_lab_delivery_failures_total", hop): 1,
        ("evbench_lab_delivery_retries_total", hop): 2,
        ("evbench_lab_queue_depth_events", hop): 3,
    }
    assert types["evbench_lab_deliveries"] == "counter"
    assert types["evbench_lab_queue_depth_events"] == "gauge"


@pytest.mark.parametrize(
    ("consumed", "assigned", "expected"),
    [
        ({}, [], {}),
        ({}, [0, 1], {"0": 0, "1": 0}),  # assigned, nothing taken yet: 0, as Knative shows
        ({1: 4}, [0, 1], {"0": 0, "1": 4}),
        ({2: 7}, [0], {"0": 0, "2": 7}),  # revoked since: its count stays
    ],
)
def test_consumed_per_partition_as_eventing_kafka_names_it(consumed, assigned, expected):
    types, values = _read([consumed_family("t", [("rdkafka#consumer-1", consumed, assigned)])])
    if expected:
        assert types == {"eventing_kafka_consumed_msg_count": "gauge"}
    read = {}
    for (name, labels), value in values.items():
        assert name == "eventing_kafka_consumed_msg_count"
        label = dict(labels)
        assert (label["consumer"], label["topic"]) == ("rdkafka#consumer-1", "t")
        read[label["partition"]] = value
    assert read == expected


@pytest.mark.parametrize(
    ("config", "name"),
    [
        ({}, "rdkafka#consumer-1"),
        ({"group.id": "g"}, "rdkafka#consumer-1"),
        ({"client.id": "evbench"}, "evbench#consumer-1"),
    ],
)
def test_consumer_label_is_librdkafkas_handle_name(config, name):
    assert librdkafka_consumer_name(config) == name


@pytest.mark.parametrize(
    ("calls", "seconds"),
    [
        ([("start", 0, 1.0), ("stop", 0, 1.5)], [0.5, 0.0, 0.0]),
        ([("start", 2, 1.0), ("stop", 2, 3.0), ("start", 0, 4.0), ("stop", 0, 4.25)], [0.25, 0, 2]),
        ([("stop", 1, 2.0)], [0.0, 0.0, 0.0]),  # installed mid-collection: nothing to count
        ([("start", 1, 1.0), ("stop", 1, 2.0), ("stop", 1, 9.0)], [0.0, 1.0, 0.0]),
    ],
)
def test_gc_clock_sums_each_generations_collections(calls, seconds):
    instants = iter(at for _, _, at in calls)
    clock = GcClock(now=lambda: next(instants))
    for phase, generation, _ in calls:
        clock(phase, {"generation": generation})
    assert clock.seconds == seconds
    _, values = _read([gc_family(clock)])
    assert {dict(k[1])["generation"]: v for k, v in values.items()} == {
        str(g): s for g, s in enumerate(seconds)
    }


def test_gc_clock_times_real_collections_once_however_often_installed():
    clock = GcClock()
    clock.install()
    clock.install()
    try:
        assert gc.callbacks.count(clock) == 1
        gc.collect()
        assert clock.seconds[2] > 0
    finally:
        clock.uninstall()
    assert clock not in gc.callbacks


_GIVEN = {
    "imc-channel": dict(subscribers=("http://a/",)),
    "broker-ingress": dict(channel="http://c/"),
    "trigger-filter": dict(subscribers=("http://a/",)),
    "kafka-ingress": dict(topic="t"),
    "kafka-dispatcher": dict(topic="t", subscribers=("http://a/",)),
    "capacity": dict(subscribers=("http://a/",), rate_per_s=10.0),
}


@pytest.mark.parametrize("kind", COMPONENTS)
def test_every_component_reports_under_its_kind(kind):
    component: Component = component_from(ComponentSettings(kind, **_GIVEN[kind]))
    component.app()  # where /metrics is routed and its registry made
    types, values = parse(exposition(component.registry, "")[0].decode())
    hops = {dict(labels).get("hop") for _, labels in values} - {None}
    assert component.kind == kind and hops <= {kind}
    assert {"python_gc_collections", "python_gc_duration_seconds"} <= set(types)
    if kind not in ("kafka-ingress", "capacity"):  # the Deliverer's, 0 before any delivery
        for name in ("deliveries", "delivery_retries", "delivery_failures"):
            assert values[(f"evbench_lab_{name}_total", (("hop", kind),))] == 0
