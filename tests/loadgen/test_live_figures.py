"""The sender's live figures without a process: histogram buckets, the exposition Prometheus
reads, a fleet's sums, a scrape's request head, and a failed write never counted twice."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from contract.metricslines import SenderMetrics, metrics_listening, parse_metrics_line
from loadgen.exposition import registry
from loadgen.fleet.figures import FleetFigures, fleet_figures
from loadgen.histogram import BOUNDS_NS, BOUNDS_S, Histogram, bucket_counts, cumulative, merged
from loadgen.recorder import NO_TIME, SentColumns, _merged
from loadgen.sendmetrics import request_parts

BUCKETS = len(BOUNDS_S) + 1


def _counts(by_bucket: dict[int, int]) -> list[int]:
    """Bucket counts, all 0 but those given (bucket index -> count)."""
    return [by_bucket.get(index, 0) for index in range(BUCKETS)]


@pytest.mark.parametrize(
    ("value_ns", "bucket"),
    [
        (0, 0),
        (1, 0),
        (100_000, 0),  # exactly 0.1 ms: Prometheus' `le`, the bound's own bucket
        (100_001, 1),
        (250_000, 1),
        (999_999, 3),
        (1_000_000, 3),
        (1_000_001, 4),
        (10_000_000_000, 15),  # exactly 10 s
        (10_000_000_001, 16),  # above every bound: +Inf only
        (3_600_000_000_000, 16),
    ],
)
def test_a_value_falls_in_the_first_bucket_whose_bound_it_does_not_exceed(value_ns, bucket):
    assert bucket_counts(np.array([value_ns], dtype=np.int64)) == _counts({bucket: 1})


def test_the_bounds_run_from_a_tenth_of_a_millisecond_to_ten_seconds_in_nanoseconds():
    assert (BOUNDS_S[0], BOUNDS_S[-1]) == (0.0001, 10.0)
    assert list(BOUNDS_NS) == sorted(set(BOUNDS_NS)) and BOUNDS_NS[0] == 100_000


@pytest.mark.parametrize(
    ("counts", "expected"),
    [([0, 0, 0], [0, 0, 0]), ([1, 2, 3], [1, 3, 6]), ([5, 0, 0, 1], [5, 5, 5, 6])],
)
def test_prometheus_buckets_are_cumulative(counts, expected):
    assert cumulative(counts) == expected


def test_a_histogram_adds_batches_and_counts_a_clock_step_back_as_zero():
    histogram = Histogram()
    histogram.add(np.array([], dtype=np.int64))
    histogram.add(np.array([50_000, 2_000_000], dtype=np.int64))
    histogram.add(np.array([-7_000_000, 20_000_000_000], dtype=np.int64))
    doc = histogram.doc()
    assert doc["bounds_s"] == list(BOUNDS_S)
    assert doc["counts"] == _counts({0: 2, 4: 1, 16: 1})
    assert doc["sum_s"] == pytest.approx(0.00005 + 0.002 + 20.0)  # the negative one as 0


def test_histograms_add_up_only_with_the_same_bounds():
    one, two = Histogram(), Histogram()
    one.add(np.array([1], dtype=np.int64))
    two.add(np.array([1, 11_000_000_000], dtype=np.int64))
    total = merged([one.doc(), two.doc()])
    assert total["counts"] == _counts({0: 2, 16: 1})
    assert merged([])["counts"] == [0] * BUCKETS
    other = {**one.doc(), "bounds_s": [1.0]}
    with pytest.raises(ValueError, match="bounds"):
        merged([one.doc(), other])


def _figures(step: int = 1, rate: int = 100, lag_ns: tuple[int, ...] = (), **counts: int):
    lag, publish = Histogram(), Histogram()
    lag.add(np.array(lag_ns, dtype=np.int64))
    publish.add(np.array(lag_ns, dtype=np.int64) * 10)
    figures: SenderMetrics = {
        "event": "metrics",
        "sent": 0,
        "ok": 0,
        "failures": 0,
        "inflight_cap_refused": 0,
        "timed_out": 0,
        "rows_written": 0,
        "inflight": 0,
        "step": step,
        "target_rate_per_s": rate,
        "lag": lag.doc(),
        "publish_latency": publish.doc(),
    }
    return {**figures, **counts}


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_exposition_names_every_figure_and_its_histograms_are_cumulative():
    figures = _figures(3, 500, (50_000, 300_000, 2_000_000), sent=10, ok=7, failures=3)
    figures["inflight_cap_refused"], figures["inflight"] = 2, 4
    samples = _samples(generate_latest(registry(lambda: figures)).decode())
    got = {name: value for (name, labels), value in samples.items() if not labels}
    assert got["evbench_sender_events_sent_total"] == 10
    assert got["evbench_sender_events_acked_total"] == 7
    assert got["evbench_sender_events_failed_total"] == 3
    assert got["evbench_sender_inflight_cap_refused_total"] == 2
    assert got["evbench_sender_events_in_flight"] == 4
    assert got["evbench_sender_step"] == 3
    assert got["evbench_sender_target_rate_events_per_second"] == 500
    assert got["evbench_sender_lag_seconds_count"] == 3
    assert got["evbench_sender_lag_seconds_sum"] == pytest.approx(0.00235)
    lag = {
        dict(labels)["le"]: value
        for (name, labels), value in samples.items()
        if name == "evbench_sender_lag_seconds_bucket"
    }
    picked = ("0.0001", "0.00025", "0.0005", "0.0025", "10.0", "+Inf")
    assert [lag[le] for le in picked] == [1, 1, 2, 3, 3, 3]
    assert samples[("evbench_sender_publish_latency_seconds_count", ())] == 3


def test_nothing_is_served_before_there_are_figures():
    assert generate_latest(registry(lambda: None)) == b""


def test_a_fleet_adds_its_workers_up_and_forgets_a_failed_ones_inflight():
    workers = {
        0: _figures(2, 600, (1, 2), sent=10, ok=9, failures=1, inflight=3, rows_written=8),
        1: _figures(1, 300, (300_000,), sent=5, ok=5, inflight=2),
        2: _figures(2, 600, (), sent=4, inflight=7),
    }
    fleet = fleet_figures(workers, failed={2})
    assert fleet is not None
    assert (fleet["sent"], fleet["ok"], fleet["failures"], fleet["rows_written"]) == (19, 14, 1, 8)
    assert fleet["inflight"] == 5  # the failed worker's 7 will never be answered to it
    assert (fleet["step"], fleet["target_rate_per_s"]) == (2, 600)
    assert fleet["lag"]["counts"] == _counts({0: 2, 2: 1})
    assert fleet_figures({}) is None


def test_a_worker_with_other_buckets_is_left_out_once_and_said():
    figures = FleetFigures()
    assert figures.update(0, _figures(sent=3)) is None
    odd = _figures(sent=100)
    odd["lag"] = {**odd["lag"], "bounds_s": [1.0]}
    assert "left out" in (figures.update(1, odd) or "")
    assert figures.update(1, odd) is None  # said once
    now = figures.now()
    assert now is not None and now["sent"] == 3


def test_the_lines_parse_as_their_types_and_name_what_they_lack():
    listening = metrics_listening("::1", 9100)
    assert listening["url"] == "http://[::1]:9100/metrics"
    assert parse_metrics_line(listening) == listening
    assert parse_metrics_line({"event": "progress"}) is None
    with pytest.raises(Exception, match="publish_latency"):
        parse_metrics_line({k: v for k, v in _figures().items() if k != "publish_latency"})


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", ("GET", "/metrics", None)),
        (
            b"GET /metrics?x=1 HTTP/1.1\r\nACCEPT:  application/openmetrics-text\r\n\r\n",
            ("GET", "/metrics", "application/openmetrics-text"),
        ),
        (b"HEAD / HTTP/1.0\r\n\r\n", ("HEAD", "/", None)),
        (b"garbage\r\n\r\n", ("garbage", "", None)),
    ],
)
def test_a_scrapes_request_head_gives_its_method_path_and_accept(head, expected):
    assert request_parts(head) == expected


def test_rows_observed_before_a_failed_write_are_not_observed_again():
    failed, since = SentColumns(), SentColumns()
    for seq in range(3):
        failed.append(seq, 10, 20, 30, 202, None)
    failed.observed = len(failed)  # observed, then the write failed
    since.append(3, 10, NO_TIME, NO_TIME, 0, "refused")
    retry = _merged(failed, since)
    assert (len(retry), retry.observed) == (4, 3)
