"""The sender's log-linear histogram (loadgen.loghist): its quantiles against numpy's exact
nearest-rank percentiles, within the resolution it states, and its buckets' arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.loghist import (
    BUCKETS,
    RELATIVE_ERROR,
    TOP_VALUE,
    LogHistogram,
    bucket_bounds,
    bucket_of,
    bucket_value,
    buckets_of,
)

_RNG = np.random.default_rng(34)
_FRACTIONS = (0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0)

# name -> values (ns): what lags and wake-ups look like, and the corners.
CASES = {
    "one value": np.array([123_456], dtype=np.int64),
    "constant": np.full(1000, 37_000, dtype=np.int64),
    "exact region (below 256 ns)": _RNG.integers(0, 256, 5000),
    "healthy lag (lognormal around 30 us)": _RNG.lognormal(np.log(30_000), 0.8, 200_000).astype(
        np.int64
    ),
    "uniform 0..50 ms": _RNG.integers(0, 50_000_000, 100_000),
    "spikes at 1e-4 (80 ms in 2 ms)": np.concatenate(
        [_RNG.normal(2e6, 1e5, 99_990).astype(np.int64), np.full(10, 80_000_000)]
    ),
    "gap at the p99 rank": np.concatenate(
        [np.full(989, 1_000, dtype=np.int64), np.full(11, 9_000_000_000)]
    ),
    "powers of two and their neighbours": np.array(
        [(1 << b) + d for b in range(1, 39) for d in (-1, 0, 1)], dtype=np.int64
    ),
    "seconds-long stalls": _RNG.integers(1, 600_000_000_000, 10_000),
}


@pytest.mark.parametrize("name", CASES)
def test_every_quantile_is_the_exact_nearest_rank_value_within_the_stated_resolution(name):
    values = CASES[name]
    histogram = LogHistogram()
    for chunk in np.array_split(values, 7):  # folded in batches, as the sender does
        histogram.add(chunk)
    assert histogram.count == len(values)
    assert histogram.min_ns == values.min() and histogram.max_ns == values.max()
    for fraction in _FRACTIONS:
        exact = int(np.percentile(values, fraction * 100, method="inverted_cdf"))
        read = histogram.quantile(fraction)
        assert read is not None
        # The stated bound: half a bucket, at most 1/256 of the value (exact below 256 ns).
        assert abs(read - exact) <= exact * RELATIVE_ERROR, (fraction, read, exact)


def test_an_empty_histogram_has_no_quantile():
    assert LogHistogram().quantile(0.99) is None
    histogram = LogHistogram()
    histogram.add(np.array([], dtype=np.int64))
    assert histogram.count == 0 and histogram.max_ns is None


def test_one_value_at_a_time_counts_as_a_batch_does():
    values = _RNG.integers(0, 10**9, 2000)
    one, batch = LogHistogram(), LogHistogram()
    for value in values.tolist():
        one.add_one(value)
    batch.add(values)
    assert np.array_equal(one.counts, batch.counts)
    assert (one.count, one.min_ns, one.max_ns) == (batch.count, batch.min_ns, batch.max_ns)


def test_merged_histograms_read_as_one():
    a, b = _RNG.integers(0, 10**6, 3000), _RNG.integers(10**6, 10**8, 1000)
    first, second, whole = LogHistogram(), LogHistogram(), LogHistogram()
    first.add(a)
    second.add(b)
    whole.add(np.concatenate([a, b]))
    first.merge(second)
    first.merge(LogHistogram())  # an empty one changes nothing
    assert np.array_equal(first.counts, whole.counts)
    assert first.quantile(0.99) == whole.quantile(0.99) and first.max_ns == whole.max_ns


# value -> its bucket: exact below 256, then 128 buckets per power of two.
BUCKET_TABLE = {
    0: 0,
    1: 1,
    255: 255,
    256: 256,
    257: 256,
    258: 257,
    511: 383,
    512: 384,
    1023: 511,
    1024: 512,
    -5: 0,  # a wall-clock step backwards: counted as 0
    TOP_VALUE: BUCKETS - 1,
    TOP_VALUE * 4: BUCKETS - 1,  # past the top: the last bucket (the maximum stays exact)
}


@pytest.mark.parametrize("value", BUCKET_TABLE)
def test_the_bucket_of_a_value(value):
    assert bucket_of(value) == BUCKET_TABLE[value]
    assert buckets_of(np.array([value], dtype=np.int64)).tolist() == [BUCKET_TABLE[value]]


def test_the_buckets_tile_the_range_and_every_value_lies_in_its_own():
    expected_lower = 0
    for index in range(BUCKETS):
        lower, width = bucket_bounds(index)
        assert lower == expected_lower  # no gap, no overlap
        assert index < 256 or width <= lower / 128  # the width the resolution rests on
        assert lower <= bucket_value(index) < lower + width
        expected_lower = lower + width
    assert expected_lower == TOP_VALUE + 1
    values = _RNG.integers(0, TOP_VALUE, 100_000)
    index = buckets_of(values)
    lows = np.array([bucket_bounds(i)[0] for i in range(BUCKETS)])
    widths = np.array([bucket_bounds(i)[1] for i in range(BUCKETS)])
    assert np.all((lows[index] <= values) & (values < lows[index] + widths[index]))
