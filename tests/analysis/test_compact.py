"""What the analysis makes of a record directory, the raw parts untouched: the received rows
compacted, laid out by key (analysis.compact); the sent parts indexed by key, read in place
(analysis.sentindex)."""

import os
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis import compact, sentindex
from analysis.compact import (
    ID_SEQ,
    RECEIVED_KEPT,
    Copy,
    Layout,
    chunked,
    compact_received,
    read_layout,
)
from analysis.routing import NO_ROUTE, SeqRanges
from analysis.sentindex import index_sent
from analysis.slices import key_of
from analysis.tasks import read_rows
from contract.errors import RecordFileError
from contract.records import RECEIVED_FIELDS, SENT_FIELDS, ReceivedRow, SentRow
from runtime.parquet import PartWriter, arrow_schema

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
    return Path(path)


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
    return index_sent(parts, directory, T0, **options)


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


def test_the_index_keys_each_row_group_by_the_slices_it_holds(tmp_path):
    parts = _sent_parts(tmp_path, STEPS)
    before = {p: p.read_bytes() for p in parts}
    copy = _sent(parts, tmp_path / "analysis" / "sent")
    assert copy.in_place  # read where they are, through links
    assert all(os.path.samefile(a, b) for a, b in zip(copy.paths(), parts, strict=True))
    for part, layout in zip(parts, copy.chunks, strict=True):
        (steps,) = _group_keys(part, "step")  # a part of one row group here
        rows = pq.read_table(part, columns=["step"]).column(0).to_pylist()
        assert dict(zip(layout.keys, layout.group_rows, strict=True)) == {
            _key(s): rows.count(s) for s in steps
        }
        assert layout.groups(layout.keys) == (0,)
    assert copy.keys == {_key(s) for s in range(4)}
    assert {p: p.read_bytes() for p in parts} == before  # raw files untouched


def test_a_rolled_parts_row_groups_are_keyed_one_by_one(tmp_path):
    # Rows of slices of 2 events, in row groups of 3: groups straddle slices.
    rows = [
        SentRow(f"x-0-{i}", i, 1, False, False, 1, T0 + i * NS, T0, None, 0, None, 0, 8)
        for i in range(7)
    ]
    table = pa.Table.from_pylist([r._asdict() for r in rows], schema=arrow_schema(SENT_FIELDS))
    (tmp_path / "sent").mkdir()
    pq.write_table(table, tmp_path / "sent" / "rolled.parquet", row_group_size=3)
    copy = _sent(sorted((tmp_path / "sent").iterdir()), tmp_path / "c", slice_events=2)
    (layout,) = copy.chunks
    keys = [key_of(1, i) for i in range(4)]  # seconds 0-1, 2-3, 4-5, 6
    assert list(zip(layout.keys, layout.group_rows, layout.group_of or (), strict=True)) == [
        (keys[0], 2, 0),
        (keys[1], 1, 0),
        (keys[1], 1, 1),
        (keys[2], 2, 1),
        (keys[3], 1, 2),
    ]
    assert layout.groups([keys[1]]) == (0, 1) and layout.rows_of([keys[1]]) == 2
    assert _ranges(copy).to_json() == [[k, 2 * i, min(2 * i + 1, 6)] for i, k in enumerate(keys)]


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


def _counting(monkeypatch) -> list:
    """Record the parts the index reads."""
    read: list = []
    original = sentindex._index_part

    def counted(part, *args):
        read.append(part.name)
        return original(part, *args)

    monkeypatch.setattr(sentindex, "_index_part", counted)
    return read


def test_the_index_keeps_the_slices_ranges_and_a_second_call_reads_no_part(tmp_path, monkeypatch):
    parts = _sent_parts(tmp_path, STEPS)
    where = tmp_path / "analysis" / "sent"
    copy = _sent(parts, where)
    expected = [[_key(0), 0, 2], [_key(1), 3, 9], [_key(2), 8, 14], [_key(3), 13, 15]]
    assert _ranges(copy).to_json() == expected  # merged across the parts
    assert not _ranges(copy).routable  # step 1's seq 9 lies past step 2's 8
    stamp = (where / sentindex.INDEX_NAME).stat().st_mtime_ns
    read = _counting(monkeypatch)
    again = _sent(parts, where)
    assert read == [] and (where / sentindex.INDEX_NAME).stat().st_mtime_ns == stamp
    assert _ranges(again).to_json() == expected and not _ranges(again).routable
    assert [c.keys for c in again.chunks] == [c.keys for c in copy.chunks]
    assert sentindex.holds(where, parts)
    other = _sent(parts, where, slice_events=1)  # sliced otherwise: indexed again
    assert len(read) == len(parts) and other.keys == copy.keys


def test_a_grown_directory_indexes_only_its_new_parts(tmp_path, monkeypatch):
    parts = _sent_parts(tmp_path, [[1, 1], [1], [1, 1]])
    _sent(parts, tmp_path / "c")
    parts += _sent_parts(tmp_path, [[2, 2, 2]])  # collected afterwards
    assert not sentindex.holds(tmp_path / "c", parts)
    read = _counting(monkeypatch)
    grown = _sent(parts, tmp_path / "c")
    assert read == [parts[-1].name]
    assert grown.chunks[-1].keys == (_key(2),) and sentindex.holds(tmp_path / "c", parts)


def test_a_replaced_part_is_indexed_again_and_old_chunks_go(tmp_path):
    parts = _sent_parts(tmp_path, [[1], [1]])
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "chunk-00000.parquet").write_bytes(b"an earlier layout's copy")
    _sent(parts, tmp_path / "c")
    PartWriter(parts[1].parent, SENT_FIELDS).write([_sent_row(7, 2), _sent_row(8, 2)])
    os.replace(parts[1].with_name("part-000002.parquet"), parts[1])
    again = _sent(parts, tmp_path / "c")
    assert again.keys == {_key(1), _key(2)}
    assert _ranges(again).to_json() == [[_key(1), 0, 0], [_key(2), 7, 8]]
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [
        sentindex.INDEX_NAME,
        sentindex.PINNED,
    ]


def test_a_part_rolled_away_after_indexing_is_still_read_and_its_link_goes_later(tmp_path):
    # A run still writing rolls its per-second parts into a minute's file and deletes them:
    # the tasks read the parts the index read, through links.
    parts = _sent_parts(tmp_path, [[1, 1], [1], [2, 2]])
    copy = _sent(parts, tmp_path / "c")
    rows = pq.read_table(parts[0]).num_rows
    parts[0].unlink()
    assert pq.read_table(copy.paths()[0]).num_rows == rows
    assert copy.last_intended_ns == T0 + 4  # the last slot's instant, from the index
    _sent(parts[1:], tmp_path / "c")
    assert sorted(p.name for p in (tmp_path / "c" / sentindex.PINNED).iterdir()) == [
        p.name for p in parts[1:]
    ]


def test_a_file_a_task_cannot_read_is_named(tmp_path):
    torn = tmp_path / "sent-w0-000007.parquet"
    torn.write_bytes(b"PAR1 torn")
    with pytest.raises(RecordFileError, match=r"sent-w0-000007\.parquet"):
        read_rows(((str(torn), (0,)),), ("seq",))


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
