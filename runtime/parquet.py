"""Arrow schemas derived from the record contract, and the buffered part-file writer.

Each flush writes one *complete* Parquet file (temp name, then an atomic rename), so a process
that is killed loses at most the rows buffered since its last flush and never leaves a file
without a footer. Owners call `flush()` from a timer at least once a second and on shutdown.

A writer given `roll_s` also rolls: each part's rows go, as one row group, into a hidden file
held open; every `roll_s` seconds that file gets its footer, is renamed to the rolled name of
the parts it holds (contract.partnames) and those parts are deleted. A day at one flush per
second leaves 86,400 / roll_s files instead of 86,400, yet a kill still loses only what the
parts would: the open rolled file is a dot-name, never read, and `part_files` never counts a
part a rolled file holds. The roll costs a second encoding of each part's rows on the writer's
thread (no burst, no rows kept in memory: an open Parquet writer keeps only row-group
metadata); the owner calls `roll()` on a normal stop.

The writer names its files with strings (`os.path.join`), never `pathlib.Path`: Python 3.11's
pathlib interns every component of a path it builds, and a name made once a second (and its
temp name) leaves a dead entry in the interpreter's table of interned strings; ~6,700 of them
beside its ~37,000 live strings fill it. It then doubles: a 0.9 MiB table became 1.8 MiB in
the sender and the receiver ~37 minutes into an hour at 2,000/s, +0.9 MiB each, the step left
in their hour's RSS slope (`benchmarks/soak.py`). Paths the writer hands back are strings for
the same reason.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from contract import partnames
from contract.errors import EvbenchError, RecordFileError
from contract.layout import safe_component
from contract.records import Field
from runtime.allocator import HEAP

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


def dictionary_columns(fields: Sequence[Field]) -> list[str]:
    """The columns Parquet dictionary-encodes: the low-cardinality ones. Encoding the unique
    ones (ids, stamps) only costs time before it falls back, and reads slower too (measured on
    4.1 M sent rows: written in 0.53 s rather than 1.03 s, read in 0.58 s rather than 1.38 s)."""
    return [f.name for f in fields if f.low_cardinality]


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

    def __init__(
        self,
        directory: Path,
        fields: Sequence[Field],
        prefix: str = "part",
        roll_s: float | None = None,
    ) -> None:
        # The prefix can be a user's choice (`evbench receive --name`) and names every file.
        self.prefix = safe_component("file name prefix", prefix)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._dir = os.fspath(self.directory)  # the base of every name made per part
        self.schema = arrow_schema(fields)
        self._dictionary_columns = dictionary_columns(fields)
        self.rows: list[Row] = []
        self.rows_written = 0
        self.parts_written = 0
        # Seconds between rolls (see the module's doc); None: one file per flush, kept.
        self.roll_s = roll_s
        self.rolls_written = 0
        self.roll_errors = 0  # rolls given up (a full disk): their parts stay, as parts
        self._roll: _Roll | None = None
        self._lock = threading.Lock()
        # Each file says what it holds, this writer's parts by number (contract.partnames):
        # a copy of it under another name is then read once.
        self.writer_id = secrets.token_hex(8)
        names = os.listdir(self.directory)
        self._next_part = partnames.next_number(names, self.prefix)
        _tidy(self.directory, partnames.stale_names(names, self.prefix))
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

    def write_batches(self, batches: list[pa.RecordBatch]) -> str | None:
        """One complete part file (and, when rolling, its rows into the open roll, after the
        part is safe), its path returned. Encoding and I/O release the GIL: safe on a worker
        thread."""
        rows = sum(b.num_rows for b in batches)
        if rows == 0:
            return None
        table = pa.Table.from_batches(batches, schema=self.schema)
        with self._lock:
            number = self._next_part
            name = partnames.part_name(self.prefix, number)
            path = os.path.join(self._dir, name)
            # A leading dot hides the temp file from Parquet dataset readers.
            tmp = os.path.join(self._dir, f".{name}.tmp")
            held = partnames.Identity(self.writer_id, number, number)
            try:
                self._encode(table.replace_schema_metadata(partnames.identity_metadata(held)), tmp)
                os.replace(tmp, path)
            except BaseException:
                # Nothing half-written stays (a full disk: it would hold the space the retry
                # needs); the rows go back to the caller, the number to the next try.
                _remove(tmp)
                raise
            self._next_part += 1
            self.rows_written += rows
            self.parts_written += 1
            if self.roll_s is not None:
                self._add_to_roll(number, table)
        # After the lock (a roll need not wait for a trim); the instruments call this off their
        # event loops: what a burst freed goes back to the system.
        HEAP.now_and_then()
        return path

    def write(self, rows: list[Row]) -> str | None:
        return self.write_batches([self.batch(rows)]) if rows else None

    def flush(self) -> str | None:
        return self.write(self.take())

    def roll(self) -> str | None:
        """Roll what the open roll holds now (a normal stop); the rolled file, if one was made.
        Never raises: a roll that fails leaves its parts as they are, which hold the rows."""
        with self._lock:
            return self._finish_roll()

    def _add_to_roll(self, number: int, table: pa.Table) -> None:
        """Part `number`'s rows (already safe in the part) as a row group of the open roll,
        opened at need, and the roll finished when due. Under the lock. Nothing raised here
        reaches the caller: it would put back rows that the part already holds."""
        assert self.roll_s is not None
        try:
            if self._roll is None:
                tmp = os.path.join(self._dir, partnames.rolling_name(self.prefix, number))
                self._roll = _Roll(tmp, number, self.schema, self._dictionary_columns)
            self._roll.writer.write_table(table)
            self._roll.last = number
        except Exception:
            self._give_up_roll()
            return
        if time.monotonic() - self._roll.opened_s >= self.roll_s:
            self._finish_roll()

    def _finish_roll(self) -> str | None:
        """The open roll closed, renamed into place, and then the parts it holds deleted: a
        kill in between leaves parts that `part_files` no longer counts."""
        roll, self._roll = self._roll, None
        if roll is None:
            return None
        path = os.path.join(self._dir, partnames.rolled_name(self.prefix, roll.first, roll.last))
        try:
            held = partnames.Identity(self.writer_id, roll.first, roll.last)
            roll.writer.add_key_value_metadata(partnames.identity_metadata(held))
            roll.writer.close()
            if roll.first == roll.last:  # one part: already a file of its own
                os.unlink(roll.tmp)
                return None
            os.replace(roll.tmp, path)
        except Exception:
            self.roll_errors += 1
            _remove(roll.tmp)
            return None
        self.rolls_written += 1
        _tidy(self._dir, [partnames.part_name(self.prefix, n) for n in roll.numbers()])
        return path

    def _give_up_roll(self) -> None:
        """A roll that could not take a part (a full disk): its hidden file goes, so it holds
        no space; its parts stay and are records as they are. The next part opens a new one."""
        roll, self._roll = self._roll, None
        self.roll_errors += 1
        if roll is not None:
            with contextlib.suppress(Exception):
                roll.writer.close()
            _remove(roll.tmp)


class _Roll:
    """The rolled file being written (a hidden name): parts first..last, a row group each."""

    def __init__(
        self, tmp: str, first: int, schema: pa.Schema, dictionary_columns: list[str]
    ) -> None:
        self.tmp = tmp
        self.first = self.last = first
        self.opened_s = time.monotonic()
        try:
            self.writer = pq.ParquetWriter(
                tmp, schema, compression="snappy", use_dictionary=dictionary_columns
            )
        except BaseException:
            _remove(tmp)
            raise

    def numbers(self) -> range:
        return range(self.first, self.last + 1)


def _tidy(directory: str | os.PathLike[str], names: Sequence[str]) -> None:
    """Delete these files of `directory` if they are there; what cannot be deleted stays (the
    listing rule already leaves it out). Joined as strings: see the module's doc."""
    for name in names:
        _remove(os.path.join(directory, name))


