"""Latency histograms in Prometheus' shape: fixed upper bounds, a count per bucket, a sum.

The sender observes a flushed batch of records at once (numpy, on the record writer's thread),
never one event at a time on the pacer's path: at 15,000 events/s a per-event call would cost
more than the rest of the bookkeeping. The bucket rule is Prometheus' `le`: a value equal to a
bound counts in that bound's bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import numpy as np

from contract.metricslines import HistogramDoc
from contract.units import NS_PER_S

# 0.1 ms .. 10 s, 1-2.5-5 a decade: a healthy sender's lag sits in the lowest buckets,
# publish latency anywhere up to the request timeout.
BOUNDS_S: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005,
    0.001, 0.0025, 0.005,
    0.01, 0.025, 0.05,
    0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
BOUNDS_NS: tuple[int, ...] = tuple(round(bound * NS_PER_S) for bound in BOUNDS_S)
_BOUNDS_NS = np.array(BOUNDS_NS, dtype=np.int64)


def bucket_counts(values_ns: np.ndarray) -> list[int]:
    """How many of `values_ns` fall in each bucket (not cumulative; the last: above 10 s)."""
    index = np.searchsorted(_BOUNDS_NS, values_ns, side="left")
    counts: list[int] = np.bincount(index, minlength=len(BOUNDS_NS) + 1).tolist()
    return counts


def cumulative(counts: Sequence[int]) -> list[int]:
    """Prometheus' buckets: each one counts everything at or below its bound."""
    return list(accumulate(counts))


class Histogram:
    """Counts by bucket and their sum in ns, added to a batch at a time by one thread and read
    by another: each update replaces `state` whole, so a reader never sees half of one."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: tuple[tuple[int, ...], int] = ((0,) * (len(BOUNDS_NS) + 1), 0)

    def add(self, values_ns: np.ndarray) -> None:
        if not len(values_ns):
            return
        # A wall-clock step backwards can make a difference negative: it counts as 0, so the
        # sum only grows (Prometheus' rate() of a histogram's _sum reads a fall as a reset).
        values_ns = np.maximum(values_ns, 0)
        counts, sum_ns = self.state
        added = bucket_counts(values_ns)
        self.state = (
            tuple(a + b for a, b in zip(counts, added, strict=True)),
            sum_ns + int(values_ns.sum()),
        )

    def doc(self) -> HistogramDoc:
        counts, sum_ns = self.state
        return {"bounds_s": list(BOUNDS_S), "counts": list(counts), "sum_s": sum_ns / NS_PER_S}


def empty_doc() -> HistogramDoc:
    return Histogram().doc()


def merged(docs: Sequence[HistogramDoc]) -> HistogramDoc:
    """Several senders' histograms as one; they must share their bounds (ValueError if not)."""
    if not docs:
        return empty_doc()
    bounds = docs[0]["bounds_s"]
    if any(doc["bounds_s"] != bounds for doc in docs):
        raise ValueError("histograms with different bucket bounds cannot be added up")
    return {
        "bounds_s": list(bounds),
        "counts": [sum(column) for column in zip(*(doc["counts"] for doc in docs), strict=True)],
        "sum_s": sum(doc["sum_s"] for doc in docs),
    }
