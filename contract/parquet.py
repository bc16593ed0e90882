"""Arrow schemas derived from the record contract, and the buffered part-file writer.

Each flush writes one *complete* Parquet file (temp name, then an atomic rename), so a process
that is killed loses at most the rows buffered since its last flush and never leaves a file
without a footer. Owners call `flush()` from a timer at least once a second and on shutdown.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from contract.errors import RecordFileError
from contract.layout import safe_component
from contract.records import Field

_ARROW_TYPES = {
    "string": pa.string(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
}
_TYPE_NAMES = {arrow_type: name for name, arrow_type in _ARROW_TYPES.items()}
# What converting a bad value raises (UnicodeEncodeError is a ValueError, as is ArrowInvalid).
_CONVERSION_ERRORS = (pa.ArrowException, ValueError, TypeError, OverflowError)


def arrow_schema(fields: Sequence[Field]) -> pa.Schema:
    return pa.schema([pa.field(f.name, _ARROW_TYPES[f.type], nullable=f.nullable) for f in fields])


Row = tuple[object, ...]  # one record, its values in contract order

# Rows converted per slice when an event loop flushes: well under a millisecond of GIL time.
BATCH_ROWS = 256


def slices(rows: list[Row], size: int = BATCH_ROWS) -> list[list[Row]]:
    return [rows[start : start + size] for start in range(0, len(rows), size)]


class PartWriter:
    """Rows (tuples in contract order) buffered in memory, written as numbered part files.

    `append` is the hot path: one list append. `take` swaps the buffer out and must run on the
    thread that appends. An event loop then converts the rows with `batch` a slice at a time,
    yielding in between, and hands `write_batches` to a worker thread.
    """

    def __init__(self, directory: Path, fields: Sequence[Field], prefix: str = "part") -> None:
        # The prefix can be a user's choice (`evbench receive --name`) and names every file.
        self.prefix = safe_component("file name prefix", prefix)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.schema = arrow_schema(fields)
        self._dictionary_columns = [f.name for f in fields if f.low_cardinality]
        self.rows: list[Row] = []
        self.rows_written = 0
        self.parts_written = 0
        self._lock = threading.Lock()
        self._next_part = _next_free_part(self.directory, prefix)
        # Beside the records directory, not in it: readers take every file in there as Parquet.
        self.quarantine_path = self.directory.with_name(f"{self.directory.name}-quarantine.jsonl")
        self.rows_quarantined = 0

    def warm_up(self) -> None:
        """Run the flush path once on a throwaway row, in memory: pyarrow initialises lazily
        (over 100 ms on first use here), and that must not land inside a measured step."""
        blank = {"string": "", "int64": 0, "int32": 0, "float64": 0.0, "bool": False}
        batch = self.batch([tuple(blank[_TYPE_NAMES[f.type]] for f in self.schema)])
        self._encode(pa.Table.from_batches([batch], schema=self.schema), pa.BufferOutputStream())

    def _encode(self, table: pa.Table, where: object) -> None:
        pq.write_table(table, where, compression="snappy", use_dictionary=self._dictionary_columns)

    def append(self, row: Row) -> None:
        self.rows.append(row)

    def take(self) -> list[Row]:
        rows, self.rows = self.rows, []
        return rows

    def batch(self, rows: list[Row]) -> pa.RecordBatch:
        """Rows to Arrow. Holds the GIL throughout, so event loops call it on small slices
        (see `slices`) and yield in between instead of stalling for the whole second's rows.

        A row that cannot be converted (a string UTF-8 cannot encode, a value of the wrong type)
        is written to the quarantine file with its reason and left out; the others go on. A
        flush that failed on one row and put everything back would fail on it forever.
        """
        try:
            return self._arrow(rows)
        except _CONVERSION_ERRORS:
            good = []
            bad = []
            for row in rows:
                try:
                    self._arrow([row])
                except _CONVERSION_ERRORS as exc:
                    bad.append((row, f"{type(exc).__name__}: {exc}"))
                else:
                    good.append(row)
            self._quarantine(bad)
            return self._arrow(good)

    def _arrow(self, rows: list[Row]) -> pa.RecordBatch:
        if not rows:
            return pa.RecordBatch.from_pylist([], schema=self.schema)
        columns = zip(*rows, strict=True)
        arrays = [pa.array(col, type=f.type) for col, f in zip(columns, self.schema, strict=True)]
        for array, f in zip(arrays, self.schema, strict=True):
            if array.null_count and not f.nullable:  # caught here, not when the file is written
                raise ValueError(f"{f.name} is null, which the record contract does not allow")
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _quarantine(self, bad: list[tuple[Row, str]]) -> None:
        """One JSON line per row: the reason and the values (escaped, so any string survives)."""
        names = self.schema.names
        lines = [
            json.dumps({"reason": reason, "row": _jsonable(names, row)}) + "\n"
            for row, reason in bad
        ]
        with self.quarantine_path.open("a", encoding="ascii") as out:
            out.writelines(lines)
        self.rows_quarantined += len(bad)

    def write_batches(self, batches: list[pa.RecordBatch]) -> Path | None:
        """One complete part file. Encoding and I/O release the GIL: safe on a worker thread."""
        rows = sum(b.num_rows for b in batches)
        if rows == 0:
            return None
        table = pa.Table.from_batches(batches, schema=self.schema)
        with self._lock:
            number = self._next_part
            path = self.directory / f"{self.prefix}-{number:06d}.parquet"
            # A leading dot hides the temp file from Parquet dataset readers.
            tmp = self.directory / f".{path.name}.tmp"
            try:
                self._encode(table, tmp)
                os.replace(tmp, path)
            except BaseException:
                # Nothing half-written stays (a full disk: it would hold the space the retry
                # needs); the rows go back to the caller, the number to the next try.
                tmp.unlink(missing_ok=True)
                raise
            self._next_part += 1
            self.rows_written += rows
            self.parts_written += 1
        return path

    def write(self, rows: list[Row]) -> Path | None:
        return self.write_batches([self.batch(rows)]) if rows else None

    def flush(self) -> Path | None:
        return self.write(self.take())


def _jsonable(names: list[str], row: Row) -> dict[str, object] | list[str]:
    values = [v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for v in row]
    if len(values) != len(names):
        return [repr(v) for v in row]
    return dict(zip(names, values, strict=True))


def _next_free_part(directory: Path, prefix: str) -> int:
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)\.parquet$")
    numbers = [int(m.group(1)) for p in directory.iterdir() if (m := pattern.match(p.name))]
    return max(numbers, default=-1) + 1


def part_files(directory: Path) -> list[Path]:
    return sorted(p for p in Path(directory).glob("*.parquet") if not p.name.startswith("."))


def check_parts(directory: Path, fields: Sequence[Field]) -> list[Path]:
    """The part files of one record directory, each checked from its footer alone: a truncated
    file or a missing column raises an error that names the file. Footers are read on a thread
    pool (the I/O releases the GIL): an hour-long run has thousands of parts."""
    paths = part_files(directory)
    wanted = [f.name for f in fields]

    def check(path: Path) -> None:
        try:
            names = pq.read_schema(path).names
        except (pa.ArrowException, OSError) as exc:
            raise RecordFileError(f"{path}: unreadable Parquet file ({exc})") from exc
        missing = [name for name in wanted if name not in names]
        if missing:
            raise RecordFileError(f"{path}: missing columns {', '.join(missing)}")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(check, paths))
    return paths


def read_parts(directory: Path, fields: Sequence[Field]) -> pa.Table:
    """Read every part file of one record directory; a bad file is named in the error."""
    schema = arrow_schema(fields)
    tables = []
    for path in check_parts(directory, fields):
        try:
            table = pq.read_table(path, columns=schema.names)
        except (pa.ArrowException, OSError) as exc:
            raise RecordFileError(f"{path}: unreadable Parquet file ({exc})") from exc
        tables.append(table.cast(schema))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)
