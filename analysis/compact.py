"""The received records compacted for analysis: the same rows (the columns the tasks read),
in chunks laid out by slice.

A run writes its records as part files (runtime.parquet); every reader pays per file opened, and
the analysis' tasks want a slice's sent events and their deliveries (analysis.slices) without a
join across the run. The sent parts are in slot order already, so the tasks read them where they
are (analysis.sentindex); the received parts are in arrival order, so on first analysis they are
copied, in part order, into chunks of at most about CHUNK_ROWS rows,
`analysis/records/received/chunk-NNNNN.parquet`; the raw parts are never touched. A chunk also
holds the slot each id names (ID_SEQ).

Each chunk is laid out for the tasks (analysis.tasks): each row group holds the rows of one key
only, and the footer lists the key of every row group (LAYOUT_KEY): the slice the delivery's id
names (analysis.routing), NO_ROUTE where it names none. A slice's task reads its row groups of
every chunk, and nothing else.

Compaction is incremental and bounded: a chunk lists the parts it holds (name, size,
modification time) in its footer, and the slot ranges it was routed by, so only a
chunk whose parts changed (more parts collected, the last chunk grown, a part replaced) is
compacted again; each is a bounded pass (READ_AHEAD parts, BUFFERED_ROWS rows), and the chunks
are compacted on a few threads (the reading, encoding and writing release the GIL). A chunk cut
short (the machine died mid-write) is never taken: it is written under a temporary name and
renamed whole.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.routing import SeqRanges, id_seqs, runs, seq_routes
from contract.errors import RecordFileError
from contract.records import RECEIVED_FIELDS, Field
from runtime.parquet import arrow_schema, dictionary_columns, with_added

MANIFEST_KEY = b"evbench.parts"
LAYOUT_KEY = b"evbench.layout"
# A copy written by an earlier layout (a version other than this one) is compacted again.
LAYOUT_VERSION = 6
# received/ chunks carry, beside the contract's columns, the slot each id names (NO_ROUTE where
# none: analysis.routing.id_seqs), parsed once here: a task then finds a delivery's sent event by
# its slot rather than by a hash join of the ids (analysis.tasks).
ID_SEQ = pa.field("id_seq", pa.int64(), nullable=False)
# The columns of received/ the analysis' tasks read (analysis.tasks): all a chunk keeps. The
# parts stay the records; a chunk is the analysis' working copy, and the rest (payload sizes,
# the receiver's name, the CloudEvent attributes: ce_id is a second unique string per delivery)
# only cost reading, encoding and writing again (measured on 8 M deliveries of the 30 M-event
# step: their compaction took 2.6 s of CPU with every column, 2.3 s without).
# `subscriber` names whose delivery it was, where a system fans out (analysis.fanout).
RECEIVED_KEPT = ("event_id", "received_ns", "subscriber")
# Rows of parts per chunk, about: a chunk is written in one bounded pass, and a directory that
# grows (a run still going, records collected later) rewrites only its last chunks.
CHUNK_ROWS = 1 << 22
# Chunks compacted at once: each a bounded pass, their I/O and encoding release the GIL.
CHUNK_THREADS = 2
# Parts read ahead of the writer: bounded memory (an hour's parts are gigabytes), while the
# reading (which releases the GIL) overlaps the writing.
READ_AHEAD = 8
# Rows per row group at most; a key's rows are flushed as one when they reach it.
ROW_GROUP_ROWS = 1 << 19
# Rows held across keys before every key is flushed (deliveries of many slices interleave).
BUFFERED_ROWS = 2 * ROW_GROUP_ROWS


@dataclass(frozen=True)
class Layout:
    """A file the tasks read: a compacted chunk, or (sent, analysis.sentindex) a part read in
    place. Entries of (key, rows): one per row group of a chunk; in a part, one per slice a row
    group holds (`group_of` says which row group)."""

    path: Path
    keys: tuple[int, ...]
    group_rows: tuple[int, ...]
    group_of: tuple[int, ...] | None = None  # None: entry i is row group i

    def groups(self, keys: Iterable[int]) -> tuple[int, ...]:
        """The row groups that hold these keys, in file order."""
        wanted = set(keys)
        at = self.group_of or range(len(self.keys))
        return tuple(sorted({at[i] for i, k in enumerate(self.keys) if k in wanted}))

    def rows_of(self, keys: Iterable[int]) -> int:
        """The rows of these keys."""
        wanted = set(keys)
        return sum(rows for k, rows in zip(self.keys, self.group_rows, strict=True) if k in wanted)


@dataclass(frozen=True)
class Copy:
    """A side's files in part order; (sent) the slot range of every slice. `in_place`: the
    sent parts themselves, whose row groups may hold rows of two slices, so a task keeps the
    rows in its slice's slot range (analysis.tasks)."""

    chunks: tuple[Layout, ...]
    ranges: SeqRanges | None = None
    in_place: bool = False
    last_intended_ns: int | None = None  # (sent) the last slot's instant: the points' span

    @property
    def keys(self) -> set[int]:
        return {key for chunk in self.chunks for key in chunk.keys}

    def rows_by_key(self) -> dict[int, int]:
        found: dict[int, int] = {}
        for chunk in self.chunks:
            for key, rows in zip(chunk.keys, chunk.group_rows, strict=True):
                found[key] = found.get(key, 0) + rows
        return found

    def paths(self) -> list[Path]:
        return [chunk.path for chunk in self.chunks]


