"""A lab process's `GET /metrics`: the Prometheus text format, as Knative's data plane serves it.

Every figure is read at scrape time from what the process counts anyway (`Component.stats`, the
Kafka dispatcher's per-partition counts, queue sizes), by collectors on a registry of the
component's own: the hot path creates and locks no metric objects, and two components in one
process (a test) never share a family. prometheus_client writes and negotiates the format.

- `evbench_lab_<counter>_total{hop}`: each of `stats`, as counters; a Deliverer's three are named
  `evbench_lab_deliveries_total`, `..._delivery_retries_total`, `..._delivery_failures_total`;
- `evbench_lab_<gauge>{hop}`: what a component reports as a level (`Component.gauges`);
- `eventing_kafka_consumed_msg_count{consumer,partition,topic}`: the Kafka dispatcher's records
  taken per partition, a gauge named and typed as eventing-kafka's dispatcher exposes it, so a
  dashboard written for Knative reads the lab's;
- `python_gc_collections_total{generation}` (prometheus_client's collector), and
  `python_gc_duration_seconds_total{generation}`: time spent collecting, from gc.callbacks,
  since the interpreter reports collections but not how long they stopped every thread;
- `process_*` and `python_info`, as every prometheus_client process has them.

`hop` is the component's kind (`python -m suts <kind>`): the same process plays the same part
in whichever system it is started.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from contract.insight import CONSUMED_METRIC
from runtime.gcpauses import GcClock

PREFIX = "evbench_lab_"
GC_SECONDS_METRIC = "python_gc_duration_seconds"  # exposed with _total: a counter
# A Deliverer's counters (suts.serving) by their /stats names, with the names /metrics gives.
DELIVERY_COUNTERS = {
    "delivered": ("deliveries", "events delivered to a subscriber (2xx)"),
    "retries": ("delivery_retries", "delivery attempts after the first"),
    "delivery_failed": ("delivery_failures", "events given up on after the retries"),
}
# What the components' gauges (Component.gauges) mean, for HELP.
GAUGE_HELP = {
    "queue_depth_events": "events queued and not yet taken for delivery",
    "queue_limit_events": "queue depth at which the ingress answers 503",
    "in_flight_events": "events taken (from the queue, from Kafka) and not yet delivered",
    "assigned_partitions": "partitions assigned to this consumer",
}
_NOT_IN_A_NAME = re.compile(r"[^a-zA-Z0-9_]")


def counter_name(stat: str) -> str:
    """The family name of a `stats` counter (prometheus_client adds `_total`)."""
    known = DELIVERY_COUNTERS.get(stat)
    return PREFIX + (known[0] if known else _NOT_IN_A_NAME.sub("_", stat).removesuffix("_total"))


def counter_families(hop: str, counts: Mapping[str, int]) -> list[Metric]:
    # Copied in one C call: a consumer thread may add a key while the scrape reads.
    snapshot = dict(counts)
    families: list[Metric] = []
    for stat, value in sorted(snapshot.items()):
        known = DELIVERY_COUNTERS.get(stat)
        what = known[1] if known else f"the component's '{stat}' counter, as /stats reports it"
        family = CounterMetricFamily(counter_name(stat), what, labels=["hop"])
        family.add_metric([hop], value)
        families.append(family)
    return families


def gauge_families(hop: str, levels: Mapping[str, float]) -> list[Metric]:
    families: list[Metric] = []
    for name, value in sorted(levels.items()):
        what = GAUGE_HELP.get(name, f"the component's {name}")
        family = GaugeMetricFamily(PREFIX + name, what, labels=["hop"])
        family.add_metric([hop], value)
        families.append(family)
    return families


def librdkafka_consumer_name(config: Mapping[str, str]) -> str:
    """The consumer's name as librdkafka gives it (`<client.id>#consumer-<n>`, n counting the
    handles a process opened, from 1): the `consumer` label Knative's dispatcher reports. The
    Python client does not expose it; a dispatcher process opens exactly one handle."""
    return f"{config.get('client.id', 'rdkafka')}#consumer-1"


def consumed_family(
    topic: str, consumers: Sequence[tuple[str, Mapping[int, int], Iterable[int]]]
) -> Metric:
    """Records taken per partition by each consumer (its name, its counts, its assigned
    partitions); an assigned partition that gave none reads 0, as in Knative's, and one taken
    from before a rebalance keeps its count."""
    family = GaugeMetricFamily(
        CONSUMED_METRIC, "Consumed Message Count", labels=["consumer", "partition", "topic"]
    )
    for consumer, consumed, assigned in consumers:
        counts = dict.fromkeys(assigned, 0) | dict(consumed)
        for partition, value in sorted(counts.items()):
            family.add_metric([consumer, str(partition), topic], value)
    return family


def gc_family(clock: GcClock) -> Metric:
    """The clock's seconds per generation as Prometheus' counter family."""
    family = CounterMetricFamily(
        GC_SECONDS_METRIC,
        "Time spent in garbage collection, by generation (since the process began serving)",
        labels=["generation"],
    )
    for generation, seconds in enumerate(clock.seconds):
        family.add_metric([str(generation)], seconds)
    return family


GC_CLOCK = GcClock()  # the process's; suts.serving.serve installs it


class AtScrape(Collector):
    """Families built by `read` when scraped, from counters kept elsewhere."""

    def __init__(self, read: Callable[[], Iterable[Metric]]) -> None:
        self.read = read

    def collect(self) -> Iterable[Metric]:
        return self.read()


def component_registry(
    read: Callable[[], Iterable[Metric]], gc_clock: GcClock = GC_CLOCK
) -> CollectorRegistry:
    """A component's own registry: its families, the GC's and the process's."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AtScrape(read))
    registry.register(AtScrape(lambda: [gc_family(gc_clock)]))
    GCCollector(registry=registry)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def exposition(registry: CollectorRegistry, accept: str) -> tuple[bytes, str]:
    """The body and its content type, in the format the scraper asked for (the Prometheus
    text format unless it asked for OpenMetrics)."""
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type
