"""What a records server offers of a directory whose parts roll: the rolled files and the parts
none holds, never a part twice nor a file being written (runtime.recordshare, by the rule of
contract.partnames)."""

from __future__ import annotations

from contract.records import RECEIVED_FIELDS
from runtime.parquet import PartWriter
from runtime.recordshare import PREFIX, listing, resolve


def _rows(first: int, count: int) -> list[tuple]:
    return [
        (f"e-{i}", 1_000 + i, "rx", 10, f"e-{i}", "t", "s", "/")
        for i in range(first, first + count)
    ]


def test_a_listing_leaves_out_parts_a_rolled_file_holds_and_hidden_files(tmp_path):
    out = tmp_path / "received"
    writer = PartWriter(out, RECEIVED_FIELDS, prefix="rx", roll_s=3600)
    for first in (0, 2):
        writer.write(_rows(first, 2))
    leftover = (out / "rx-000000.parquet").read_bytes()
    writer.roll()
    (out / "rx-000000.parquet").write_bytes(leftover)  # a kill before the deletes left it
    writer.write(_rows(4, 2))  # part 2, with a roll open behind it (a hidden file)
    assert any(p.name.startswith(".") for p in out.iterdir())
    offered = [f["path"] for f in listing(tmp_path)["files"]]
    assert offered == ["received/rx-000000-000001.rolled.parquet", "received/rx-000002.parquet"]
    assert resolve(tmp_path, f"{PREFIX}/received/rx-000000.parquet") is None
    assert resolve(tmp_path, f"{PREFIX}/received/.rx-000002.rolling.tmp") is None
    found = resolve(tmp_path, f"{PREFIX}/received/rx-000000-000001.rolled.parquet")
    assert found == out / "rx-000000-000001.rolled.parquet"
