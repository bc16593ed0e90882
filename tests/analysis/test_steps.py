"""A step's pass (analysis.steps) and its merges on the driver (pure): what two steps' partial
rows make together."""

import numpy as np
import pyarrow as pa
import pytest

from analysis.steprule import latencies, outcomes
from analysis.steps import (
    POINT_ARROW,
    SECOND_COUNTS,
    StepContext,
    _groups,
    aggregate_step,
    merge_points,
    merge_seconds,
    point_buckets,
    second_counts,
)

S = 1_000_000_000
T0 = 1_700_000_000 * S


def _second(second, step=None, rate=None, **counts):
    row = dict.fromkeys(SECOND_COUNTS, 0)
    return {"second": second, **row, **counts, "step": step, "target_rate_per_s": rate}


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        # step 1's late deliveries land in step 2's first second: summed, step 2's step kept
        (
            [
                _second(0, 1, 10, scheduled=10, sent=10, delivered=9),
                _second(1, None, None, delivered=1),
                _second(1, 2, 20, scheduled=20, sent=20, delivered=20),
            ],
            [(0, 1, 10, 10, 9), (1, 2, 20, 20, 21)],
        ),
        # a quiet gap between steps is kept as zero seconds with no step
        (
            [_second(0, 1, 5, scheduled=5), _second(3, 2, 5, scheduled=5)],
            [(0, 1, 5, 5, 0), (1, None, None, 0, 0), (2, None, None, 0, 0), (3, 2, 5, 5, 0)],
        ),
        # a second due in two steps at once (a boundary): the higher step and rate
        (
            [_second(4, 1, 10, scheduled=3), _second(4, 2, 20, scheduled=4)],
            [(4, 2, 20, 7, 0)],
        ),
        ([], []),
    ],
)
def test_per_second_parts_merge(parts, expected):
    rows = merge_seconds(parts, T0)
    got = [
        (r["second"], r["step"], r["target_rate_per_s"], r["scheduled"], r["delivered"])
        for r in rows
    ]
    assert got == expected
    assert all(r["t_ns"] == T0 + r["second"] * S for r in rows)
    if rows:  # metrics.parquet's columns, in the order it always had
        assert list(rows[0])[:4] == ["second", "t_ns", "step", "target_rate_per_s"]


def test_a_bucket_two_steps_share_is_one_point():
    parts = pa.Table.from_pylist(
        [
            {"bucket": 7, "t_ns": 70, "events": 2, "publish_ms": 1.0, "e2e_ms": None},
            {"bucket": 7, "t_ns": 75, "events": 3, "publish_ms": 0.5, "e2e_ms": 4.0},
            {"bucket": 2, "t_ns": 20, "events": 1, "publish_ms": None, "e2e_ms": None},
        ],
        schema=pa.schema(list(POINT_ARROW)),
    )
    points = merge_points(parts).to_pylist()
    assert points == [
        {"t_ns": 20, "events": 1, "publish_ms": None, "e2e_ms": None},
        {"t_ns": 70, "events": 5, "publish_ms": 1.0, "e2e_ms": 4.0},  # maxima, first instant
    ]
    assert merge_points(parts.slice(0, 0)).column_names == [
        "t_ns",
        "events",
        "publish_ms",
        "e2e_ms",
    ]


def test_a_null_where_the_record_contract_has_none_is_named():
    table = pa.table(
        {
            "sut": ["s0"],
            "step": pa.array([1], pa.int32()),
            "target_rate_per_s": pa.array([10], pa.int32()),
            "intended_ns": [T0],
            "sent_ns": [T0],
            "ack_ns": [T0 + 1],
            "received_ns": pa.array([None], pa.int64()),
            "status": pa.array([None], pa.int32()),
            "decoy": [False],
            "deliveries": [0],
            "inflight_cap_refused": [False],
        }
    )
    context = StepContext({"s0": T0}, {"s0": S}, "/nonexistent")
    with pytest.raises(ValueError, match="null status"):
        aggregate_step(table, context=context)


def test_late_deliveries_count_by_the_second_they_were_due():
    ms = 1_000_000
    # (due, received or None, deliveries): second 0's three events, second 1's two
    events = [(0, 5 * ms, 1), (300 * ms, 1_301 * ms, 2), (900 * ms, None, 0),
              (1_000 * ms, 3_500 * ms, 3), (1_500 * ms, 2_500 * ms, 1)]  # fmt: skip
    table = pa.table(
        {
            "step": pa.array([1] * 5, pa.int32()),
            "target_rate_per_s": pa.array([3] * 5, pa.int32()),
            "intended_ns": [T0 + due for due, _, _ in events],
            "sent_ns": [T0 + due for due, _, _ in events],
            "ack_ns": [T0 + due + ms for due, _, _ in events],
            "received_ns": pa.array([None if r is None else T0 + r for _, r, _ in events]),
            "status": pa.array([202] * 5, pa.int32()),
            "decoy": [False] * 5,
            "deliveries": [d for _, _, d in events],
        }
    )
    flags = outcomes(table)
    rows = second_counts(table, flags, T0, latencies(table, flags["ok"])["e2e_ms"])
    by_second = {r["second"]: (r["scheduled"], r["lost"], r["late"]) for r in rows}
    # 1,001 ms is late, 1,000 ms (exactly the bound) is not; the lost event is neither; an
    # event delivered three times is late once
    assert by_second[0] == (3, 1, 1)
    assert by_second[1] == (2, 0, 1)
    assert [r["delivered"] for r in rows] == [1, 1, 1, 1]  # by arrival: seconds 0, 1, 2, 3


def test_the_totals_crossing_back_from_spark_are_the_step_rules():
    from analysis.steprule import StepTotals
    from analysis.steps import TOTALS_ARROW

    assert [f.name for f in TOTALS_ARROW] == list(StepTotals.__annotations__)


@pytest.mark.parametrize(
    "keys",
    [
        [3, 1, 3, 2, 1],
        [-2, 5, -2, 0],  # seconds before the schedule start
        [0, 10**9, 0, 7],  # a stamp far off: spread wide, sorted instead of counted
        [],
    ],
)
def test_groups_give_each_key_its_index_among_the_distinct_ones(keys):
    keys = np.asarray(keys, dtype=np.int64)
    distinct, index = _groups(keys)
    assert distinct.tolist() == sorted(set(keys.tolist()))
    assert distinct[index].tolist() == keys.tolist()


def test_point_buckets_keep_each_buckets_first_instant_count_and_maxima():
    intended = np.array([T0 + 5, T0 + 1, T0 + S + 2, T0 + 3 * S], dtype=np.int64)
    table = pa.table({"intended_ns": intended})
    latency = {
        "publish_ms": pa.array([1.0, 4.0, None, None], pa.float64()),
        "e2e_ms": pa.array([None, 2.0, 3.0, None], pa.float64()),
    }
    points = point_buckets(table, latency, T0, S).to_pylist()
    assert points == [
        {"bucket": 0, "t_ns": T0 + 1, "events": 2, "publish_ms": 4.0, "e2e_ms": 2.0},
        {"bucket": 1, "t_ns": T0 + S + 2, "events": 1, "publish_ms": None, "e2e_ms": 3.0},
        {"bucket": 3, "t_ns": T0 + 3 * S, "events": 1, "publish_ms": None, "e2e_ms": None},
    ]
