"""The scraped metrics' rules (analysis.insight), table by table: counter rates and resets, how
each family type's samples are plotted, which names are chosen by default or by --plot-metric,
the caps, and the scraper's own series for failed endpoints. Pure: no Spark, no browser."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from analysis.insight import (
    CHOSEN_CAPS,
    DEFAULT_CAPS,
    Caps,
    Series,
    broken_at_gaps,
    capped,
    chosen_names,
    family_of,
    gap_limit_ns,
    per_second_rates,
    plotted_as,
    read_samples,
    short_limit_ns,
    system_metrics,
    within_plots,
)
from contract.errors import RecordFileError
from contract.records import METRIC_SAMPLE_FIELDS, MetricSampleRow
from runtime.parquet import PartWriter, arrow_schema

S = 1_000_000_000
NAN = math.nan


@pytest.mark.parametrize(
    ("t_s", "values", "rates", "resets"),
    [
        ([], [], [], 0),
        ([0], [5.0], [None], 0),
        ([0, 1, 2], [0.0, 10.0, 30.0], [None, 10.0, 20.0], 0),
        # uneven intervals: each rate over its own interval
        ([0, 0.5, 2.5], [0.0, 5.0, 25.0], [None, 10.0, 10.0], 0),
        ([0, 1], [7.0, 7.0], [None, 0.0], 0),
        # a reset: no rate for the interval it happened in, the next from the value after it
        ([0, 1, 2, 3], [100.0, 150.0, 20.0, 50.0], [None, 50.0, None, 30.0], 1),
        ([0, 1, 2, 3, 4], [5.0, 0.0, 0.0, 9.0, 1.0], [None, None, 0.0, 9.0, None], 2),
        # no value (NaN or infinite) at either end: no rate
        ([0, 1, 2, 3], [1.0, NAN, 3.0, 4.0], [None, None, None, 1.0], 0),
        ([0, 1, 2], [1.0, math.inf, 3.0], [None, None, None], 0),
        # two samples at one instant: no time between them, no rate
        ([0, 0, 1], [1.0, 2.0, 3.0], [None, None, 1.0], 0),
    ],
)
def test_per_second_rates(t_s, values, rates, resets):
    found = per_second_rates([int(t * S) for t in t_s], values)
    assert found.per_s == rates
    assert found.resets == resets


def test_no_rate_is_averaged_over_missed_scrapes():
    t_ns = [0, S, 2 * S, 9 * S, 10 * S]
    found = per_second_rates(t_ns, [0.0, 10.0, 20.0, 90.0, 100.0], max_interval_ns=2 * S)
    assert found.per_s == [None, 10.0, 10.0, None, 10.0]
    # a reset across the outage is still counted
    assert per_second_rates(t_ns, [0.0, 10.0, 20.0, 5.0, 15.0], 2 * S) == (
        [None, 10.0, 10.0, None, 10.0],
        1,
    )


@pytest.mark.parametrize(
    ("t_s", "values", "rates"),
    [
        # a session's last scrape 10 ms after the one before: a batch of 500 would read 50,000/s
        ([0, 1, 2, 2.01], [0.0, 1000.0, 2000.0, 2500.0], [None, 1000.0, 1000.0, None]),
        ([0, 1, 2, 2.6], [0.0, 1000.0, 2000.0, 2600.0], [None, 1000.0, 1000.0, 1000.0]),
        ([0, 1], [0.0, 10.0], [None, 10.0]),  # one interval: nothing to compare with
    ],
)
def test_no_rate_over_an_interval_much_shorter_than_the_usual(t_s, values, rates):
    t_ns = [int(t * S) for t in t_s]
    assert per_second_rates(t_ns, values, None, short_limit_ns(t_ns)).per_s == rates


@pytest.mark.parametrize(
    ("t_s", "limit_s", "broken_s", "values"),
    [
        ([], 2.5, [], []),
        ([0, 1, 2], None, [0, 1, 2], [0, 1, 2]),
        ([0, 1, 2], 2.5, [0, 1, 2], [0, 1, 2]),
        # a point without a value amid the gap breaks the line
        ([0, 1, 6, 7], 2.5, [0, 1, 3.5, 6, 7], [0, 1, None, 2, 3]),
        ([0, 4, 8], 2.5, [0, 2, 4, 6, 8], [0, None, 1, None, 2]),
    ],
)
def test_lines_break_where_scrapes_were_missed(t_s, limit_s, broken_s, values):
    limit_ns = None if limit_s is None else int(limit_s * S)
    times, shown = broken_at_gaps([int(t * S) for t in t_s], list(range(len(t_s))), limit_ns)
    assert (times, shown) == ([int(t * S) for t in broken_s], values)


@pytest.mark.parametrize(
    ("t_s", "limit_s"),
    [([], None), ([5], None), ([0, 1, 2, 3, 10], 2.5), ([0, 2, 4, 5], 5.0), ([1, 1], None)],
)
def test_the_gap_limit_is_a_multiple_of_the_usual_interval(t_s, limit_s):
    expected = None if limit_s is None else int(limit_s * S)
    assert gap_limit_ns([int(t * S) for t in t_s]) == expected


@pytest.mark.parametrize(
    ("metric", "kind", "family", "plotted"),
    [
        ("events_consumed_total", "counter", "events_consumed", "rate"),
        ("events_consumed", "counter", "events_consumed", "rate"),  # the older text format
        ("events_consumed_created", "counter", "events_consumed", None),
        ("latency_seconds_bucket", "histogram", "latency_seconds", None),
        ("latency_seconds_count", "histogram", "latency_seconds", "rate"),
        ("latency_seconds_sum", "histogram", "latency_seconds", "rate"),
        ("go_gc_duration_seconds", "summary", "go_gc_duration_seconds", "value"),  # quantiles
        ("go_gc_duration_seconds_count", "summary", "go_gc_duration_seconds", "rate"),
        ("queue_gcount", "gaugehistogram", "queue", "value"),
        ("queue_depth", "gauge", "queue_depth", "value"),
        # eventing-kafka's consumed count is a gauge that only grows: read as a rate
        ("eventing_kafka_consumed_msg_count", "gauge", "eventing_kafka_consumed_msg_count", "rate"),
        ("things", "unknown", "things", "value"),
        ("build_info", "info", "build", None),
        ("feature", "stateset", "feature", None),
        ("up", "gauge", "up", "value"),
        ("scrape_duration_seconds", "gauge", "scrape_duration_seconds", "value"),
    ],
)
def test_how_each_sample_is_plotted(metric, kind, family, plotted):
    assert family_of(metric, kind) == family
    assert plotted_as(metric, kind) == plotted


SCRAPED = [
    ("dispatcher_events_dispatched_total", "counter"),
    ("dispatcher_events_dispatched_created", "counter"),
    ("ingress_queue_depth", "gauge"),
    ("python_gc_collections_total", "counter"),
    ("http_requests_total", "counter"),
    ("http_requests_created", "counter"),
    ("latency_bucket", "histogram"),
    ("latency_count", "histogram"),
    ("latency_sum", "histogram"),
    ("consumer_lag", "gauge"),
    ("Messages_Consumed", "gauge"),
    ("process_cpu_seconds_total", "counter"),
    ("up", "gauge"),
    ("scrape_duration_seconds", "gauge"),
]


@pytest.mark.parametrize(
    ("patterns", "names", "unmatched"),
    [
        # the default: consumed, dispatched, queue, lag, gc in the family's name, any case
        (
            [],
            [
                "Messages_Consumed",
                "consumer_lag",
                "dispatcher_events_dispatched_total",
                "ingress_queue_depth",
                "python_gc_collections_total",
            ],
            [],
        ),
        (["http_requests_total"], ["http_requests_total"], []),  # the sample's name
        (["http_requests"], ["http_requests_total"], []),  # the family's name
        (["latency*"], ["latency_count", "latency_sum"], []),  # a glob; buckets never
        (["latency_bucket"], [], ["latency_bucket"]),
        (["up"], ["up"], []),  # the scraper's own, asked for by name
        (["QUEUE_DEPTH", "ingress_queue_depth"], ["ingress_queue_depth"], ["QUEUE_DEPTH"]),
        (["*_total", "nothing*"], [n for n, k in SCRAPED if n.endswith("_total")], ["nothing*"]),
    ],
)
def test_which_names_are_chosen(patterns, names, unmatched):
    choice = chosen_names(SCRAPED, patterns)
    assert choice.names == sorted(names)
    assert choice.unmatched == unmatched


def _line(name, endpoint, peak, labels=""):
    return Series(name, "gauge", endpoint, labels, "value", [0.0, 1.0], [0.0, float(peak)])


def test_caps_keep_the_first_plots_and_each_plots_highest_lines():
    names = ["lag", "m0", "m1", "m2", "m3"]
    assert within_plots(names, Caps(plots=3, lines_per_plot=4)) == (
        ["lag", "m0", "m1"],
        ["2 more metrics not plotted (at most 3 plots): m2, m3; choose with --plot-metric NAME"],
    )
    assert within_plots(names, DEFAULT_CAPS) == (names, [])
    many = within_plots([f"m{i:02}" for i in range(50)], CHOSEN_CAPS)[1]
    assert many == [
        "20 more metrics not plotted (at most 30 plots): m30, m31, m32, m33, m34, m35, m36, "
        "m37, m38, m39, …; choose with --plot-metric NAME"
    ]
    lines = [_line("lag", "x", peak, f'{{partition="{peak}"}}') for peak in range(10)]
    lines += [_line("m0", "x", 1)]
    plots, notes = capped(lines, Caps(plots=3, lines_per_plot=4))
    assert [p[0].name for p in plots] == ["lag", "m0"]
    # the four partitions that fell furthest behind, in their own order
    assert [s.labels for s in plots[0]] == [f'{{partition="{p}"}}' for p in (6, 7, 8, 9)]
    assert notes == ["lag: 4 of 10 lines shown, those with the highest peaks"]
    assert capped(lines[:3], DEFAULT_CAPS) == ([lines[:3]], [])


def _table(rows):
    return pa.Table.from_pylist(
        [r._asdict() for r in rows], schema=arrow_schema(METRIC_SAMPLE_FIELDS)
    )


def _scrapes(endpoint, seconds, down=()):
    """An endpoint scraped once a second from T=100 s: a dispatched counter (reset at 5 s), a
    queue gauge with two label sets, and the scraper's own rows; no samples while down."""
    start = 100 * S
    rows = []
    for second in seconds:
        t = start + second * S
        up = second not in down
        if up:
            count = 10.0 * (second if second < 5 else second - 5)
            rows.append(MetricSampleRow(t, endpoint, "dispatched_total", "counter", "", count))
            for queue in ("a", "b"):
                rows.append(
                    MetricSampleRow(t, endpoint, "queue_depth", "gauge", f'{{q="{queue}"}}', 2.0)
                )
            rows.append(MetricSampleRow(t, endpoint, "http_requests_total", "counter", "", 1.0))
        rows.append(MetricSampleRow(t, endpoint, "up", "gauge", "", 1.0 if up else 0.0))
        rows.append(MetricSampleRow(t, endpoint, "scrape_duration_seconds", "gauge", "", 0.01))
    return rows


