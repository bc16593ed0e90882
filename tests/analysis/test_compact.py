"""Compacting a record directory for analysis: the same rows, laid out by key, the raw parts
untouched (analysis.compact)."""

import json
import os
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analysis import compact
from analysis.compact import (
    ID_SEQ,
    LAYOUT_KEY,
    RECEIVED_KEPT,
    SENT_KEPT,
    Copy,
    Layout,
    chunked,
    compact_received,
    compact_sent,
    holds,
    read_layout,
)
from analysis.routing import NO_ROUTE, SeqRanges
from analysis.slices import SLICE_EVENTS, key_of
from contract.errors import RecordFileError
from contract.parquet import PartWriter
from contract.records import RECEIVED_FIELDS, SENT_FIELDS, ReceivedRow, SentRow

NS = 1_000_000_000
T0 = 1_700_000_000 * NS


def _sent_row(seq: int, step: int) -> SentRow:
    return SentRow(
        f"x-0-{seq}", seq, step, step == 0, False, 10, T0 + seq, T0 + seq, None, 0, None, 0, 8
    )


def _received_row(event_id: str, n: int) -> ReceivedRow:
    return ReceivedRow(event_id, T0 + n, "rx", 8, event_id, "t", "s")


def _written(writer: PartWriter, rows: list) -> Path:
    path = writer.write(rows)
    assert path is not None  # rows are never empty here
    return path


def _sent_parts(directory, steps_per_part):
    """A sent part per list of steps, a row each, seqs in schedule order."""
    writer, seq, parts = PartWriter(directory / "sent", SENT_FIELDS), 0, []
    for steps in steps_per_part:
        parts.append(_written(writer, [_sent_row(seq + i, step) for i, step in enumerate(steps)]))
        seq += len(steps)
    return parts


def _received_parts(directory, ids_per_part):
    writer = PartWriter(directory / "received", RECEIVED_FIELDS, prefix="receiver")
    return [_written(writer, [_received_row(i, n) for n, i in enumerate(x)]) for x in ids_per_part]


# Steps interleave within and across parts, as deliveries of two steps do at a boundary.
STEPS = [[0, 0], [0, 1], [1, 1, 1], [1, 2, 1], [2, 2], [2], [3, 2, 3]]


def _held(copy, parts, expected) -> Layout:
    """The layout the chunk's footer holds; it must hold one."""
    found = read_layout(copy, parts, expected)
    assert found is not None
    return found


def _ranges(copy: Copy) -> SeqRanges:
    assert copy.ranges is not None
    return copy.ranges


def _sent(parts, directory, **options) -> Copy:
    return compact_sent(parts, directory, T0, **options)


def _table(copy: Copy) -> pa.Table:
    return pa.concat_tables(pq.read_table(path) for path in copy.paths())


def _rows(table: pa.Table) -> list[tuple]:
    return [tuple(row.values()) for row in table.to_pylist()]


def _group_keys(path, column) -> list[set]:
    """The distinct values of `column` in each row group of `path`."""
    found = pq.ParquetFile(path)
    return [
        set(found.read_row_group(i, columns=[column]).column(0).to_pylist())
        for i in range(found.num_row_groups)
    ]


@pytest.fixture(params=[False, True], ids=["one-flush", "small-row-groups"])
def small_groups(request, monkeypatch):
    """Also run with row groups of at most 2 rows and a buffer of 3, so that a key is flushed
    more than once and keys are flushed before the end."""
    if request.param:
        monkeypatch.setattr(compact, "ROW_GROUP_ROWS", 2)
        monkeypatch.setattr(compact, "BUFFERED_ROWS", 3)


def _key(step: int) -> int:
    return key_of(step, 0)  # every test row is due in the schedule's first second


@pytest.mark.parametrize("chunk_rows", [3, 1000])
def test_the_chunks_hold_every_row_in_part_order_by_key(tmp_path, small_groups, chunk_rows):
    parts = _sent_parts(tmp_path, STEPS)
    before = {p: p.read_bytes() for p in parts}
    copy = _sent(parts, tmp_path / "analysis" / "sent", chunk_rows=chunk_rows)
    assert len(copy.chunks) == (6 if chunk_rows == 3 else 1)  # parts never split
    expected = pa.concat_tables(pq.read_table(p, columns=list(SENT_KEPT)) for p in parts)
    held = _table(copy)
    assert held.schema.names == expected.schema.names == list(SENT_KEPT)  # what tasks read
    assert Counter(_rows(held)) == Counter(_rows(expected))
    for step in range(4):
        wanted = pc.equal(expected.column("step"), step)
        mine = pc.equal(held.column("step"), step)
        assert _rows(held.filter(mine)) == _rows(expected.filter(wanted)), step
    assert {p: p.read_bytes() for p in parts} == before  # raw files untouched


