"""The receiver's counters as Prometheus metrics: its GET /metrics, on the control plane
beside /stats, made by the Prometheus client library.

A custom collector reads the counters the receiver keeps anyway (receivers.state.Counters)
when Prometheus asks, so the hot path pays nothing per event for them. Not here, because a
receiver cannot know them: latency (an event carries no send time; the analysis joins the sent
and received records for it), and duplicates and foreign events (telling them apart takes every
id sent or seen, which the analysis has and a receiver running for hours must not hold).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from contract.units import NS_PER_S
from receivers.state import ServerState

PREFIX = "evbench_receiver_"

# (Counters attribute, metric name without _total, help)
_COUNTERS = (
    ("received", "events_received", "events accepted (202) and recorded, duplicates included"),
    ("received_bytes", "received_bytes", "bytes of the events accepted (their bodies)"),
    (
        "malformed",
        "requests_malformed",
        "requests answered 400: not HTTP, not a CloudEvent, or an id that cannot be recorded",
    ),
    ("invalid_ids", "invalid_ids", "of the malformed: an id or attribute not recordable"),
    ("timed_out", "requests_timed_out", "requests stalled past their header or body timeout (408)"),
    (
        "refused_connections",
        "connections_refused",
        "connections over the connection cap, answered 503 and closed",
    ),
    ("connections", "connections_accepted", "connections accepted"),
    ("idle_closed", "connections_idle_closed", "keep-alive connections closed when idle too long"),
    ("not_found", "requests_not_found", "requests for a path the receiver does not serve (404)"),
    ("internal_errors", "internal_errors", "requests answered 500: a bug in the receiver"),
    ("rows_written", "rows_written", "received records written to Parquet"),
    ("parts_written", "parts_written", "Parquet part files written"),
    ("quarantined", "rows_quarantined", "records that could not be encoded (the quarantine file)"),
    ("write_errors", "write_errors", "record flushes that failed (rows kept, tried again)"),
)


class _Counters(Collector):
    def __init__(self, state: ServerState[Any], pending_rows: Callable[[], int]) -> None:
        self.state = state
        self.pending_rows = pending_rows

    def collect(self) -> Iterable[Metric]:
        state, stats = self.state, self.state.stats
        metrics: list[Metric] = [
            CounterMetricFamily(PREFIX + name, text, value=getattr(stats, attribute))
            for attribute, name, text in _COUNTERS
        ]
        metrics.append(
            CounterMetricFamily(
                PREFIX + "gc_pauses",
                "garbage collections since start-up, each holding the loop",
                value=stats.gc.collections,
            )
        )
        refused = CounterMetricFamily(
            PREFIX + "requests_refused",
            "requests refused beyond the receiver's limits, by status: 413 body, 414 URL, 431 "
            "headers, 503 event bytes in flight, 417 Expect, 501 upgrade",
            labels=["status"],
        )
        for status, count in sorted(stats.refused.items()):
            refused.add_metric([status], count)
        metrics.append(refused)
        pending = self.pending_rows()
        levels = (
            ("open_connections", "connections open now", stats.open_connections),
            ("buffered_bytes", "event bytes being received now", state.buffered_bytes),
            ("rows_pending", "records in memory, not yet handed to the writer", pending),
            (
                "gc_pause_max_seconds",
                "the longest garbage collection since start-up: nothing read or stamped meanwhile",
                stats.gc.longest_s,
            ),
        )
        metrics += [GaugeMetricFamily(PREFIX + name, text, value=v) for name, text, v in levels]
        if stats.last_received_ns is not None:
            metrics.append(
                GaugeMetricFamily(
                    PREFIX + "last_received_timestamp_seconds",
                    "when the last event arrived, on the receiver's (shifted) clock",
                    value=stats.last_received_ns / NS_PER_S,
                )
            )
        return metrics


class ReceiverMetrics:
    """One receiver's /metrics: a registry of its own (not the library's global one, which
    would add this process's Python and GC metrics) with the counters' collector."""

    def __init__(self, state: ServerState[Any], pending_rows: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Counters(state, pending_rows))

    def exposition(self) -> tuple[bytes, bytes]:
        """The metrics in Prometheus' text format, and its content type: every Prometheus reads
        it, so the Accept header is not consulted (a connection keeps only what events need)."""
        return generate_latest(self.registry), CONTENT_TYPE_PLAIN_0_0_4.encode()
