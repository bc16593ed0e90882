"""Routing a record to its step from its event id alone (analysis.routing)."""

import numpy as np
import pyarrow as pa
import pytest

from analysis.routing import NO_ROUTE, SeqRanges, id_seqs, ids_carry, routes, runs


@pytest.mark.parametrize(
    ("event_id", "seq"),
    [
        ("a-0-12", 12),
        ("knative-5", 5),
        ("w-0", 0),
        ("run-3-" + "9" * 18, int("9" * 18)),  # the longest tail that fits an int64
        ("x-007", NO_ROUTE),  # leading zeros: not canonical
        ("x-00", NO_ROUTE),
        ("x-12a", NO_ROUTE),
        ("x-", NO_ROUTE),
        ("12", NO_ROUTE),  # no dash
        ("a", NO_ROUTE),
        ("x-" + "1" * 19, NO_ROUTE),  # 19 digits: could overflow an int64
        ("x-1 ", NO_ROUTE),
    ],
)
def test_id_seqs_reads_only_canonical_decimal_tails(event_id, seq):
    assert id_seqs(pa.array([event_id])).tolist() == [seq]


def test_id_seqs_reads_chunked_columns_in_order():
    column = pa.chunked_array([["a-1", "zz"], [], ["b-0-3"]])
    got = id_seqs(column)
    assert got.dtype == np.int64 and got.tolist() == [1, NO_ROUTE, 3]


def _sent(*rows: tuple[str, int, int]) -> pa.Table:
    """(event_id, seq, step) rows."""
    ids, seqs, steps = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {
            "event_id": pa.array(ids, pa.string()),
            "seq": pa.array(seqs, pa.int64()),
            "step": pa.array(steps, pa.int32()),
        }
    )


def _ranges(*parts: list[tuple[str, int, int]]) -> SeqRanges:
    ranges = SeqRanges()
    for part in parts:
        table = _sent(*part)
        ranges.add(table.column("step").to_numpy().astype("int64"), table)
    return ranges


@pytest.mark.parametrize(
    ("parts", "routable"),
    [
        ([[("x-0-0", 0, 0), ("x-0-1", 1, 1), ("x-0-2", 2, 1)]], True),
        ([[("x-0-1", 1, 1)], [("x-0-2", 2, 2)]], True),  # adjacent ranges
        ([[("a", 1, 1), ("b", 2, 2)]], False),  # ids carry no seq
        ([[("x-0-1", 1, 1)], [("b", 2, 2)]], False),  # one part without is enough
        ([[("x-0-5", 1, 1)]], False),  # the id carries another seq than its own
        ([[("x-0-1", 1, 1), ("x-0-5", 5, 1)], [("x-0-3", 3, 2)]], False),  # overlap
        ([[("x-0-1", 1, 1), ("x-0-2", 2, 2), ("x-0-3", 3, 1)]], False),  # interleaved
        ([[], []], True),  # nothing sent: nothing to route either
    ],
)
def test_seq_ranges_are_routable_only_when_ids_carry_disjoint_seqs(parts, routable):
    assert _ranges(*parts).routable is routable


def test_seq_ranges_gather_each_steps_range_across_parts_and_round_trip():
    ranges = _ranges(
        [("x-0-4", 4, 1), ("x-0-2", 2, 1)],
        [("x-0-3", 3, 1), ("x-0-9", 9, 2)],
        [("x-0-7", 7, 2)],
    )
    assert ranges.to_json() == [[1, 2, 4], [2, 7, 9]]
    again = SeqRanges.from_json(ranges.to_json(), ranges.ids_carry_seq)
    assert (again.low, again.high, again.routable) == (ranges.low, ranges.high, True)
    assert not SeqRanges.from_json(ranges.to_json(), ids_carry_seq=False).routable


def test_merged_ranges_are_the_union_of_each_chunks():
    first = _ranges([("x-0-4", 4, 1), ("x-0-2", 2, 1)])
    second = _ranges([("x-0-3", 3, 1), ("x-0-9", 9, 2)], [("x-0-7", 7, 2)])
    first.merge(second)
    assert first.to_json() == [[1, 2, 4], [2, 7, 9]]
    first.merge(_ranges([("x-0-1", 5, 3)]))  # an id that does not carry its seq
    assert not first.ids_carry_seq


ROUTED = SeqRanges.from_json([[0, 0, 0], [1, 1, 4], [2, 10, 12]])


@pytest.mark.parametrize(
    ("event_id", "route"),
    [
        ("x-0-0", 0),
        ("x-0-1", 1),
        ("x-0-4", 1),
        ("other-0-3", 1),  # the route reads the seq only; matching the id is the task's
        ("x-0-5", NO_ROUTE),  # in the gap between two steps
        ("x-0-9", NO_ROUTE),
        ("x-0-10", 2),
        ("x-0-12", 2),
        ("x-0-13", NO_ROUTE),  # beyond the last step
        ("zz", NO_ROUTE),
        ("x-0-007", NO_ROUTE),
    ],
)
def test_routes_name_the_step_whose_range_holds_the_seq(event_id, route):
    assert routes(pa.array([event_id]), ROUTED).tolist() == [route]


@pytest.mark.parametrize(
    "ranges",
    [
        SeqRanges.from_json([[1, 1, 4]], ids_carry_seq=False),
        SeqRanges.from_json([[1, 1, 4], [2, 3, 6]]),  # overlapping
        SeqRanges(),  # no step at all
    ],
)
def test_routes_are_none_when_the_ranges_are_not_routable(ranges):
    got = routes(pa.array(["x-0-1", "x-0-3", "zz"]), ranges)
    assert got.dtype == np.int64 and got.tolist() == [NO_ROUTE] * 3


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ([2, 1, 2, NO_ROUTE, 1], [(NO_ROUTE, [3]), (1, [1, 4]), (2, [0, 2])]),
        ([5, 5, 5], [(5, [0, 1, 2])]),
        ([], []),
    ],
)
def test_runs_split_rows_by_key_keeping_their_order(keys, expected):
    got = [(key, rows.tolist()) for key, rows in runs(np.array(keys, dtype=np.int64))]
    assert got == expected


@pytest.mark.parametrize(
    ("ids", "seqs"),
    [
        (["r-0-5", "r-0-6", "r-0-7"], [5, 6, 7]),
        (["r-0-5", "r-1-6", "q-7"], [5, 6, 7]),  # other prefixes: each still carries its slot
        (["r-0-5", "r-0-06"], [5, 6]),  # a leading zero is not canonical
        (["r-0-5", "r-0-7"], [5, 6]),
        (["r-0-5", "r-1-7"], [5, 6]),  # another prefix, the wrong slot
        (["5", "r-0-6"], [5, 6]),  # the first id has no dash
        (["r-05", "r-6"], [5, 6]),
        (["a-" + "1" * 19], [int("1" * 18)]),
        ([], []),
    ],
)
def test_ids_carry_their_seqs_as_the_pattern_reads_them(ids, seqs):
    column = pa.array(ids, pa.string())
    expected = bool(np.array_equal(id_seqs(column), np.array(seqs, dtype=np.int64)))
    assert ids_carry(column, np.array(seqs, dtype=np.int64)) is expected
    assert ids_carry(pa.chunked_array([column]), np.array(seqs, dtype=np.int64)) is expected
