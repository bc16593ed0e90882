"""A fleet's live figures, from its workers' `metrics` lines (contract.metricslines). Pure.

The master asks each worker's sender for a `metrics` line every second (`--metrics-lines`)
and serves the sums on its /metrics (`--sender-metrics-port`), named as one sender's are
(loadgen.exposition):

- counts add up, each worker's as of its latest line; a worker that failed keeps what it
  counted (a Prometheus counter never falls), and its events in flight no longer count;
- histograms add up bucket by bucket (every worker has the same bounds, loadgen.histogram);
- the step is the newest any worker is in, the target rate the pace's in that step (every
  worker reports the whole pace's rate, not its share).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from contract.metricslines import SenderMetrics
from loadgen.histogram import BOUNDS_S, merged

_SUMMED = ("sent", "ok", "failures", "inflight_cap_refused", "timed_out", "rows_written")


def fleet_figures(
    latest: Mapping[int, SenderMetrics], failed: Collection[int] = ()
) -> SenderMetrics | None:
    """The fleet's figures from each worker's latest; None before any worker reported."""
    if not latest:
        return None
    docs = [latest[index] for index in sorted(latest)]
    step = max(doc["step"] for doc in docs)
    return {
        "event": "metrics",
        "sent": sum(doc["sent"] for doc in docs),
        "ok": sum(doc["ok"] for doc in docs),
        "failures": sum(doc["failures"] for doc in docs),
        "inflight_cap_refused": sum(doc["inflight_cap_refused"] for doc in docs),
        "timed_out": sum(doc["timed_out"] for doc in docs),
        "rows_written": sum(doc["rows_written"] for doc in docs),
        "inflight": sum(doc["inflight"] for i, doc in latest.items() if i not in failed),
        "step": step,
        "target_rate_per_s": max(d["target_rate_per_s"] for d in docs if d["step"] == step),
        "lag": merged([doc["lag"] for doc in docs]),
        "publish_latency": merged([doc["publish_latency"] for doc in docs]),
    }


@dataclass
class FleetFigures:
    """The master's record of its workers' latest figures."""

    latest: dict[int, SenderMetrics] = field(default_factory=dict)
    failed: Collection[int] = field(default_factory=set)  # their in-flight counts no more
    refused: set[int] = field(default_factory=set)  # workers whose histograms do not add up

    def update(self, index: int, line: SenderMetrics) -> str | None:
        """Keep a worker's latest line; a warning (once a worker) when it cannot be added up."""
        bounds = list(BOUNDS_S)
        if line["lag"]["bounds_s"] == bounds == line["publish_latency"]["bounds_s"]:
            self.latest[index] = line
            return None
        if index in self.refused:
            return None
        self.refused.add(index)
        return (
            f"worker {index}: its histograms' buckets are not the master's (another evbench "
            "version?); its figures are left out of the fleet's /metrics"
        )

    def now(self) -> SenderMetrics | None:
        return fleet_figures(self.latest, self.failed)