def stamp(part: Path) -> list[int]:
    """What tells a part changed since the analysis read it: its size and modification time."""
    stat = part.stat()
    return [stat.st_size, stat.st_mtime_ns]


def manifest(parts: Sequence[Path]) -> list[list]:
    """What a compacted chunk holds: each part's name and stamp, in order."""
    return [[part.name, *stamp(part)] for part in parts]


def holds(directory: Path, parts: Sequence[Path]) -> bool:
    """Whether the chunks in `directory` were compacted from exactly these parts as they are
    now (their footers' manifests, in order, are the parts')."""
    held: list = []
    for chunk in sorted(directory.glob("chunk-*.parquet")):
        try:
            found = (pq.read_metadata(chunk).metadata or {}).get(MANIFEST_KEY)
        except (pa.ArrowException, OSError):
            return False
        if found is None:
            return False
        held.extend(json.loads(found))
    return bool(held) and held == manifest(parts)


def chunked(rows: Sequence[int], limit: int = CHUNK_ROWS) -> list[range]:
    """Consecutive parts (their `rows`) in chunks of at most `limit` rows, a part never split
    (one larger than `limit` is a chunk of its own)."""
    chunks: list[range] = []
    first, held = 0, 0
    for i, count in enumerate(rows):
        if held and held + count > limit:
            chunks.append(range(first, i))
            first, held = i, 0
        held += count
    if first < len(rows):
        chunks.append(range(first, len(rows)))
    return chunks


def read_layout(copy: Path, parts: Sequence[Path], expected: dict) -> Layout | None:
    """The layout of chunk `copy` if it holds exactly these parts as they are now, in this
    layout version, keyed as `expected` says (what it was routed by); None otherwise."""
    try:
        metadata = pq.read_metadata(copy)
    except (pa.ArrowException, OSError):
        return None
    footer = metadata.metadata or {}
    held, layout = footer.get(MANIFEST_KEY), footer.get(LAYOUT_KEY)
    if held is None or layout is None or json.loads(held) != manifest(parts):
        return None
    found = json.loads(layout)
    # A footer whose keys do not match its row groups one for one is not trusted: a task would
    # read the wrong slice.
    if found.get("version") != LAYOUT_VERSION or len(found["keys"]) != metadata.num_row_groups:
        return None
    if any(found.get(name) != value for name, value in expected.items()):
        return None
    return Layout(
        copy,
        tuple(found["keys"]),
        tuple(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)),
    )


def compact_received(
    parts: Sequence[Path], directory: Path, ranges: SeqRanges, chunk_rows: int = CHUNK_ROWS
) -> Copy:
    """received/'s parts into chunks under `directory`, a row group per route (the slice
    each id names)."""
    expected = {"routed_by": _routing_json(ranges)}

    def one(copy: Path, chunk: Sequence[Path]) -> Layout:
        if (found := read_layout(copy, chunk, expected)) is not None:
            return found

        def keys(table: pa.Table) -> tuple[pa.Table, np.ndarray]:
            seqs = id_seqs(table.column("event_id"))
            return table.append_column(ID_SEQ, pa.array(seqs)), seq_routes(seqs, ranges)

        kept = _kept(RECEIVED_FIELDS, RECEIVED_KEPT)
        written = _write(chunk, kept, copy, keys, lambda: expected, (ID_SEQ,))
        return Layout(copy, *written)

    return Copy(tuple(_each_chunk(parts, directory, chunk_rows, one)))


def _each_chunk(
    parts: Sequence[Path],
    directory: Path,
    chunk_rows: int,
    one: Callable[[Path, Sequence[Path]], Layout],
) -> list[Layout]:
    """`one` over every chunk of `parts` (on CHUNK_THREADS threads), chunk files left over
    from a longer directory removed."""
    directory.mkdir(parents=True, exist_ok=True)
    chunks = chunked(_part_rows(parts), chunk_rows)
    copies = [directory / f"chunk-{i:05d}.parquet" for i in range(len(chunks))]
    with ThreadPoolExecutor(max_workers=CHUNK_THREADS) as pool:
        found = list(
            pool.map(lambda i: one(copies[i], [parts[j] for j in chunks[i]]), range(len(chunks)))
        )
    for stale in directory.glob("chunk-*.parquet"):
        if stale not in copies:
            stale.unlink(missing_ok=True)
    return found