def _remove(path: str) -> None:
    """Delete one file if it is there; what cannot be deleted stays (see `_tidy`)."""
    with contextlib.suppress(OSError):  # FileNotFoundError included: already gone
        os.unlink(path)


def _jsonable(names: list[str], row: Row) -> dict[str, object] | list[str]:
    values = [v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for v in row]
    if len(values) != len(names):
        return [repr(v) for v in row]
    return dict(zip(names, values, strict=True))


# How often the sender's and the receiver's record writers roll (seconds); 0: never.
ROLL_ENV = "EVBENCH_RECORD_ROLL_S"
DEFAULT_ROLL_S = 60.0  # 1,440 files per writer per day


def record_roll_s(environ: Mapping[str, str] = os.environ) -> float | None:
    """The roll interval for sent and received records: $EVBENCH_RECORD_ROLL_S seconds (default
    60), None for 0 (one file per flush, as before rolling). A bad value is an error naming it."""
    text = environ.get(ROLL_ENV, "").strip()
    if not text:
        return DEFAULT_ROLL_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise EvbenchError(f"{ROLL_ENV}={text!r}: expected seconds >= 0 (0: never roll)")
    return value or None


def part_files(directory: Path) -> list[Path]:
    """The files that hold a record directory's records, by the one rule of
    contract.partnames (rolled files, and the parts none of them holds)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return [directory / name for name in partnames.kept_names(os.listdir(directory))]


def check_parts(directory: Path, fields: Sequence[Field]) -> list[Path]:
    """The files that hold one record directory's records, each checked (`checked_parts`)."""
    return checked_parts(directory, fields)[0]


