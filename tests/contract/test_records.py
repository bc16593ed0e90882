import typing
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contract.errors import RecordFileError
from contract.records import (
    RECEIVED_FIELDS,
    ROW_TYPES,
    SENT_FIELDS,
    ReceivedRow,
    SentRow,
)
from runtime.parquet import PartWriter, arrow_schema, part_files, read_parts

CONTRACT_TYPES = {
    "string": pa.string(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
}


@pytest.mark.parametrize("fields", list(ROW_TYPES.values()))
def test_arrow_schema_is_the_contract(fields):
    schema = arrow_schema(fields)
    assert [(f.name, f.type, f.nullable) for f in schema] == [
        (f.name, CONTRACT_TYPES[f.type], f.nullable) for f in fields
    ]


def test_units_are_in_the_names():
    for field in (f for fields in ROW_TYPES.values() for f in fields):
        if field.name.endswith(("_ns", "_bytes", "_per_s")):
            assert field.type in ("int64", "int32")
    names = {f.name for f in SENT_FIELDS}
    assert {"intended_ns", "sent_ns", "ack_ns", "target_rate_per_s", "payload_bytes"} <= names


def _sent_row(seq: int, ack: int | None = 3) -> SentRow:
    return SentRow(
        event_id=f"t-0-{seq}",
        seq=seq,
        step=1,
        warmup=False,
        decoy=False,
        target_rate_per_s=100,
        intended_ns=1,
        sent_ns=2,
        ack_ns=ack,
        status=202 if ack else 0,
        error=None if ack else "boom",
        worker=0,
        payload_bytes=8192,
    )


PYTHON_TYPES = {"string": str, "int64": int, "int32": int, "float64": float, "bool": bool}


@pytest.mark.parametrize("row_type", list(ROW_TYPES), ids=lambda t: t.__name__)
def test_each_named_row_is_its_field_list(row_type):
    fields = ROW_TYPES[row_type]
    hints = typing.get_type_hints(row_type)
    assert row_type._fields == tuple(f.name for f in fields)
    for field in fields:
        expected = PYTHON_TYPES[field.type]
        if field.nullable:
            expected = expected | None
        assert hints[field.name] == expected, f"{row_type.__name__}.{field.name}"


def test_a_named_row_reads_back_by_name(tmp_path):
    writer = PartWriter(tmp_path, SENT_FIELDS)
    writer.append(_sent_row(7, ack=None))
    writer.flush()
    (row,) = read_parts(tmp_path, SENT_FIELDS).to_pylist()
    assert row == _sent_row(7, ack=None)._asdict()


def test_each_flush_is_a_complete_part_and_rows_survive(tmp_path):
    writer = PartWriter(tmp_path, SENT_FIELDS, prefix="sent-w0")
    for seq in range(5):
        writer.append(_sent_row(seq))
    first = Path(writer.flush())
    writer.append(_sent_row(5, ack=None))
    second = Path(writer.flush())
    assert writer.flush() is None  # nothing buffered, nothing written
    assert [p.name for p in part_files(tmp_path)] == [first.name, second.name]
    table = read_parts(tmp_path, SENT_FIELDS)
    assert table.column("seq").to_pylist() == list(range(6))
    assert table.column("ack_ns").to_pylist()[-1] is None
    assert writer.rows_written == 6 and writer.parts_written == 2
    # a second writer into the same directory never overwrites
    again = PartWriter(tmp_path, SENT_FIELDS, prefix="sent-w0")
    again.append(_sent_row(6))
    assert Path(again.flush()).name not in {first.name, second.name}
    assert read_parts(tmp_path, SENT_FIELDS).num_rows == 7


def test_truncated_file_is_named(tmp_path):
    writer = PartWriter(tmp_path, SENT_FIELDS)
    writer.append(_sent_row(0))
    path = Path(writer.flush())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RecordFileError, match=path.name):
        read_parts(tmp_path, SENT_FIELDS)


def test_missing_columns_are_named(tmp_path):
    pq.write_table(pa.table({"event_id": ["x"]}), tmp_path / "part-000000.parquet")
    with pytest.raises(RecordFileError, match="missing columns received_ns"):
        read_parts(tmp_path, RECEIVED_FIELDS)


def test_empty_directory_reads_as_empty_table(tmp_path):
    assert read_parts(tmp_path, RECEIVED_FIELDS).num_rows == 0


def test_a_field_added_later_is_nullable_and_reads_null_from_older_files(tmp_path):
    added = [f for fields in ROW_TYPES.values() for f in fields if f.added_later]
    assert added and all(f.nullable for f in added)  # an older file has no value to give
    # A received part written before fan-out: every column but `subscriber`.
    older = [f for f in RECEIVED_FIELDS if f.name != "subscriber"]
    row = {"event_id": "a", "received_ns": 5, "receiver": "rx", "payload_bytes": 8}
    row |= {"ce_id": "a", "ce_type": "t", "ce_source": "s"}
    pq.write_table(pa.Table.from_pylist([row], arrow_schema(older)), tmp_path / "old-0.parquet")
    writer = PartWriter(tmp_path, RECEIVED_FIELDS, prefix="new")
    writer.append(ReceivedRow("b", 6, "rx", 8, "b", "t", "s", "/subscribers/2"))
    writer.flush()
    rows = read_parts(tmp_path, RECEIVED_FIELDS).to_pylist()
    assert {r["event_id"]: r["subscriber"] for r in rows} == {"a": None, "b": "/subscribers/2"}
    assert read_parts(tmp_path, RECEIVED_FIELDS).schema == arrow_schema(RECEIVED_FIELDS)
