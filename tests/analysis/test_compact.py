"""Compacting a record directory for analysis: the same rows, the raw parts untouched."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.compact import compact, up_to_date
from contract.parquet import RecordFileError, arrow_schema
from contract.records import RECEIVED_FIELDS

SCHEMA = arrow_schema(RECEIVED_FIELDS)


def _part(directory, number, ids):
    rows = [
        {
            "event_id": i,
            "received_ns": n,
            "receiver": "rx",
            "payload_bytes": 8192,
            "ce_id": i,
            "ce_type": "t",
            "ce_source": "s",
        }
        for n, i in enumerate(ids)
    ]
    path = directory / f"receiver-{number:06d}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
    return path


def test_the_copy_holds_every_row_in_part_order_and_the_parts_stay(tmp_path):
    parts = [_part(tmp_path, n, [f"e{n}-{i}" for i in range(n + 1)]) for n in range(40)]
    before = {p: p.read_bytes() for p in parts}
    copy = compact(parts, RECEIVED_FIELDS, tmp_path / "analysis" / "received.parquet")
    expected = pa.concat_tables(pq.read_table(p) for p in parts)
    assert pq.read_table(copy).drop_columns([]).to_pylist() == expected.to_pylist()
    assert {p: p.read_bytes() for p in parts} == before  # raw files untouched
    assert up_to_date(copy, parts)
    stamp = copy.stat().st_mtime_ns
    assert compact(parts, RECEIVED_FIELDS, copy) == copy and copy.stat().st_mtime_ns == stamp


def test_a_directory_that_changed_is_compacted_again(tmp_path):
    parts = [_part(tmp_path, n, [f"a{n}"]) for n in range(3)]
    copy = compact(parts, RECEIVED_FIELDS, tmp_path / "c" / "received.parquet")
    parts.append(_part(tmp_path, 3, ["late"]))  # collected afterwards
    assert not up_to_date(copy, parts)
    compact(parts, RECEIVED_FIELDS, copy)
    assert pq.read_table(copy).column("event_id").to_pylist() == ["a0", "a1", "a2", "late"]


def test_a_bad_part_is_named_and_no_copy_is_left(tmp_path):
    parts = [_part(tmp_path, 0, ["x"]), tmp_path / "receiver-000001.parquet"]
    parts[1].write_bytes(b"PAR1 torn")
    copy = tmp_path / "c" / "received.parquet"
    with pytest.raises(RecordFileError, match=r"receiver-000001\.parquet"):
        compact(parts, RECEIVED_FIELDS, copy)
    assert not copy.exists() and os.listdir(copy.parent) == []  # nothing half-written stays
