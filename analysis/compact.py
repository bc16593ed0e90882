"""The record directories compacted for analysis: one Parquet file per side, same rows, laid
out by step.

A run writes a part file per second per side (so an interrupted run keeps all but the last
second); an hour is thousands of files of a few tens of KB, and every reader pays per file
opened. On first analysis each side is copied, part by part in part order, into
`analysis/records/<side>.parquet`; the raw parts are never touched.

The copy is laid out for the analysis' tasks (analysis.tasks): each row group holds the rows of
one key only, and the footer lists the key of every row group (LAYOUT_KEY): for sent/, the step;
for received/, the step the delivery's id names (analysis.routing), NO_ROUTE where it names
none. A step's task then reads its sent events and their deliveries, and nothing else, straight
from the files.

The copy lists the parts it holds (name, size, modification time) in its footer, and the
received copy the slot ranges it was routed by, so a directory that changed since (more parts
collected, a part replaced) is compacted again; a copy cut short (the machine died mid-write) is
never taken: it is written under a temporary name and renamed whole.
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

from analysis.routing import SeqRanges, routes, runs
from contract.errors import RecordFileError
from contract.parquet import arrow_schema
from contract.records import RECEIVED_FIELDS, SENT_FIELDS, Field

MANIFEST_KEY = b"evbench.parts"
LAYOUT_KEY = b"evbench.layout"
# A copy written by an earlier layout (one without LAYOUT_KEY) is compacted again.
LAYOUT_VERSION = 2
# Parts read ahead of the writer: bounded memory (an hour's parts are gigabytes), while the
# reading (which releases the GIL) overlaps the writing.
READ_AHEAD = 16
# Rows per row group at most; a key's rows are flushed as one when they reach it.
ROW_GROUP_ROWS = 1 << 19
# Rows held across keys before every key is flushed (deliveries of many steps interleave).
BUFFERED_ROWS = 2 * ROW_GROUP_ROWS


@dataclass(frozen=True)
class Layout:
    """A compacted copy: its path, the key of each of its row groups, and (sent) the steps'
    slot ranges the received copy is routed by."""

    path: Path
    keys: tuple[int, ...]
    ranges: SeqRanges | None = None

    def groups(self, keys: Iterable[int]) -> tuple[int, ...]:
        """The row groups that hold these keys, in file order."""
        wanted = set(keys)
        return tuple(i for i, k in enumerate(self.keys) if k in wanted)

    def rows(self, groups: Iterable[int]) -> int:
        metadata = pq.read_metadata(self.path)
        return sum(metadata.row_group(i).num_rows for i in groups)


def manifest(parts: Sequence[Path]) -> list[list]:
    """What a compacted copy holds: each part's name, size and modification time, in order."""
    stats = [(part.name, part.stat()) for part in parts]
    return [[name, stat.st_size, stat.st_mtime_ns] for name, stat in stats]


def holds(copy: Path, parts: Sequence[Path]) -> bool:
    """Whether `copy` was compacted from exactly these parts as they are now."""
    try:
        held = (pq.read_metadata(copy).metadata or {}).get(MANIFEST_KEY)
    except (pa.ArrowException, OSError):
        return False
    return held is not None and json.loads(held) == manifest(parts)


def read_layout(copy: Path, parts: Sequence[Path], routed_by: SeqRanges | None) -> Layout | None:
    """The layout of `copy` if it holds exactly these parts as they are now, in this layout
    version (and, for received, routed by these ranges); None otherwise."""
    if not holds(copy, parts):
        return None
    metadata = pq.read_metadata(copy)
    layout = (metadata.metadata or {}).get(LAYOUT_KEY)
    if layout is None:
        return None
    found = json.loads(layout)
    # A footer whose keys do not match its row groups one for one is not trusted: a task would
    # read the wrong step.
    if found.get("version") != LAYOUT_VERSION or len(found["keys"]) != metadata.num_row_groups:
        return None
    if routed_by is not None and found.get("routed_by") != _routing_json(routed_by):
        return None
    ranges = found.get("ranges")
    return Layout(
        copy,
        tuple(found["keys"]),
        None if ranges is None else SeqRanges.from_json(ranges, found["ids_carry_seq"]),
    )


