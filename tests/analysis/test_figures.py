"""Golden checks of the figure builders: tiny tables in, and what each figure draws (traces,
their axes and points, bands, marks and titles) compared with what those tables must give.
Pure: no Spark, no browser (the reports' rendering is tests/analysis/test_report.py's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.figures import (
    VERDICT_COLOURS,
    comparison,
    latency_points,
    resource_samples,
    search_probes,
    sender_health,
    six_series,
    step_spans,
)
from analysis.memory_report import memory_over_time
from analysis.pages import figure_html, page
from analysis.report import clock_note

S = 1_000_000_000


def _traces(figure) -> list[tuple]:
    return [
        (t.type, t.name, t.yaxis, list(t.x) if t.x is not None else None, list(t.y))
        for t in figure.data
    ]


def _metric(second, step, sent, delivered=None, failures=0, lost=0, scheduled=None):
    return {
        "second": second,
        "step": step,
        "scheduled": sent if scheduled is None else scheduled,
        "sent": sent,
        "delivered": sent if delivered is None else delivered,
        "send_failures": failures,
        "lost": lost,
    }


METRICS = [
    _metric(0, 1, 100),
    _metric(1, 1, 100),
    _metric(2, None, 0, scheduled=0),  # the gap between steps schedules nothing
    _metric(3, 2, 200, delivered=150, lost=50),
    _metric(4, 2, 190, failures=10),
]
CUMULATIVE = [
    {"metric": "e2e", "second": 1, "p9999_ms": 5.0, "n": 200},
    {"metric": "publish", "second": 0, "p9999_ms": 1.0, "n": 100},
    {"metric": "publish", "second": 1, "p9999_ms": 2.0, "n": 200},
    {"metric": "e2e", "second": 0, "p9999_ms": 4.0, "n": 100},
]
STEPS = [
    {"step": 1, "target_rate_per_s": 100, "verdict": "holds"},
    {"step": 2, "target_rate_per_s": 200, "verdict": "breaks"},
]


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ([], {}),
        (METRICS, {1: (0, 1), 2: (3, 4)}),
        ([_metric(7, 3, 0, scheduled=0)], {}),
        ([_metric(9, 1, 5), _metric(2, 1, 5)], {1: (2, 9)}),
    ],
)
def test_step_spans(metrics, expected):
    assert step_spans(metrics) == expected


def test_six_series_draws_the_2019_graph_with_steps_and_the_breaking_point():
    figure = six_series(METRICS, CUMULATIVE, STEPS, 200, "t")
    seconds = [0, 1, 2, 3, 4]
    assert _traces(figure) == [
        ("scatter", "P99.99 publish latency", "y", [0, 1], [1.0, 2.0]),
        ("scatter", "P99.99 end-to-end latency", "y", [0, 1], [4.0, 5.0]),
        ("scatter", "send throughput", "y2", seconds, [100, 100, 0, 200, 190]),
        ("scatter", "delivery throughput", "y2", seconds, [100, 100, 0, 150, 190]),
        ("scatter", "send failures", "y2", seconds, [0, 0, 0, 0, 10]),
        ("scatter", "delivery failures (lost)", "y2", seconds, [0, 0, 0, 50, 0]),
    ]
    bands = [(s.type, s.x0, s.x1, s.fillcolor) for s in figure.layout.shapes if s.type == "rect"]
    assert bands == [
        ("rect", 0, 2, VERDICT_COLOURS["holds"]),
        ("rect", 3, 5, VERDICT_COLOURS["breaks"]),
    ]
    marks = [(s.x0, s.line.dash) for s in figure.layout.shapes if s.type == "line"]
    assert marks == [(3, "dash")]
    texts = [a.text for a in figure.layout.annotations]
    assert texts == ["100/s", "200/s", "breaking point 200/s"]
    assert figure.layout.yaxis2.overlaying == "y" and figure.layout.title.text == "t"


def test_no_breaking_point_no_mark():
    figure = six_series(METRICS, CUMULATIVE, STEPS, None, "t")
    assert [s for s in figure.layout.shapes if s.type == "line"] == []


def test_latency_points_are_seconds_from_the_first_event_and_skip_missing_values():
    points = [
        {"t_ns": 10 * S, "publish_ms": 1.5, "e2e_ms": 3.0, "events": 1},
        {"t_ns": 12 * S, "publish_ms": 2.5, "e2e_ms": None, "events": 1},
    ]
    figure = latency_points(points, "all")
    assert _traces(figure) == [
        ("scattergl", "publish latency", None, [0.0, 2.0], [1.5, 2.5]),
        ("scattergl", "end-to-end latency", None, [0.0], [3.0]),
    ]
    assert figure.layout.title.text == "all" and figure.layout.yaxis.type == "log"
    bucketed = latency_points([{**points[0], "events": 4}], "all")
    assert bucketed.layout.title.text == "all (per time bucket: the maximum)"


def test_sender_health_compares_target_and_achieved_per_step():
    steps = [
        {"step": 1, "target_rate_per_s": 100, "achieved_send_rate_per_s": 99.5,
         "sender_lag_p99_ms": 0.4},
        {"step": 2, "target_rate_per_s": 200, "achieved_send_rate_per_s": 150.0,
         "sender_lag_p99_ms": 30.0},
    ]  # fmt: skip
    labels = ["1: 100/s", "2: 200/s"]
    assert _traces(sender_health(steps, "h")) == [
        ("bar", "target", None, labels, [100, 200]),
        ("bar", "achieved send rate", None, labels, [99.5, 150.0]),
        ("scatter", "sender lag p99 (ms)", "y2", labels, [0.4, 30.0]),
    ]


def test_comparison_leaves_a_gap_for_a_system_a_run_did_not_have():
    rows = [
        {"run": "a", "sut": "direct", "max_sustainable_rate_per_s": 2000,
         "breaking_point_per_s": None, "p9999_e2e_ms": 3.0},
        {"run": "a", "sut": "channel-imc", "max_sustainable_rate_per_s": 1500,
         "breaking_point_per_s": 1600, "p9999_e2e_ms": 40.0},
        {"run": "b", "sut": "direct", "max_sustainable_rate_per_s": 1900,
         "breaking_point_per_s": 2000, "p9999_e2e_ms": 4.0},
    ]  # fmt: skip
    suts = ["channel-imc", "direct"]
    assert _traces(comparison(rows)) == [
        ("bar", "a: max sustainable rate", None, suts, [1500, 2000]),
        ("scatter", "a: e2e P99.99 (ms)", "y2", suts, [40.0, 3.0]),
        ("bar", "b: max sustainable rate", None, suts, [None, 1900]),
        ("scatter", "b: e2e P99.99 (ms)", "y2", suts, [None, 4.0]),
    ]


def test_resource_samples_one_line_per_process_and_the_summed_lag():
    start = 100 * S
    processes = [
        {"t_ns": start + 2 * S, "process": "sender", "pid": 1, "rss_bytes": 20_000_000,
         "cpu_percent": 50.0},
        {"t_ns": start + S, "process": "sender", "pid": 1, "rss_bytes": 10_000_000,
         "cpu_percent": 40.0},
        {"t_ns": start + S, "process": "receiver", "pid": 2, "rss_bytes": 5_000_000,
         "cpu_percent": 10.0},
    ]  # fmt: skip
    lag = [
        {"t_ns": start + S, "partition": 0, "lag": 3},
        {"t_ns": start + S, "partition": 1, "lag": 4},
        {"t_ns": start + 2 * S, "partition": 0, "lag": 0},
    ]
    figure = resource_samples(processes, lag, start, "r")
    got = [(t.name, list(t.x), list(t.y)) for t in figure.data]
    assert got == [
        ("receiver", [1.0], [5.0]),
        (None, [1.0], [10.0]),
        ("sender", [1.0, 2.0], [10.0, 20.0]),
        (None, [1.0, 2.0], [40.0, 50.0]),
        ("consumer lag", [1.0, 2.0], [7, 0]),
    ]
    titles = [a.text for a in figure.layout.annotations]
    assert titles == ["RSS (MB)", "CPU (% of one core)", "consumer lag (records, all partitions)"]
    without_lag = resource_samples(processes, [], start, "r")
    assert len(without_lag.layout.annotations) == 2 and len(without_lag.data) == 4


def _clock(applied, workers, negative=0):
    return {
        "clock": {
            "correction": "auto",
            "applied": applied,
            "note": "corrected" if applied else "not corrected",
            "workers": workers,
            "negative_e2e": negative,
        }
    }


@pytest.mark.parametrize(
    ("summary", "shown"),
    [
        ({}, ""),  # a summary from before clock offsets: nothing to say
        (_clock(False, {}), "Clocks: not corrected</p>"),
        (
            _clock(True, {"0": {"offset_ns": 250_000_000, "bound_ns": 41_000, "drift_ns": -2_000}}),
            "Clocks: corrected; offsets worker 0: +250.000 ms ± 0.041, drift -0.002 ms</p>",
        ),
        (_clock(False, {}, negative=3), "3 events arrived before they were due (clock error)"),
    ],
)
def test_the_report_says_what_was_done_about_the_clocks(summary, shown):
    note = clock_note(summary)
    assert (shown in note) if shown else note == ""


def test_memory_over_time_draws_rss_uss_and_the_phases_of_each_scenario():
    mib = 2**20
    series = {
        "confluent-p1": [
            {"second": 0, "rss_bytes": 20 * mib, "uss_bytes": 15 * mib},
            {"second": 1, "rss_bytes": 70 * mib, "uss_bytes": 60 * mib},
            {"second": 2, "rss_bytes": 40 * mib, "uss_bytes": 35 * mib},
        ],
        "aiokafka-p1": [{"second": 0, "rss_bytes": 30 * mib, "uss_bytes": None}],
    }
    phases = {"confluent-p1": {"first_message_s": 1, "drained_s": 2}}
    figure = memory_over_time(series, phases, "memory")
    traces = {t.name: (list(t.x), list(t.y), t.mode) for t in figure.data}
    assert traces["confluent-p1 RSS"] == ([0, 1, 2], [20, 70, 40], "lines")
    assert traces["confluent-p1 USS"] == ([0, 1, 2], [15, 60, 35], "lines")
    assert traces["confluent-p1: first message"] == ([1], [70], "markers")
    assert traces["confluent-p1: drained"] == ([2], [40], "markers")
    assert traces["aiokafka-p1 RSS"] == ([0], [30], "lines")
    assert "aiokafka-p1 USS" not in traces  # nothing measured, nothing drawn


def test_search_probes_draw_each_probe_by_verdict_and_the_latency_knee():
    probes = [
        {"step": 1, "rate_per_s": 100, "confirm": False, "verdict": "holds", "e2e_p99_ms": 2.0},
        {"step": 2, "rate_per_s": 200, "confirm": False, "verdict": "breaks", "e2e_p99_ms": 90.0},
        {"step": 3, "rate_per_s": 150, "confirm": False, "verdict": "holds", "e2e_p99_ms": 3.0},
        {"step": 4, "rate_per_s": 150, "confirm": True, "verdict": "holds", "e2e_p99_ms": 3.5},
        {
            "step": 5,
            "rate_per_s": 175,
            "confirm": False,
            "verdict": "not-judged",
            "e2e_p99_ms": None,
        },
    ]
    figure = search_probes(probes, "probes")
    by_name = {}
    for trace in figure.data:
        by_name.setdefault(trace.name, []).append((list(trace.x), list(trace.y)))
    assert by_name["holds"] == [([1, 3, 4], [100, 150, 150]), ([100, 150, 150], [2.0, 3.0, 3.5])]
    assert by_name["breaks"] == [([2], [200]), ([200], [90.0])]
    assert by_name["not-judged"][0] == ([5], [175])  # cut short by an interrupt: still drawn
    assert "sender-limited" not in by_name  # no such probe, no trace
    holds = next(t for t in figure.data if t.name == "holds")
    assert list(holds.marker.symbol) == ["circle", "circle", "square"]  # the confirmation


def test_every_plot_is_responsive():
    """As wide as its container whatever width the figure had, as tall as it says; the page
    fits each plot to its box once laid out (tests/analysis/test_report.py checks it drawn)."""
    figure = six_series([], [], [], None, "t")
    figure.update_layout(width=1400, height=420)
    markup = figure_html(figure, "six-0")
    assert markup.startswith('<div style="height:420px; width:100%;">')  # the plot's box
    assert '<div id="six-0" class="plotly-graph-div" style="height:100%; width:100%;">' in markup
    assert '"responsive": true' in markup and '"width":1400' not in markup
    assert figure.layout.width is None and figure.layout.autosize is True
    unsized = figure_html(comparison([]), "comparison")  # Plotly's default height, 450 px
    assert unsized.startswith('<div style="height:100%; width:100%;">')
    assert "ResizeObserver" in page("t", Path("plotly.js"), Path("."), markup)
