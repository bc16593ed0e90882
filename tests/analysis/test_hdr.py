"""`--export-hdr`: HdrHistogram interval logs, read back by HdrHistogram's own readers.

The Python package is the oracle: our numpy bucket arithmetic must put every value where its
HdrHistogram puts it, our encoding must decode to the histogram it builds value by value, and a
whole run's logs, read with its HistogramLogReader, must count every event once and give each
step's percentiles within the stated resolution (3 significant digits) of the exact order
statistics and of summary.json. HdrHistogram's Java HistogramLogProcessor (Debian's
libhdrhistogram-java, which `make test` installs) must count every event once too."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from analysis.hdr import (
    HIGHEST_NS,
    SIGNIFICANT_DIGITS,
    Interval,
    counts_index,
    decode_counts,
    encode,
    interval_line,
    interval_rows,
    log_head,
    log_tail,
    merged,
    per_second,
)
from analysis.hdr_export import spans
from analysis.job import AnalyzeOptions, analyze
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from runtime.parquet import PartWriter
from tests.analysis.crafted import MS, T0, S, received_row, sent_row
from tests.analysis.test_export import STEPS, craft_spiky

# Debian's libhdrhistogram-java (`make test` installs it, as it does Chromium).
HDR_JAR = Path("/usr/share/java/hdrhistogram.jar")

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


def _lognormal(seed, mean, sigma, size):
    return np.random.default_rng(seed).lognormal(mean, sigma, size).astype(np.int64).tolist()


def _interval(second, step, values, sut="s0", metric="e2e"):
    values = np.array(values, dtype=np.int64)
    return Interval(sut, metric, second, step, len(values), int(values.max()), encode(values), 0, 0)


def test_an_interval_is_one_untagged_line_and_a_log_says_what_it_holds():
    line = interval_line(_interval(17, 3, [2_500_000]))
    assert line == f"17.000,1.000,2.500,{encode(np.array([2_500_000]))}"
    assert log_head(1_700_000_000_500_000_000)[1].startswith("#[StartTime: 1700000000.500 ")
    assert "the whole run" in log_head(0)[3] and "step 3 alone" in log_head(0, 3)[3]


@pytest.mark.parametrize(
    "parts",
    [
        pytest.param([[], []], id="both-empty"),
        pytest.param([[5_000_000] * 3, []], id="one-empty"),
        pytest.param([EDGES, [7, 7, 123_456_789]], id="edges-and-more"),
        pytest.param([_lognormal(5, 14, 1, 3000), _lognormal(6, 16, 2, 2000)], id="lognormals"),
    ],
)
def test_merged_histograms_are_the_histogram_of_all_their_values(parts):
    arrays = [np.array(part, dtype=np.int64) for part in parts]
    together = np.concatenate(arrays)
    assert merged([encode(a) for a in arrays]) == encode(together)
    want = np.bincount(counts_index(together)) if len(together) else np.zeros(0)
    assert decode_counts(encode(together)).tolist() == want.tolist()
    decoded = HdrHistogram.decode(merged([encode(a) for a in arrays]))
    assert decoded.get_total_count() == len(together)


@pytest.mark.parametrize(
    ("keys", "whole"),
    [
        # (sut, metric, second, step) in the export's order -> the whole run's (second, step, n)
        pytest.param([("s0", "e2e", 0, 1), ("s0", "e2e", 1, 1)], [(0, 1, 1), (1, 1, 1)], id="gap"),
        pytest.param(
            [("s0", "e2e", 0, 1), ("s0", "e2e", 1, 1), ("s0", "e2e", 1, 2), ("s0", "e2e", 2, 2)],
            [(0, 1, 1), (1, 1, 2), (2, 2, 1)],
            id="a-second-two-steps-share",
        ),
        pytest.param(
            [("s0", "e2e", 4, 1), ("s0", "publish", 4, 1), ("s1", "e2e", 4, 1)],
            [(4, 1, 1), (4, 1, 1), (4, 1, 1)],
            id="systems-and-metrics-apart",
        ),
        pytest.param([], [], id="nothing"),
    ],
)
def test_the_whole_runs_log_has_one_interval_a_second(keys, whole):
    intervals = [
        _interval(second, step, [second * MS + step], sut, metric)
        for sut, metric, second, step in keys
    ]
    out = list(per_second(intervals))
    assert [(i.second, i.step, i.n) for i in out] == whole
    for interval in out:
        same = [i for i in intervals if (i.sut, i.metric, i.second) == interval[:3]]
        assert interval.max_ns == max(i.max_ns for i in same)
        assert HdrHistogram.decode(interval.histogram).get_total_count() == len(same)


@pytest.mark.parametrize(
    ("numbers", "text"),
    [([1], "1"), ([1, 2, 3], "1-3"), ([3, 1, 2, 5, 7, 8], "1-3, 5, 7-8"), ([], "")],
)
def test_the_steps_said_are_runs(numbers, text):
    assert spans(numbers) == text


@pytest.fixture(scope="module")
def exported_hdr(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("hdr")
    sut, samples = craft_spiky(root, "direct", 1.0)
    said = []
    analyze(spark, [sut], AnalyzeOptions(export_hdr=True), said.append)
    return sut, samples, said


def read_back(path):
    """Every interval of a log added up, as the Python package's HistogramLogReader reads
    them (it does not filter by tag); how many intervals, and their tags."""
    reader = HistogramLogReader(str(path), HdrHistogram(1, HIGHEST_NS, SIGNIFICANT_DIGITS))
    total = HdrHistogram(1, HIGHEST_NS, SIGNIFICANT_DIGITS)
    intervals, tags = 0, set()
    while (interval := reader.get_next_interval_histogram()) is not None:
        intervals += 1
        tags.add(interval.get_tag())
        total.add(interval)
    reader.close()
    return total, intervals, tags


def processor_count(path):
    """The total count HdrHistogram's Java HistogramLogProcessor reads in a log (given no
    `-tag`: untagged lines only)."""
    java = shutil.which("java")
    if not HDR_JAR.exists() or java is None:
        pytest.skip(f"{HDR_JAR} missing: `make test` installs Debian's libhdrhistogram-java")
    processor = "org.HdrHistogram.HistogramLogProcessor"
    result = subprocess.run(
        [java, "-cp", str(HDR_JAR), processor, "-i", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = re.search(r"Total count\s*=\s*(\d+)", result.stdout)
    assert found, result.stdout[-2000:] + result.stderr[-2000:]
    return int(found[1])


def _exact_by_step(samples, metric, shift_ms):
    """The crafted values (ms) per step; e2e is measured from the intended time, 0.1 ms before
    the send time the crafted delivery latency starts from."""
    per_step = {1: [], 2: []}
    boundary_ns = STEPS[0][1] * 10**9 + 10**9  # step 2 starts 12 s in; step 1 ends at 10 s
    first_ns = min(s for s, _, _ in samples)
    for sent_ns, _, value in samples:
        per_step[1 if sent_ns - first_ns < boundary_ns else 2].append(value + shift_ms)
    return {step: np.sort(np.array(v)) for step, v in per_step.items()}


METRICS = [("e2e", "delivery", 0.1), ("publish", "publish", 0.0)]


@pytest.mark.parametrize(("metric", "samples_key", "shift_ms"), METRICS)
def test_every_log_counts_each_event_once_as_the_python_package_reads_it(
    exported_hdr, metric, samples_key, shift_ms
):
    sut, samples, _ = exported_hdr
    exact = _exact_by_step(samples[samples_key], metric, shift_ms)
    total, intervals, tags = read_back(sut / "analysis" / "hdr" / f"{metric}.hlog")
    # the whole run: one interval a second (10 s a step, a 2 s gap between), untagged
    assert (total.get_total_count(), intervals, tags) == (len(samples[samples_key]), 20, {None})
    for step, (_, seconds) in enumerate(STEPS, start=1):
        total, intervals, tags = read_back(
            sut / "analysis" / "hdr" / f"step-{step}" / f"{metric}.hlog"
        )
        assert (total.get_total_count(), intervals, tags) == (len(exact[step]), seconds, {None})


@pytest.mark.parametrize(("metric", "samples_key", "shift_ms"), METRICS)
def test_every_log_counts_each_event_once_as_hdrhistograms_log_processor_reads_it(
    exported_hdr, metric, samples_key, shift_ms
):
    sut, samples, _ = exported_hdr
    exact = _exact_by_step(samples[samples_key], metric, shift_ms)
    assert processor_count(sut / "analysis" / "hdr" / f"{metric}.hlog") == len(samples[samples_key])
    for step in exact:
        log = sut / "analysis" / "hdr" / f"step-{step}" / f"{metric}.hlog"
        assert processor_count(log) == len(exact[step])


def test_the_analysis_says_where_the_logs_went(exported_hdr):
    sut, _, said = exported_hdr
    hdr = sut / "analysis" / "hdr"
    assert f"  -> {hdr}/{{e2e,publish}}.hlog (the whole run)" in said
    assert f"  -> {hdr}/step-N/{{e2e,publish}}.hlog (steps 1-2)" in said
    assert sorted(p.relative_to(hdr).as_posix() for p in hdr.rglob("*") if p.is_file()) == [
        "e2e.hlog",
        "publish.hlog",
        "step-1/e2e.hlog",
        "step-1/publish.hlog",
        "step-2/e2e.hlog",
        "step-2/publish.hlog",
    ]  # and nothing hidden left behind


@pytest.mark.parametrize(("metric", "samples_key", "shift_ms"), METRICS)
def test_the_logs_give_each_steps_percentiles_within_their_resolution(
    exported_hdr, metric, samples_key, shift_ms
):
    sut, samples, _ = exported_hdr
    exact = _exact_by_step(samples[samples_key], metric, shift_ms)
    for step, values in exact.items():
        histogram, _, _ = read_back(sut / "analysis" / "hdr" / f"step-{step}" / f"{metric}.hlog")
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
    sut, samples, _ = exported_hdr
    summary = json.loads((sut / "analysis" / "summary.json").read_text())
    exact = _exact_by_step(samples["delivery"], "e2e", 0.1)
    for row in summary["steps"]:
        assert "p99" in row["e2e_exact"], row["step"]
        values = exact[row["step"]]
        low = int(0.99 * (len(values) - 1))
        gap_ns = (values[min(low + 1, len(values) - 1)] - values[low]) * MS
        want_ns = row["p99_e2e_ms"] * MS
        step_log = sut / "analysis" / "hdr" / f"step-{row['step']}" / "e2e.hlog"
        got_ns = read_back(step_log)[0].get_value_at_percentile(99.0)
        assert abs(got_ns - want_ns) <= want_ns / 10**SIGNIFICANT_DIGITS + gap_ns + 1, row["step"]


def _craft_without_gap(root):
    """Two steps of 1.5 s at 100/s with no gap between them, so second 1 holds both steps'
    events; each delivered 3 ms after its slot. Returns the SUT directory and its events."""
    sut = root / "run-g-p" / "direct"
    sent_w = PartWriter(sut / "sent", SENT_FIELDS)
    recv_w = PartWriter(sut / "received", RECEIVED_FIELDS)
    for seq in range(300):
        intended = T0 + seq * S // 100
        step = 1 if seq < 150 else 2
        sent_w.append(
            sent_row(f"e-{seq}", seq, step, 100, intended, intended, intended + MS, 202, None)
        )
        recv_w.append(received_row(f"e-{seq}", intended + 3 * MS))
    sent_w.flush()
    recv_w.flush()
    steps = [{"rate_per_s": 100, "duration_s": 1.5}] * 2
    run = {
        "run_id": "run-g",
        "sut": "direct",
        "status": "completed",
        "pace": {"name": "p", "steps": steps},
        "schedule": {"start_ns": T0},
    }
    (sut / "run.json").write_text(json.dumps(run))
    return sut, 300


def test_a_second_two_steps_share_is_one_interval_of_the_whole_run(spark, tmp_path):
    sut, events = _craft_without_gap(tmp_path)
    analyze(spark, [sut], AnalyzeOptions(export_hdr=True))
    hdr = sut / "analysis" / "hdr"
    total, intervals, _ = read_back(hdr / "e2e.hlog")
    assert (total.get_total_count(), intervals) == (events, 3)  # seconds 0, 1 and 2
    stamps = [line.split(",")[0] for line in (hdr / "e2e.hlog").read_text().splitlines()[5:]]
    assert stamps == ["0.000", "1.000", "2.000"]
    # each step's log has its own part of second 1
    for step in (1, 2):
        total, intervals, _ = read_back(hdr / f"step-{step}" / "e2e.hlog")
        assert (total.get_total_count(), intervals) == (events // 2, 2)
    assert processor_count(hdr / "e2e.hlog") == events