def test_system_metrics_plot_rates_values_and_the_failed_endpoints_up():
    table = _table(_scrapes("api", range(8)) + _scrapes("dispatcher", range(8), down={3, 4}))
    found = system_metrics(table, start_ns=100 * S, patterns=[])
    names = [[(s.name, s.endpoint, s.labels) for s in plot] for plot in found.plots]
    assert names == [
        [("dispatched_total", "api", ""), ("dispatched_total", "dispatcher", "")],
        [
            ("queue_depth", "api", '{q="a"}'),
            ("queue_depth", "api", '{q="b"}'),
            ("queue_depth", "dispatcher", '{q="a"}'),
            ("queue_depth", "dispatcher", '{q="b"}'),
        ],
        [("up", "dispatcher", "")],  # only the endpoint that failed
        [("scrape_duration_seconds", "dispatcher", "")],
    ]
    api = found.plots[0][0]
    assert api.seconds == [float(s) for s in range(8)]  # since the schedule start
    assert api.values == [None, 10.0, 10.0, 10.0, 10.0, None, 10.0, 10.0]
    assert api.resets == 1
    assert found.plots[2][0].values == [1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    # the dispatcher was not scraped at 3 and 4 s: its lines break there, no rate across it
    dispatcher = found.plots[0][1]
    assert dispatcher.seconds == [0.0, 1.0, 2.0, 3.5, 5.0, 6.0, 7.0]
    assert dispatcher.values == [None, 10.0, 10.0, None, None, 10.0, 10.0]
    assert found.plots[1][2].values == [2.0, 2.0, 2.0, None, 2.0, 2.0, 2.0]
    assert found.failed == ["dispatcher"] and found.notes == []


def test_a_failed_endpoint_named_by_run_json_gets_its_up_line_too():
    table = _table(_scrapes("api", range(3)))
    found = system_metrics(table, 100 * S, ["http_requests"], failed=["api"])
    assert [plot[0].name for plot in found.plots] == [
        "http_requests_total",
        "up",
        "scrape_duration_seconds",
    ]
    assert found.plots[0][0].values == [None, 0.0, 0.0]


def test_what_chose_nothing_is_said():
    table = _table(_scrapes("api", range(3)))
    assert system_metrics(table, 100 * S, ["nope"]).notes == [
        "--plot-metric nope matched no plotted metric"
    ]
    quiet = _table([r for r in _scrapes("api", range(3)) if r.metric == "http_requests_total"])
    found = system_metrics(quiet, 100 * S, [])
    assert found.plots == [] and "choose some with --plot-metric" in found.notes[0]


def test_samples_are_read_from_every_part_and_a_damaged_one_is_named(tmp_path):
    directory = tmp_path / "samples" / "metrics"
    assert read_samples(directory).num_rows == 0  # a run that scraped nothing
    for endpoint in ("api", "dispatcher"):
        writer = PartWriter(directory, METRIC_SAMPLE_FIELDS, prefix=f"metrics-{endpoint}")
        for row in _scrapes(endpoint, range(3)):
            writer.append(row)
        writer.flush()
    table = read_samples(directory)
    assert table.num_rows == 2 * len(_scrapes("api", range(3)))
    assert set(table["endpoint"].to_pylist()) == {"api", "dispatcher"}
    (directory / "metrics-x-000000.parquet").write_bytes(b"PAR1 cut short")
    with pytest.raises(RecordFileError, match=r"metrics-x-000000\.parquet"):
        read_samples(directory)


def test_plot_metric_is_taken_by_analyze_and_by_run():
    from evbench.cli import build_parser

    parser = build_parser()
    analyze = parser.parse_args(["analyze", "runs/x", "--plot-metric", "a", "--plot-metric", "b*"])
    assert analyze.plot_metrics == ["a", "b*"]
    assert parser.parse_args(["run", "--plot-metric", "queue_depth"]).plot_metrics == [
        "queue_depth"
    ]
    assert parser.parse_args(["run"]).plot_metrics == []