def compact_sent(parts: Sequence[Path], copy: Path) -> Layout:
    """sent/'s parts into `copy`, a row group per step run, unless it already holds them."""
    if (found := read_layout(copy, parts, None)) is not None:
        return found
    ranges = SeqRanges()

    def keys(table: pa.Table) -> np.ndarray:
        ranges.add(table)
        return table.column("step").to_numpy().astype(np.int64)

    written = _write(parts, SENT_FIELDS, copy, keys, lambda: _sent_layout(ranges))
    return Layout(copy, written, ranges)


def compact_received(parts: Sequence[Path], copy: Path, ranges: SeqRanges) -> Layout:
    """received/'s parts into `copy`, a row group per route (the step each id names)."""
    if (found := read_layout(copy, parts, ranges)) is not None:
        return found
    written = _write(
        parts,
        RECEIVED_FIELDS,
        copy,
        lambda table: routes(table.column("event_id"), ranges),
        lambda: {"routed_by": _routing_json(ranges)},
    )
    return Layout(copy, written)


def _sent_layout(ranges: SeqRanges) -> dict:
    return {"ranges": ranges.to_json(), "ids_carry_seq": ranges.ids_carry_seq}


def _routing_json(ranges: SeqRanges) -> dict:
    return {"ranges": ranges.to_json(), "routable": ranges.routable}


def _write(
    parts: Sequence[Path],
    fields: Sequence[Field],
    copy: Path,
    key_of: Callable[[pa.Table], np.ndarray],
    layout: Callable[[], dict],
) -> tuple[int, ...]:
    """`parts` (checked, in order) into one file at `copy`, the contract's columns only, in its
    types; each row group holds one key's rows (`key_of` a part's rows), in part order. Returns
    the row groups' keys."""
    schema = arrow_schema(fields).with_metadata({MANIFEST_KEY: json.dumps(manifest(parts))})
    copy.parent.mkdir(parents=True, exist_ok=True)
    partial = copy.with_name(f".{copy.name}.{uuid.uuid4().hex}.tmp")
    keys: list[int] = []
    try:
        with pq.ParquetWriter(partial, schema) as writer:
            pending: dict[int, list[pa.Table]] = {}
            for table in _read_ahead(parts, schema):
                for key, rows in runs(key_of(table)):
                    whole = len(rows) == table.num_rows  # most parts hold one key
                    pending.setdefault(key, []).append(table if whole else table.take(rows))
                    if sum(t.num_rows for t in pending[key]) >= ROW_GROUP_ROWS:
                        keys.extend(_flush(writer, pending, key))
                if sum(t.num_rows for tables in pending.values() for t in tables) > BUFFERED_ROWS:
                    for key in sorted(pending):
                        keys.extend(_flush(writer, pending, key))
            for key in sorted(pending):
                keys.extend(_flush(writer, pending, key))
            writer.add_key_value_metadata(
                {LAYOUT_KEY: json.dumps({"version": LAYOUT_VERSION, "keys": keys, **layout()})}
            )
        if pq.read_metadata(partial).num_row_groups != len(keys):
            raise RecordFileError(f"{copy}: its row groups do not match the keys written for them")
        os.replace(partial, copy)
    finally:
        partial.unlink(missing_ok=True)
    return tuple(keys)


def _flush(writer: pq.ParquetWriter, pending: dict[int, list[pa.Table]], key: int) -> list[int]:
    """A key's pending rows as row groups of at most ROW_GROUP_ROWS; their keys."""
    table = pa.concat_tables(pending.pop(key))
    writer.write_table(table, ROW_GROUP_ROWS)
    return [key] * -(-table.num_rows // ROW_GROUP_ROWS)


def _read_ahead(parts: Sequence[Path], schema: pa.Schema) -> Iterator[pa.Table]:
    """The parts in order, READ_AHEAD at a time on threads (the reading releases the GIL)."""

    def read(part: Path) -> pa.Table:
        try:
            return pq.read_table(part, columns=schema.names).cast(schema)
        except (pa.ArrowException, OSError) as exc:
            raise RecordFileError(f"{part}: unreadable Parquet file ({exc})") from exc

    with ThreadPoolExecutor(max_workers=4) as pool:
        for start in range(0, len(parts), READ_AHEAD):
            yield from pool.map(read, parts[start : start + READ_AHEAD])
