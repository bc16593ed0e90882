"""A log-linear histogram of nanosecond durations: fixed memory, a stated resolution. Pure.

A step of the sender's may last an hour at 20,000 slots a second; keeping a value per slot to
sort at its end cost ~16 bytes per event and grew without bound. This keeps counts instead, in
HdrHistogram's layout: every value below 256 ns has a bucket of its own (exact), and each
power of two above is split into 128 buckets of equal width, so a bucket is never wider than
1/128 of its lower bound. A quantile is read as its bucket's midpoint, hence within
RELATIVE_ERROR (1/256, 0.39 %) of the exact nearest-rank value (`runtime.formulas.percentile`),
and never outside the exact minimum and maximum, which are kept beside the counts. Values at
or above 2**40 ns (18 minutes) share the last bucket; below 0 (a wall-clock step backwards),
the first.

Memory: BUCKETS int64 counts (34 KiB), whatever the number of values.
"""

from __future__ import annotations

import math

import numpy as np

SUB_BUCKET_BITS = 7  # 128 buckets per power of two
_SUB = 1 << SUB_BUCKET_BITS
_EXACT_BELOW = 2 * _SUB  # values below 256 ns count exactly
TOP_BITS = 40  # values from 2**40 ns (~18 min) on share the last bucket
TOP_VALUE = (1 << TOP_BITS) - 1
BUCKETS = _SUB * (TOP_BITS - SUB_BUCKET_BITS - 1) + _EXACT_BELOW
RELATIVE_ERROR = 1 / _EXACT_BELOW  # half a bucket's width over its lower bound, at most


def bucket_of(value_ns: int) -> int:
    """The bucket of one value (the scalar form of `buckets_of`)."""
    value = min(max(value_ns, 0), TOP_VALUE)
    shift = max(value.bit_length() - SUB_BUCKET_BITS - 1, 0)
    return (shift << SUB_BUCKET_BITS) + (value >> shift)


def buckets_of(values_ns: np.ndarray) -> np.ndarray:
    """The bucket of each value, a whole array at a time (the fold's hot loop)."""
    values = np.clip(values_ns, 0, TOP_VALUE).astype(np.int64, copy=False)
    # frexp's exponent is the bit length, exactly: every value is below 2**53.
    _, bits = np.frexp(values.astype(np.float64))
    shift = np.maximum(bits.astype(np.int64) - SUB_BUCKET_BITS - 1, 0)
    index: np.ndarray = (shift << SUB_BUCKET_BITS) + (values >> shift)
    return index


def bucket_bounds(index: int) -> tuple[int, int]:
    """The lowest value of a bucket and its width (1 below 256 ns)."""
    shift = max(index // _SUB - 1, 0)
    top = index - (shift << SUB_BUCKET_BITS)
    return top << shift, 1 << shift


def bucket_value(index: int) -> int:
    """What a bucket stands for: its midpoint (its only value below 256 ns)."""
    lower, width = bucket_bounds(index)
    return lower + (width - 1) // 2


class LogHistogram:
    """Counts of durations in BUCKETS log-linear buckets, with the exact count, min and max."""

    __slots__ = ("count", "counts", "max_ns", "min_ns")

    def __init__(self) -> None:
        self.counts = np.zeros(BUCKETS, dtype=np.int64)
        self.count = 0
        self.min_ns: int | None = None
        self.max_ns: int | None = None

    def add(self, values_ns: np.ndarray) -> None:
        """Count a batch of values (an int64 array)."""
        if not len(values_ns):
            return
        self.add_counts(np.bincount(buckets_of(values_ns), minlength=BUCKETS))
        self._extremes(int(values_ns.min()), int(values_ns.max()), len(values_ns))

    def add_one(self, value_ns: int) -> None:
        """Count one value (for rare events: a connect; batches go through `add`)."""
        self.counts[bucket_of(value_ns)] += 1
        self._extremes(value_ns, value_ns, 1)

    def add_counts(self, counts: np.ndarray) -> None:
        """Bucket counts made elsewhere (`np.bincount(buckets_of(...))`): the count, minimum
        and maximum are left to the caller (`merge` or `add`)."""
        self.counts += counts

    def merge(self, other: LogHistogram) -> None:
        """Add another histogram's values to this one."""
        if other.count:
            self.add_counts(other.counts)
            assert other.min_ns is not None and other.max_ns is not None
            self._extremes(other.min_ns, other.max_ns, other.count)

    def _extremes(self, low_ns: int, high_ns: int, count: int) -> None:
        self.count += count
        self.min_ns = low_ns if self.min_ns is None else min(self.min_ns, low_ns)
        self.max_ns = high_ns if self.max_ns is None else max(self.max_ns, high_ns)

    def quantile(self, fraction: float) -> int | None:
        """The nearest-rank quantile within RELATIVE_ERROR; None when empty. 0 is the exact
        minimum, 1 the exact maximum."""
        if not self.count:
            return None
        assert self.min_ns is not None and self.max_ns is not None
        rank = max(1, math.ceil(fraction * self.count))
        if rank == 1:
            return self.min_ns
        if rank >= self.count:
            return self.max_ns
        index = int(np.searchsorted(np.cumsum(self.counts), rank, side="left"))
        return min(max(bucket_value(index), self.min_ns), self.max_ns)
