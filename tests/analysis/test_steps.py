"""The step stage's merges on the driver (pure): what two steps' partial rows make together."""

import pyarrow as pa
import pytest

from analysis.steps import POINT_ARROW, merge_points, merge_seconds

S = 1_000_000_000
T0 = 1_700_000_000 * S


def _second(second, step=None, rate=None, **counts):
    row = dict.fromkeys(("scheduled", "send_failures", "lost", "sent", "acked", "delivered"), 0)
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