def _part_rows(parts: Sequence[Path]) -> list[int]:
    """Each part's rows, from its footer."""

    def rows(part: Path) -> int:
        try:
            return int(pq.read_metadata(part).num_rows)
        except (pa.ArrowException, OSError) as exc:
            raise RecordFileError(f"{part}: unreadable Parquet file ({exc})") from exc

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(rows, parts))


def _kept(fields: Sequence[Field], names: Sequence[str]) -> list[Field]:
    return [f for f in fields if f.name in names]


def _routing_json(ranges: SeqRanges) -> dict:
    return {"ranges": ranges.to_json(), "routable": ranges.routable}


def _write(
    parts: Sequence[Path],
    fields: Sequence[Field],
    copy: Path,
    key_of: Callable[[pa.Table], tuple[pa.Table, np.ndarray]],
    layout: Callable[[], dict],
    extra: Sequence[pa.Field] = (),
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`parts` (checked, in order) into one file at `copy`, the columns of `fields` only, in the
    contract's types, and the `extra` columns `key_of` adds; each row group holds one key's
    rows (`key_of` a part's rows: the rows with their extra columns, and their keys), in part
    order. Returns the row groups' keys and rows."""
    read_schema = arrow_schema(fields)
    schema = pa.schema([*read_schema, *extra])
    schema = schema.with_metadata({MANIFEST_KEY: json.dumps(manifest(parts))})
    copy.parent.mkdir(parents=True, exist_ok=True)
    partial = copy.with_name(f".{copy.name}.{uuid.uuid4().hex}.tmp")
    keys: list[int] = []
    rows: list[int] = []
    try:
        dictionary = dictionary_columns(fields)
        with pq.ParquetWriter(partial, schema, use_dictionary=dictionary) as writer:
            pending: dict[int, list[pa.Table]] = {}
            for part in _read_ahead(parts, read_schema):
                table, found = key_of(part)
                for key, taken in runs(found):
                    whole = len(taken) == table.num_rows  # most parts hold one key
                    pending.setdefault(key, []).append(table if whole else table.take(taken))
                    if sum(t.num_rows for t in pending[key]) >= ROW_GROUP_ROWS:
                        _flush(writer, pending, key, keys, rows)
                if sum(t.num_rows for tables in pending.values() for t in tables) > BUFFERED_ROWS:
                    for key in sorted(pending):
                        _flush(writer, pending, key, keys, rows)
            for key in sorted(pending):
                _flush(writer, pending, key, keys, rows)
            writer.add_key_value_metadata(
                {LAYOUT_KEY: json.dumps({"version": LAYOUT_VERSION, "keys": keys, **layout()})}
            )
        if pq.read_metadata(partial).num_row_groups != len(keys):
            raise RecordFileError(f"{copy}: its row groups do not match the keys written for them")
        os.replace(partial, copy)
    finally:
        partial.unlink(missing_ok=True)
    return tuple(keys), tuple(rows)


def _flush(
    writer: pq.ParquetWriter,
    pending: dict[int, list[pa.Table]],
    key: int,
    keys: list[int],
    rows: list[int],
) -> None:
    """A key's pending rows as row groups of at most ROW_GROUP_ROWS, their keys and rows
    noted."""
    table = pa.concat_tables(pending.pop(key))
    writer.write_table(table, ROW_GROUP_ROWS)
    for start in range(0, table.num_rows, ROW_GROUP_ROWS):
        keys.append(key)
        rows.append(min(ROW_GROUP_ROWS, table.num_rows - start))


def _read_ahead(parts: Sequence[Path], schema: pa.Schema) -> Iterator[pa.Table]:
    """The parts' row groups in order, READ_AHEAD at a time on threads (the reading releases
    the GIL): a rolled part holds a minute of records (a million rows at 20,000/s), so memory is
    bounded by row groups (a flush each), never by whole files."""

    def groups(part: Path) -> int:
        try:
            return int(pq.read_metadata(part).num_row_groups)
        except (pa.ArrowException, OSError) as exc:
            raise RecordFileError(f"{part}: unreadable Parquet file ({exc})") from exc

    def read(unit: tuple[Path, int]) -> pa.Table:
        part, group = unit
        try:
            file = pq.ParquetFile(part)
            held = [name for name in schema.names if name in file.schema_arrow.names]
            return with_added(file.read_row_group(group, columns=held), schema)
        except (pa.ArrowException, OSError) as exc:
            raise RecordFileError(f"{part}: unreadable Parquet file ({exc})") from exc

    units = [(part, group) for part in parts for group in range(groups(part))]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for start in range(0, len(units), READ_AHEAD):
            yield from pool.map(read, units[start : start + READ_AHEAD])
