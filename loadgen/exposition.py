"""A sender's figures (contract.metricslines.SenderMetrics) as Prometheus metrics, made by the
Prometheus client library: one sender's (its /metrics) and a fleet master's (its workers'
figures summed) are named and typed here once.

A custom collector reads the figures when Prometheus asks, so nothing is counted twice: the
counts are the ones the pacer keeps for its summaries anyway, the histograms the ones the
record writer adds a flushed batch at a time (loadgen.histogram).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from contract.metricslines import HistogramDoc, SenderMetrics
from loadgen.histogram import cumulative

PREFIX = "evbench_sender_"

# (figure, metric name without _total, help): counts since the sender started.
_COUNTERS = (
    ("sent", "events_sent", "requests started: the slots sent"),
    ("ok", "events_acked", "events answered 2xx (HTTP) or acked (Kafka)"),
    (
        "failures",
        "events_failed",
        "events without a 2xx or an ack: errors, timeouts, no answer, and the in-flight "
        "cap's refusals (as in the done line's failures)",
    ),
    (
        "inflight_cap_refused",
        "inflight_cap_refused",
        "slots refused by the in-flight cap (--max-inflight), never sent",
    ),
    ("timed_out", "requests_timed_out", "requests unanswered within --request-timeout"),
    ("rows_written", "records_written", "sent records written to Parquet"),
)
# (figure, metric name, help): levels now.
_GAUGES = (
    ("inflight", "events_in_flight", "requests sent and not yet answered"),
    ("step", "step", "the pace step under way, or the last one (0 before the first)"),
    (
        "target_rate_per_s",
        "target_rate_events_per_second",
        "the pace's rate now (the whole fleet's for a fleet): 0 before, between and after steps",
    ),
)
_HISTOGRAMS = (
    (
        "lag",
        "lag_seconds",
        "sender lag, sent - intended (the pacer's own health), as of the last record flush",
    ),
    (
        "publish_latency",
        "publish_latency_seconds",
        "publish latency of acked events, ack - sent, as of the last record flush",
    ),
)


def families(figures: SenderMetrics) -> list[Metric]:
    """The figures as metric families, all prefixed `evbench_sender_`."""
    by_key = cast(Mapping[str, Any], figures)  # the tables above name its keys
    metrics: list[Metric] = []
    for key, name, text in _COUNTERS:
        metrics.append(CounterMetricFamily(PREFIX + name, text, value=by_key[key]))
    for key, name, text in _GAUGES:
        metrics.append(GaugeMetricFamily(PREFIX + name, text, value=by_key[key]))
    for key, name, text in _HISTOGRAMS:
        metrics.append(_histogram(PREFIX + name, text, by_key[key]))
    return metrics


def _histogram(name: str, text: str, doc: HistogramDoc) -> HistogramMetricFamily:
    running = cumulative(doc["counts"])
    buckets = [
        (floatToGoString(bound), float(count))
        for bound, count in zip(doc["bounds_s"], running, strict=False)
    ]
    buckets.append(("+Inf", float(running[-1])))
    return HistogramMetricFamily(name, text, buckets=buckets, sum_value=doc["sum_s"])


class _Figures(Collector):
    def __init__(self, figures: Callable[[], SenderMetrics | None]) -> None:
        self.figures = figures

    def collect(self) -> Iterable[Metric]:
        figures = self.figures()
        return [] if figures is None else families(figures)


def registry(figures: Callable[[], SenderMetrics | None]) -> CollectorRegistry:
    """A registry of its own (not the library's global one, which would add this process's
    Python and GC metrics) serving what `figures()` says when scraped (nothing while None)."""
    own = CollectorRegistry(auto_describe=False)
    own.register(_Figures(figures))
    return own


def exposition(own: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The registry's metrics in the format the scraper accepts (Prometheus' text format, or
    OpenMetrics when asked for), and its content type."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(own), content_type
