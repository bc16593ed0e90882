"""The record directories compacted for analysis: one Parquet file per side, same rows.

A run writes a part file per second per side (so an interrupted run keeps all but the last
second); an hour is thousands of files of a few tens of KB, and Spark pays per file opened (a
1k-2k matrix's 4,680 parts took twice as long to read as the same rows in 12 files). On first
analysis each side is copied, part by part in part order, into `analysis/records/<side>.parquet`;
the raw parts are never touched. The copy lists the parts it holds (name, size, modification
time) in its footer, so a directory that changed since (more parts collected, a part replaced)
is compacted again, and a copy cut short (the machine died mid-write) is never taken: it is
written under a temporary name and renamed whole.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from contract.errors import RecordFileError
from contract.parquet import arrow_schema
from contract.records import Field

MANIFEST_KEY = b"evbench.parts"
# Parts read ahead of the writer: bounded memory (an hour's parts are gigabytes), while the
# reading (which releases the GIL) overlaps the writing.
READ_AHEAD = 16
# Rows per row group: Spark splits a file's reading by row group.
ROW_GROUP_ROWS = 1 << 19


def manifest(parts: Sequence[Path]) -> list[list]:
    """What a compacted copy holds: each part's name, size and modification time, in order."""
    stats = [(part.name, part.stat()) for part in parts]
    return [[name, stat.st_size, stat.st_mtime_ns] for name, stat in stats]


def up_to_date(copy: Path, parts: Sequence[Path]) -> bool:
    """Whether `copy` holds exactly these parts as they are now."""
    try:
        metadata = pq.read_schema(copy).metadata or {}
    except (pa.ArrowException, OSError):
        return False
    held = metadata.get(MANIFEST_KEY)
    return held is not None and json.loads(held) == manifest(parts)


def compact(parts: Sequence[Path], fields: Sequence[Field], copy: Path) -> Path:
    """`parts` (checked, in order) into one file at `copy`, unless it already holds them; the
    contract's columns only, in its types. Returns `copy`."""
    if up_to_date(copy, parts):
        return copy
    schema = arrow_schema(fields).with_metadata({MANIFEST_KEY: json.dumps(manifest(parts))})
    copy.parent.mkdir(parents=True, exist_ok=True)
    partial = copy.with_name(f".{copy.name}.{uuid.uuid4().hex}.tmp")

    def read(part: Path) -> pa.Table:
        try:
            return pq.read_table(part, columns=schema.names).cast(schema)
        except (pa.ArrowException, OSError) as exc:
            raise RecordFileError(f"{part}: unreadable Parquet file ({exc})") from exc

    try:
        with (
            pq.ParquetWriter(partial, schema) as writer,
            ThreadPoolExecutor(max_workers=4) as pool,
        ):
            pending: list[pa.Table] = []
            for start in range(0, len(parts), READ_AHEAD):
                pending.extend(pool.map(read, parts[start : start + READ_AHEAD]))
                if sum(t.num_rows for t in pending) >= ROW_GROUP_ROWS:
                    writer.write_table(pa.concat_tables(pending), ROW_GROUP_ROWS)
                    pending = []
            if pending:
                writer.write_table(pa.concat_tables(pending), ROW_GROUP_ROWS)
        os.replace(partial, copy)
    finally:
        partial.unlink(missing_ok=True)
    return copy
