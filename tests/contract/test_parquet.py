"""The part-file writer: a row that cannot be encoded never blocks the others."""

import json

from contract.records import RECEIVED_FIELDS
from runtime.parquet import PartWriter, read_parts


def _row(event_id: object, received_ns: object = 1) -> tuple:
    return (event_id, received_ns, "rx", 10, "ce", "t", "s", "/")


def test_unencodable_rows_go_to_quarantine_and_the_rest_is_written(tmp_path):
    writer = PartWriter(tmp_path / "received", RECEIVED_FIELDS, prefix="rx")
    rows = [_row("a"), _row("\ud800"), _row("b"), _row("c", "not a number"), _row("d")]
    writer.rows.extend(rows)
    assert writer.flush() is not None
    written = read_parts(tmp_path / "received", RECEIVED_FIELDS).column("event_id").to_pylist()
    assert written == ["a", "b", "d"]
    assert writer.rows_written == 3 and writer.rows_quarantined == 2
    lines = [json.loads(line) for line in writer.quarantine_path.read_text().splitlines()]
    assert writer.quarantine_path.parent == tmp_path  # beside received/, not in it
    assert [line["row"]["event_id"] for line in lines] == ["\ud800", "c"]
    assert "surrogates not allowed" in lines[0]["reason"]
    # The next flush is not held back by the rows before it.
    writer.rows.append(_row("e"))
    writer.flush()
    assert writer.rows_written == 4


def test_a_flush_of_only_bad_rows_writes_no_part_and_quarantines_them(tmp_path):
    writer = PartWriter(tmp_path / "received", RECEIVED_FIELDS, prefix="rx")
    writer.rows.append(_row(None))  # event_id is not nullable in the contract
    writer.rows.append(_row("\udfff"))
    assert writer.flush() is None
    assert writer.rows_written == 0 and writer.parts_written == 0
    assert writer.rows_quarantined == 2
    reasons = [json.loads(line)["reason"] for line in writer.quarantine_path.open()]
    assert "event_id is null" in reasons[0] and "surrogates" in reasons[1]
