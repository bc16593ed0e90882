"""sent/ read where it is: the index that lets the analysis' tasks read a slice's sent events
from the part files themselves, with no copy.

The sender writes a part per second, in slot order (rolled, a minute per file with a row group
per second: runtime.parquet), so each of its row groups holds the events of one slice
(analysis.slices) or, at a slice's edge, of two. The index lists, for every row group of every
part, the slices its rows belong to and how many of each, and every slice's slot range
(analysis.routing.SeqRanges): the range routes the deliveries to their slice, and a task keeps,
of the row groups it reads, the rows whose slot is in its slice's range (`Copy.in_place`).

Compacting sent/ into chunks cost 6.4 s of the first analysis of a 30 M-event step (11.6 s of
CPU on two cores, a third of it encoding the copy again) and as much disk again as sent/; the
index reads five narrow columns once. It is kept per part in INDEX_NAME beside the received
chunks, so a second analysis reads no data to plan, and a grown directory indexes only the
parts that are new or changed (a part is known by its name, size and modification time).

The tasks read the parts through hard links under PINNED: a run still writing rolls its
per-second parts into a minute's file and deletes them (runtime.parquet), which a task reading
them tens of seconds after the index would miss; a link keeps the file the index read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.compact import Copy, Layout, stamp
from analysis.routing import SeqRanges
from analysis.slices import SLICE_EVENTS, slice_keys
from contract.errors import RecordFileError
from contract.records import SENT_FIELDS
from runtime.files import write_text_atomically
from runtime.parquet import arrow_schema

INDEX_NAME = "index.json"
PINNED = "parts"
# An index written by another version of this rule is made again.
INDEX_VERSION = 3
# What the index reads of sent/: the slice's inputs, the slot, and the id (whether it carries
# its slot: analysis.routing.ids_carry).
INDEX_COLUMNS = ("event_id", "seq", "step", "target_rate_per_s", "intended_ns")
_SCHEMA = arrow_schema([f for f in SENT_FIELDS if f.name in INDEX_COLUMNS])
# Parts indexed at once: the reading and decoding release the GIL.
INDEX_THREADS = 2


def index_sent(
    parts: Sequence[Path], directory: Path, start_ns: int, slice_events: int = SLICE_EVENTS
) -> Copy:
    """sent/'s parts as the tasks read them in place: each part's row groups keyed by the
    slices they hold, and the slices' slot ranges. Parts the index in `directory` already
    holds as they are now are not read again; chunks an earlier layout copied there go."""
    directory.mkdir(parents=True, exist_ok=True)
    expected = {"version": INDEX_VERSION, "sliced_by": [start_ns, slice_events]}
    held = _load(directory / INDEX_NAME, expected)

    def entry(part: Path) -> dict[str, Any]:
        known = stamp(part)
        found = held.get(part.name)
        if found is not None and found.get("stamp") == known:
            return found
        return {"stamp": known, **_index_part(part, start_ns, slice_events)}

    with ThreadPoolExecutor(max_workers=INDEX_THREADS) as pool:
        entries = list(pool.map(entry, parts))
    now = {part.name: found for part, found in zip(parts, entries, strict=True)}
    if now != held:
        text = json.dumps({**expected, "parts": now}, separators=(",", ":"))
        write_text_atomically(directory / INDEX_NAME, text)
    for stale in directory.glob("chunk-*.parquet"):  # sent/ chunks of an earlier layout
        stale.unlink(missing_ok=True)
    ranges = SeqRanges()
    layouts = []
    for path, found in zip(_pinned(parts, directory / PINNED), entries, strict=True):
        ranges.merge(SeqRanges.from_json(found["ranges"], found["ids_carry_seq"]))
        layouts.append(_layout(path, found["groups"]))
    lasts = [found["last_intended_ns"] for found in entries if found["last_intended_ns"]]
    return Copy(tuple(layouts), ranges, in_place=True, last_intended_ns=max(lasts, default=None))


def _pinned(parts: Sequence[Path], directory: Path) -> list[Path]:
    """Each part as a hard link in `directory` (links to parts no longer listed removed); the
    part itself where a link cannot be made (another file system)."""
    directory.mkdir(exist_ok=True)
    found: dict[str, Path] = {}
    for part in parts:
        link = directory / part.name
        try:
            if not (link.exists() and os.path.samefile(link, part)):
                link.unlink(missing_ok=True)
                os.link(part, link)
            found[part.name] = link
        except OSError:
            found[part.name] = part
    for stale in directory.iterdir():
        if stale.name not in found:
            stale.unlink(missing_ok=True)
    return [found[part.name] for part in parts]


def holds(directory: Path, parts: Sequence[Path]) -> bool:
    """Whether the index in `directory` holds exactly these parts as they are now (their
    footers were checked before it read them; a part changed since shows in its size or
    modification time)."""
    held = _load(directory / INDEX_NAME, {"version": INDEX_VERSION})
    if list(held) != [part.name for part in parts]:
        return False
    return bool(parts) and all(held[part.name].get("stamp") == stamp(part) for part in parts)


def _index_part(part: Path, start_ns: int, slice_events: int) -> dict[str, Any]:
    """One part's row groups: [[key, rows], ...] each, its slices' slot ranges, whether its
    ids carry their slots, and its last slot's instant. Read a row group at a time (a rolled
    part is a minute)."""
    ranges = SeqRanges()
    groups = []
    last_ns: int | None = None
    try:
        file = pq.ParquetFile(part)
        for group in range(file.num_row_groups):
            table = file.read_row_group(group, columns=list(INDEX_COLUMNS)).cast(_SCHEMA)
            keys = slice_keys(
                table.column("step").to_numpy(),
                table.column("target_rate_per_s").to_numpy(),
                table.column("intended_ns").to_numpy(),
                start_ns,
                slice_events,
            )
            ranges.add(keys, table)
            if table.num_rows:
                high = int(table.column("intended_ns").to_numpy().max())
                last_ns = high if last_ns is None else max(last_ns, high)
            found, rows = np.unique(keys, return_counts=True)
            groups.append([[int(k), int(n)] for k, n in zip(found, rows, strict=True)])
    except (pa.ArrowException, OSError) as exc:
        raise RecordFileError(f"{part}: unreadable Parquet file ({exc})") from exc
    return {
        "groups": groups,
        "ranges": ranges.to_json(),
        "ids_carry_seq": ranges.ids_carry_seq,
        "last_intended_ns": last_ns,
    }


def _layout(part: Path, groups: list[list[list[int]]]) -> Layout:
    """A part's Layout: an entry per (row group, slice) it holds."""
    keys, rows, group_of = [], [], []
    for group, held in enumerate(groups):
        for key, count in held:
            keys.append(key)
            rows.append(count)
            group_of.append(group)
    return Layout(part, tuple(keys), tuple(rows), group_of=tuple(group_of))


def _load(path: Path, expected: dict[str, Any]) -> dict[str, Any]:
    """The parts an index holds, if it was made by this rule and sliced the same way; none
    otherwise (unreadable, another version, other slices: it is made again)."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict) or any(found.get(k) != v for k, v in expected.items()):
        return {}
    parts = found.get("parts")
    return parts if isinstance(parts, dict) else {}