def test_each_row_group_holds_one_key_and_the_footer_lists_them(tmp_path, small_groups):
    parts = _sent_parts(tmp_path, STEPS)
    (chunk,) = _sent(parts, tmp_path / "analysis" / "sent").chunks
    assert [{_key(s) for s in steps} for steps in _group_keys(chunk.path, "step")] == [
        {k} for k in chunk.keys
    ]
    assert set(chunk.keys) == {_key(s) for s in range(4)}
    assert sum(chunk.group_rows) == sum(len(s) for s in STEPS)
    assert _held(chunk.path, parts, {"sliced_by": [T0, SLICE_EVENTS]}).keys == chunk.keys
    footer = json.loads(pq.read_metadata(chunk.path).metadata[LAYOUT_KEY])
    assert tuple(footer["keys"]) == chunk.keys


def test_a_step_is_sliced_in_whole_seconds_bounded_in_events(tmp_path):
    # 10/s for 5 s, at most 20 events a slice: slices of 2 whole seconds, the last of one.
    rows = [
        SentRow(f"x-0-{i}", i, 1, False, False, 10, T0 + i * NS // 10, T0, None, 0, None, 0, 8)
        for i in range(50)
    ]
    part = _written(PartWriter(tmp_path / "sent", SENT_FIELDS), rows)
    copy = _sent([part], tmp_path / "c", slice_events=20)
    assert sorted(copy.keys) == [key_of(1, 0), key_of(1, 1), key_of(1, 2)]
    assert _ranges(copy).to_json() == [
        [key_of(1, 0), 0, 19],
        [key_of(1, 1), 20, 39],
        [key_of(1, 2), 40, 49],
    ]
    assert _ranges(copy).routable


def test_the_footer_keeps_the_slices_ranges(tmp_path):
    parts = _sent_parts(tmp_path, STEPS)
    copy = _sent(parts, tmp_path / "analysis" / "sent", chunk_rows=5)
    expected = [[_key(0), 0, 2], [_key(1), 3, 9], [_key(2), 8, 14], [_key(3), 13, 15]]
    assert _ranges(copy).to_json() == expected  # merged across the chunks
    assert not _ranges(copy).routable  # step 1's seq 9 lies past step 2's 8
    again = _sent(parts, tmp_path / "analysis" / "sent", chunk_rows=5)  # from the footers
    assert _ranges(again).to_json() == expected and not _ranges(again).routable


def test_a_second_call_does_not_rewrite(tmp_path):
    parts = _sent_parts(tmp_path, STEPS)
    first = _sent(parts, tmp_path / "analysis" / "sent", chunk_rows=5)
    stamps = [p.stat().st_mtime_ns for p in first.paths()]
    again = _sent(parts, tmp_path / "analysis" / "sent", chunk_rows=5)
    assert [c.keys for c in again.chunks] == [c.keys for c in first.chunks]
    assert [p.stat().st_mtime_ns for p in again.paths()] == stamps


def test_a_grown_directory_compacts_only_its_new_chunks(tmp_path):
    parts = _sent_parts(tmp_path, [[1, 1], [1], [1, 1]])
    first = _sent(parts, tmp_path / "c", chunk_rows=3)
    stamps = [p.stat().st_mtime_ns for p in first.paths()]
    parts += _sent_parts(tmp_path, [[2, 2, 2]])  # collected afterwards: a chunk of its own
    assert not holds(tmp_path / "c", parts)
    grown = _sent(parts, tmp_path / "c", chunk_rows=3)
    assert [p.stat().st_mtime_ns for p in grown.paths()][:2] == stamps  # kept
    assert len(grown.chunks) == 3 and grown.chunks[2].keys == (_key(2),)
    assert holds(tmp_path / "c", parts)


def test_a_replaced_part_is_compacted_again_and_stale_chunks_go(tmp_path):
    parts = _sent_parts(tmp_path, [[1], [1]])
    copy = _sent(parts, tmp_path / "c", chunk_rows=1)
    assert len(copy.chunks) == 2
    PartWriter(parts[1].parent, SENT_FIELDS).write([_sent_row(7, 2), _sent_row(8, 2)])
    os.replace(parts[1].with_name("part-000002.parquet"), parts[1])
    again = _sent(parts, tmp_path / "c", chunk_rows=10)
    assert len(again.chunks) == 1 and again.keys == {_key(1), _key(2)}
    assert _table(again).column("seq").to_pylist() == [0, 7, 8]
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["chunk-00000.parquet"]


@pytest.mark.parametrize("side", ["sent", "received"])
def test_a_bad_part_is_named_and_no_copy_is_left(tmp_path, side):
    good = _sent_parts(tmp_path, [[1]]) if side == "sent" else _received_parts(tmp_path, [["a"]])
    bad = good[0].with_name("part-000099.parquet")
    bad.write_bytes(b"PAR1 torn")
    where = tmp_path / "c" / side
    with pytest.raises(RecordFileError, match=r"part-000099\.parquet"):
        if side == "sent":
            _sent([*good, bad], where)
        else:
            compact_received([*good, bad], where, SeqRanges())
    assert not where.exists() or os.listdir(where) == []  # nothing half-written stays


RANGES = SeqRanges.from_json([[0, 0, 0], [1, 1, 4], [2, 5, 6]])
DELIVERED = [
    ["x-0-0", "x-0-1", "x-0-2"],
    ["x-0-5", "zz", "x-0-2"],
    ["x-0-3", "x-0-7", "other-0-6", "x-0-4"],
]
ROUTE = {"x-0-0": 0, "x-0-1": 1, "x-0-2": 1, "x-0-3": 1, "x-0-4": 1, "x-0-5": 2, "other-0-6": 2}


@pytest.mark.parametrize("chunk_rows", [3, 1000])
def test_received_rows_are_grouped_by_the_slice_their_id_names(tmp_path, small_groups, chunk_rows):
    parts = _received_parts(tmp_path, DELIVERED)
    copy = compact_received(parts, tmp_path / "c", RANGES, chunk_rows=chunk_rows)
    expected = pa.concat_tables(pq.read_table(p, columns=list(RECEIVED_KEPT)) for p in parts)
    found = _table(copy)
    assert Counter(_rows(found.drop_columns([ID_SEQ.name]))) == Counter(_rows(expected))
    # Beside the contract's columns, the slot each id names, NO_ROUTE where none.
    ids, seqs = (found.column(name).to_pylist() for name in ("event_id", ID_SEQ.name))
    slots = dict(zip(ids, seqs, strict=True))
    assert slots == {**{f"x-0-{i}": i for i in (0, 1, 2, 3, 4, 5, 7)}, "other-0-6": 6, "zz": -1}
    for chunk in copy.chunks:
        routed = [
            {ROUTE.get(i, NO_ROUTE) for i in ids} for ids in _group_keys(chunk.path, "event_id")
        ]
        assert routed == [{k} for k in chunk.keys]
    assert copy.keys == {NO_ROUTE, 0, 1, 2}  # zz and x-0-7 (past every slice): NO_ROUTE


def test_received_is_routed_again_when_the_ranges_change(tmp_path):
    parts = _received_parts(tmp_path, DELIVERED)
    first = compact_received(parts, tmp_path / "c", RANGES)
    (path,) = first.paths()
    stamp = path.stat().st_mtime_ns
    assert compact_received(parts, tmp_path / "c", RANGES).keys == first.keys
    assert path.stat().st_mtime_ns == stamp  # same ranges: kept
    wider = SeqRanges.from_json([[1, 0, 9]])
    assert compact_received(parts, tmp_path / "c", wider).keys == {NO_ROUTE, 1}
    unroutable = SeqRanges.from_json([[1, 0, 9]], ids_carry_seq=False)
    assert compact_received(parts, tmp_path / "c", unroutable).keys == {NO_ROUTE}


@pytest.mark.parametrize(
    ("rows", "limit", "chunks"),
    [
        ([], 4, []),
        ([1, 1, 1], 4, [range(0, 3)]),
        ([2, 2, 2], 4, [range(0, 2), range(2, 3)]),
        ([5, 1, 1], 4, [range(0, 1), range(1, 3)]),  # a part larger than the limit: alone
        ([1, 5, 1], 4, [range(0, 1), range(1, 2), range(2, 3)]),
    ],
)
def test_chunked_groups_consecutive_parts_never_splitting_one(rows, limit, chunks):
    assert chunked(rows, limit) == chunks


def test_records_that_cannot_be_compacted_in_place_are_named(tmp_path):
    # A system directory the analysis cannot write into (here: analysis/ is a file, which no
    # user can mkdir under, root included) is named, with what to check; nothing is analysed,
    # as its own files could not be written there either.
    from analysis.inputs import check_inputs, compacted
    from contract.errors import EvbenchError
    from tests.analysis.crafted import craft

    sut, _ = craft(tmp_path / "runs")
    (sut / "analysis").write_text("not a directory")
    with pytest.raises(EvbenchError, match=r"analysis/records: cannot write the compacted"):
        compacted(check_inputs(sut))


def test_footers_are_read_again_once_a_compacted_part_changed(tmp_path):
    # A compacted run's parts are not re-read (the copy's manifest vouches for them) until one
    # changes: then its footer is checked, and a torn one named.
    from analysis.inputs import check_inputs, compacted
    from tests.analysis.crafted import craft

    sut, _ = craft(tmp_path / "runs")
    compacted(check_inputs(sut))
    assert check_inputs(sut).sent_parts  # as compacted: taken on the manifest's word
    victim = sorted((sut / "sent").glob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(RecordFileError, match=victim.name):
        check_inputs(sut)
