"""`--export-hdr`: HdrHistogram interval logs, read back by HdrHistogram's own Python package.

The package is the oracle: our numpy bucket arithmetic must put every value where its
HdrHistogram puts it, our encoding must decode to the histogram it builds value by value, and a
whole run's logs, read with its HistogramLogReader, must give each step's percentiles within the
stated resolution (3 significant digits) of the exact order statistics and of summary.json."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from analysis.hdr import (
    HIGHEST_NS,
    SIGNIFICANT_DIGITS,
    counts_index,
    encode,
    interval_lines,
    interval_rows,
    log_head,
    log_tail,
)
from analysis.job import AnalyzeOptions, analyze
from tests.analysis.crafted import MS
from tests.analysis.test_export import STEPS, craft_spiky

EDGES = [0, 1, 2, 1023, 1024, 2047, 2048, 2049, 4095, 4096, 10**6, 123_456_789, HIGHEST_NS]


def _reference(values):
    histogram = HdrHistogram(1, HIGHEST_NS, SIGNIFICANT_DIGITS)
    for value in values:
        assert histogram.record_value(int(value))
    return histogram


def test_every_value_lands_in_hdrhistograms_own_bucket():
    rng = np.random.default_rng(7)
    values = np.array(EDGES + rng.integers(0, HIGHEST_NS, 2000).tolist(), dtype=np.int64)
    reference = HdrHistogram(1, HIGHEST_NS, SIGNIFICANT_DIGITS)
    expected = [reference.get_counts_array_index(int(v)) for v in values]
    assert counts_index(values).tolist() == expected


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([5_000_000] * 3, id="one-value"),
        pytest.param(EDGES, id="edges"),
        pytest.param(
            np.random.default_rng(3).lognormal(15, 1.2, 5000).astype(np.int64).tolist(),
            id="lognormal",
        ),
        pytest.param(
            [2_000_000] * 9999 + [80_000_000], id="one-spike-in-10^4"
        ),  # the gap case: P99.99 at the gap
    ],
)
def test_our_encoding_decodes_to_the_histogram_hdrhistogram_builds(values):
    decoded = HdrHistogram.decode(encode(np.array(values, dtype=np.int64)))
    reference = _reference(values)
    assert decoded.get_total_count() == len(values)
    assert decoded.get_max_value() == reference.get_max_value()
    assert decoded.get_min_value() == reference.get_min_value()
    for percentile in (0.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0):
        assert decoded.get_value_at_percentile(percentile) == (
            reference.get_value_at_percentile(percentile)
        ), percentile


def test_an_empty_histogram_encodes_and_decodes_empty():
    assert HdrHistogram.decode(encode(np.zeros(0, np.int64))).get_total_count() == 0


def test_intervals_are_per_second_and_step_in_order_with_the_ends_counted():
    steps = np.array([2, 1, 1, 1, 2, 1])
    seconds = np.array([5, 4, 5, 4, 5, 5])
    values = np.array([10, -3, 20, 30, HIGHEST_NS + 9, 40])
    rows = interval_rows("direct", "e2e", steps, seconds, values)
    keys = list(zip(rows["second"], rows["step"], rows["n"], strict=True))
    assert keys == [(4, 1, 2), (5, 1, 2), (5, 2, 2)]
    assert rows["below"] == [1, 0, 0] and rows["above"] == [0, 0, 1]
    assert rows["max_ns"] == [30, 40, HIGHEST_NS]
    assert HdrHistogram.decode(rows["histogram"][0]).get_min_value() == 0  # -3 recorded as 0


@pytest.mark.parametrize(
    ("below", "above", "lines"),
    [(0, 0, 0), (2, 0, 1), (0, 1, 1)],
)
def test_the_tail_says_what_was_recorded_at_the_ends_only_when_something_was(below, above, lines):
    tail = log_tail(below, above)
    assert len(tail) == lines
    assert all(f"{below} values below 0" in line and f"{above} over" in line for line in tail)


def test_an_interval_is_written_untagged_and_tagged_by_its_step():
    lines = interval_lines(3, 17, 2_500_000, "QUJD")
    assert lines == ["17.000,1.000,2.500,QUJD", "Tag=step-3,17.000,1.000,2.500,QUJD"]
    assert log_head(1_700_000_000_500_000_000)[1].startswith("#[StartTime: 1700000000.500 ")


@pytest.fixture(scope="module")
def exported_hdr(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("hdr")
    sut, samples = craft_spiky(root, "direct", 1.0)
    analyze(spark, [sut], AnalyzeOptions(export_hdr=True))
    return sut, samples


def _steps_read_back(path):
    """Each tag's histogram (None: the untagged lines, the whole run), its intervals added up,
    as HistogramLogReader reads them; and how many intervals each tag has."""
    reader = HistogramLogReader(str(path), HdrHistogram(1, HIGHEST_NS, SIGNIFICANT_DIGITS))
    steps, intervals = {}, {}
    while (interval := reader.get_next_interval_histogram()) is not None:
        tag = interval.get_tag()
        intervals[tag] = intervals.get(tag, 0) + 1
        steps.setdefault(tag, HdrHistogram(1, HIGHEST_NS, SIGNIFICANT_DIGITS)).add(interval)
    reader.close()
    return steps, intervals


def _exact_by_step(samples, metric, shift_ms):
    """The crafted values (ms) per step; e2e is measured from the intended time, 0.1 ms before
    the send time the crafted delivery latency starts from."""
    per_step = {1: [], 2: []}
    boundary_ns = STEPS[0][1] * 10**9 + 10**9  # step 2 starts 12 s in; step 1 ends at 10 s
    first_ns = min(s for s, _, _ in samples)
    for sent_ns, _, value in samples:
        per_step[1 if sent_ns - first_ns < boundary_ns else 2].append(value + shift_ms)
    return {step: np.sort(np.array(v)) for step, v in per_step.items()}


@pytest.mark.parametrize(
    ("metric", "samples_key", "shift_ms"),
    [
        ("e2e", "delivery", 0.1),
        ("publish", "publish", 0.0),
    ],
)
def test_the_logs_give_each_steps_percentiles_within_their_resolution(
    exported_hdr, metric, samples_key, shift_ms
):
    sut, samples = exported_hdr
    steps, intervals = _steps_read_back(sut / "analysis" / "hdr" / f"{metric}.hlog")
    assert set(steps) == {None, "step-1", "step-2"}
    # one a second, each step's own, and each again untagged
    assert intervals == {"step-1": STEPS[0][1], "step-2": STEPS[1][1], None: 20}
    exact = _exact_by_step(samples[samples_key], metric, shift_ms)
    assert steps[None].get_total_count() == sum(len(v) for v in exact.values())
    for step, values in exact.items():
        histogram = steps[f"step-{step}"]
        assert histogram.get_total_count() == len(values)
        for percentile in (50.0, 99.0, 99.9, 100.0):
            # HdrHistogram's rank for a percentile: q n rounded half up, at least 1
            rank = max(1, math.floor(percentile / 100 * len(values) + 0.5))
            want_ns = values[rank - 1] * MS
            got_ns = histogram.get_value_at_percentile(percentile)
            assert abs(got_ns - want_ns) <= want_ns / 10**SIGNIFICANT_DIGITS + 1, (
                metric,
                step,
                percentile,
                got_ns,
                want_ns,
            )


def test_the_logs_agree_with_the_summarys_exact_tails(exported_hdr):
    """HdrHistogram reports an order statistic (the value at rank q n, rounded), evbench's exact
    figures interpolate between the two around rank q (n - 1) (numpy's linear): the two agree
    within the resolution plus the gap between those neighbouring order statistics."""
    sut, samples = exported_hdr
    summary = json.loads((sut / "analysis" / "summary.json").read_text())
    steps, _ = _steps_read_back(sut / "analysis" / "hdr" / "e2e.hlog")
    exact = _exact_by_step(samples["delivery"], "e2e", 0.1)
    for row in summary["steps"]:
        assert "p99" in row["e2e_exact"], row["step"]
        values = exact[row["step"]]
        low = int(0.99 * (len(values) - 1))
        gap_ns = (values[min(low + 1, len(values) - 1)] - values[low]) * MS
        want_ns = row["p99_e2e_ms"] * MS
        got_ns = steps[f"step-{row['step']}"].get_value_at_percentile(99.0)
        assert abs(got_ns - want_ns) <= want_ns / 10**SIGNIFICANT_DIGITS + gap_ns + 1, row["step"]
