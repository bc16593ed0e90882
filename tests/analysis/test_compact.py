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
from analysis.compact import LAYOUT_KEY, Layout, compact_received, compact_sent, read_layout
from analysis.routing import NO_ROUTE, SeqRanges
from contract.errors import RecordFileError
from contract.parquet import PartWriter
from contract.records import RECEIVED_FIELDS, SENT_FIELDS, ReceivedRow, SentRow

T0 = 1_700_000_000 * 1_000_000_000


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


def _held(copy, parts, routed_by=None) -> Layout:
    """The layout the copy's footer holds; it must hold one."""
    found = read_layout(copy, parts, routed_by)
    assert found is not None
    return found


def _ranges(layout: Layout) -> SeqRanges:
    assert layout.ranges is not None
    return layout.ranges


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


def test_the_copy_holds_every_row_in_part_order_by_key(tmp_path, small_groups):
    parts = _sent_parts(tmp_path, STEPS)
    before = {p: p.read_bytes() for p in parts}
    layout = compact_sent(parts, tmp_path / "analysis" / "sent.parquet")
    expected = pa.concat_tables(pq.read_table(p) for p in parts)
    copy = pq.read_table(layout.path)
    assert copy.schema.names == expected.schema.names
    assert Counter(_rows(copy)) == Counter(_rows(expected))
    for step in range(4):
        wanted = pc.equal(expected.column("step"), step)
        held = pc.equal(copy.column("step"), step)
        assert _rows(copy.filter(held)) == _rows(expected.filter(wanted)), step
    assert {p: p.read_bytes() for p in parts} == before  # raw files untouched


def test_each_row_group_holds_one_key_and_the_footer_lists_them(tmp_path, small_groups):
    parts = _sent_parts(tmp_path, STEPS)
    layout = compact_sent(parts, tmp_path / "analysis" / "sent.parquet")
    assert _group_keys(layout.path, "step") == [{k} for k in layout.keys]
    assert set(layout.keys) == {0, 1, 2, 3}
    assert _held(layout.path, parts).keys == layout.keys
    footer = json.loads(pq.read_metadata(layout.path).metadata[LAYOUT_KEY])
    assert tuple(footer["keys"]) == layout.keys


def test_the_footer_keeps_the_steps_ranges(tmp_path):
    parts = _sent_parts(tmp_path, STEPS)
    layout = compact_sent(parts, tmp_path / "analysis" / "sent.parquet")
    ranges = _ranges(layout)
    assert ranges.to_json() == [[0, 0, 2], [1, 3, 9], [2, 8, 14], [3, 13, 15]]
    assert not ranges.routable  # step 1's seq 9 lies past step 2's 8
    found = _ranges(_held(layout.path, parts))
    assert found.to_json() == ranges.to_json() and not found.routable


def test_a_second_call_does_not_rewrite(tmp_path):
    parts = _sent_parts(tmp_path, STEPS)
    first = compact_sent(parts, tmp_path / "analysis" / "sent.parquet")
    stamp = first.path.stat().st_mtime_ns
    again = compact_sent(parts, first.path)
    assert again.keys == first.keys and again.path == first.path
    assert _ranges(again).to_json() == _ranges(first).to_json()
    assert first.path.stat().st_mtime_ns == stamp


def test_a_directory_that_changed_is_compacted_again(tmp_path):
    parts = _sent_parts(tmp_path, [[1, 1], [1]])
    copy = compact_sent(parts, tmp_path / "c" / "sent.parquet").path
    parts += _sent_parts(tmp_path, [[2]])  # collected afterwards
    assert read_layout(copy, parts, None) is None
    layout = compact_sent(parts, copy)
    assert layout.keys == (1, 2)
    assert pq.read_table(copy).column("seq").to_pylist() == [0, 1, 2, 0]


def test_a_replaced_part_is_compacted_again(tmp_path):
    parts = _sent_parts(tmp_path, [[1], [1]])
    copy = compact_sent(parts, tmp_path / "c" / "sent.parquet").path
    PartWriter(parts[1].parent, SENT_FIELDS).write([_sent_row(7, 2), _sent_row(8, 2)])
    os.replace(parts[1].with_name("part-000002.parquet"), parts[1])
    assert compact_sent(parts, copy).keys == (1, 2)
    assert pq.read_table(copy).column("seq").to_pylist() == [0, 7, 8]


@pytest.mark.parametrize("side", ["sent", "received"])
def test_a_bad_part_is_named_and_no_copy_is_left(tmp_path, side):
    good = _sent_parts(tmp_path, [[1]]) if side == "sent" else _received_parts(tmp_path, [["a"]])
    bad = good[0].with_name("part-000099.parquet")
    bad.write_bytes(b"PAR1 torn")
    copy = tmp_path / "c" / f"{side}.parquet"
    with pytest.raises(RecordFileError, match=r"part-000099\.parquet"):
        if side == "sent":
            compact_sent([*good, bad], copy)
        else:
            compact_received([*good, bad], copy, SeqRanges())
    assert not copy.exists() and os.listdir(copy.parent) == []  # nothing half-written stays


RANGES = SeqRanges.from_json([[0, 0, 0], [1, 1, 4], [2, 5, 6]])
DELIVERED = [
    ["x-0-0", "x-0-1", "x-0-2"],
    ["x-0-5", "zz", "x-0-2"],
    ["x-0-3", "x-0-7", "other-0-6", "x-0-4"],
]
ROUTE = {"x-0-0": 0, "x-0-1": 1, "x-0-2": 1, "x-0-3": 1, "x-0-4": 1, "x-0-5": 2, "other-0-6": 2}


def test_received_rows_are_grouped_by_the_step_their_id_names(tmp_path, small_groups):
    parts = _received_parts(tmp_path, DELIVERED)
    layout = compact_received(parts, tmp_path / "c" / "received.parquet", RANGES)
    expected = pa.concat_tables(pq.read_table(p) for p in parts)
    assert Counter(_rows(pq.read_table(layout.path))) == Counter(_rows(expected))
    routed = [{ROUTE.get(i, NO_ROUTE) for i in ids} for ids in _group_keys(layout.path, "event_id")]
    assert routed == [{k} for k in layout.keys]
    assert set(layout.keys) == {NO_ROUTE, 0, 1, 2}  # zz and x-0-7 (past every step): NO_ROUTE
    assert _held(layout.path, parts, RANGES).keys == layout.keys


def test_received_is_routed_again_when_the_ranges_change(tmp_path):
    parts = _received_parts(tmp_path, DELIVERED)
    copy = tmp_path / "c" / "received.parquet"
    first = compact_received(parts, copy, RANGES)
    stamp = copy.stat().st_mtime_ns
    assert compact_received(parts, copy, RANGES).keys == first.keys
    assert copy.stat().st_mtime_ns == stamp  # same ranges: kept
    wider = SeqRanges.from_json([[1, 0, 9]])
    assert read_layout(copy, parts, wider) is None
    assert compact_received(parts, copy, wider).keys == (NO_ROUTE, 1)
    unroutable = SeqRanges.from_json([[1, 0, 9]], ids_carry_seq=False)
    assert read_layout(copy, parts, unroutable) is None
    assert compact_received(parts, copy, unroutable).keys == (NO_ROUTE,)


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