def checked_parts(
    directory: Path, fields: Sequence[Field]
) -> tuple[list[Path], list[tuple[Path, Path]]]:
    """The part files of one record directory, each checked from its footer alone: a truncated
    file or a missing column raises an error that names the file. Footers are read on a thread
    pool (the I/O releases the GIL): an hour-long run has thousands of parts. A file whose parts
    another one holds (its footer says: contract.partnames.unique_files), a copy, is left out:
    returned with the file kept instead, so that the caller says it."""
    paths = part_files(directory)
    if clash := partnames.overlapping(p.name for p in paths):
        _refuse_twice(directory, *clash[0])
    wanted = [f.name for f in fields if not f.added_later]

    def check(path: Path) -> partnames.Identity | None:
        try:
            with pq.ParquetFile(path) as file:
                names, metadata = file.schema_arrow.names, file.metadata.metadata
        except (pa.ArrowException, OSError) as exc:
            raise RecordFileError(f"{path}: unreadable Parquet file ({exc})") from exc
        missing = [name for name in wanted if name not in names]
        if missing:
            raise RecordFileError(f"{path}: missing columns {', '.join(missing)}")
        return partnames.read_identity(metadata)

    with ThreadPoolExecutor(max_workers=8) as pool:
        identities = list(pool.map(check, paths))
    found = partnames.unique_files([(p.name, i) for p, i in zip(paths, identities, strict=True)])
    if found.clashes:
        _refuse_twice(directory, *found.clashes[0])
    kept = [directory / name for name in found.kept]
    return kept, [(directory / name, directory / of) for name, of in found.copies]


def _refuse_twice(directory: Path, first: str, second: str) -> None:
    raise RecordFileError(
        f"{directory}: {first} and {second} hold some of the same parts (their rows would count "
        "twice): move one of them away"
    )


def present(path: Path | str, schema: pa.Schema) -> list[str]:
    """The columns of `schema` a record file holds (one written before a field was added
    lacks it: contract.records.Field.added_later)."""
    names = set(pq.read_schema(path).names)
    return [name for name in schema.names if name in names]


def with_added(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` in `schema`'s columns and types, a column it lacks (a field added later) null."""
    for at, field in enumerate(schema):
        if field.name not in table.schema.names:
            table = table.add_column(at, field, pa.nulls(table.num_rows, field.type))
    table = table.select(schema.names)
    return table if table.schema == schema else table.cast(schema)


def read_parts(directory: Path, fields: Sequence[Field]) -> pa.Table:
    """Read every part file of one record directory; a bad file is named in the error."""
    schema = arrow_schema(fields)
    tables = []
    for path in check_parts(directory, fields):
        try:
            table = pq.read_table(path, columns=present(path, schema))
        except (pa.ArrowException, OSError) as exc:
            raise RecordFileError(f"{path}: unreadable Parquet file ({exc})") from exc
        tables.append(with_added(table, schema))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)
