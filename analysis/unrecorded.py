"""Deliveries of events no sent record holds, told apart (pure, pyarrow): *foreign* ids, which
no sender of this run gave, and *unrecorded sends*, ids of the run's own shape
(`<run tag>-<worker>-<seq>`, contract.records.event_id) whose sent rows died with their sender
(killed before its last flush, or unable to write them: issue 51, item 9.5). The second are the
run's own events, delivered: counted foreign, they would charge the system under test with
deliveries nobody sent, and hide that the records are short.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from contract import partnames

# A sent id read back: its run tag, then its worker and slot (contract.records.event_id).
_WORKER_SEQ = "-(?:0|[1-9][0-9]*)-(?:0|[1-9][0-9]*)"
_OWN_ID = re.compile(f"^(?P<tag>.+){_WORKER_SEQ}$")


@dataclass(frozen=True)
class NeverSent:
    """Distinct ids received that no sent record of their slice (or run) holds."""

    foreign: int = 0
    unrecorded: int = 0

    def __add__(self, other: NeverSent) -> NeverSent:
        return NeverSent(self.foreign + other.foreign, self.unrecorded + other.unrecorded)


def own_ids(tags: Iterable[str]) -> str | None:
    """The pattern of the ids the senders of these run tags give; None when no tag is known
    (every id never sent is then foreign, as before runs said their tags)."""
    found = sorted(set(tags))
    if not found:
        return None
    return f"^(?:{'|'.join(re.escape(t) for t in found)}){_WORKER_SEQ}$"


def never_sent(ids: pa.Array | pa.ChunkedArray, own: str | None) -> NeverSent:
    """`ids` (received, never sent; repeats allowed) counted once each, split by `own`."""
    distinct = pc.unique(ids).drop_null()
    if own is None or not len(distinct):
        return NeverSent(foreign=len(distinct))
    mine = int(pc.sum(pc.match_substring_regex(distinct, own)).as_py() or 0)
    return NeverSent(foreign=len(distinct) - mine, unrecorded=mine)


def run_tags(run: Mapping[str, Any], sent_parts: Sequence[Path]) -> tuple[str, ...]:
    """The run tags of a run's senders: the one its sender's summary says (run.json), and the
    one the first id of each sent writer's first file carries (a killed sender said none).
    One row group of one file per writer: a day of parts costs no more than a minute's."""
    said = ((run.get("sender") or {}).get("summary") or {}).get("run_tag")
    tags = {said} if isinstance(said, str) and said else set()
    firsts: dict[str, Path] = {}
    for path in sorted(sent_parts, key=lambda p: p.name):
        named = partnames.parse(path.name)
        firsts.setdefault(named.prefix if named is not None else path.name, path)
    for path in firsts.values():
        if (tag := _first_tag(path)) is not None:
            tags.add(tag)
    return tuple(sorted(tags))


def _first_tag(path: Path) -> str | None:
    try:
        parquet = pq.ParquetFile(path)
        if parquet.metadata.num_row_groups == 0:
            return None
        column = parquet.read_row_group(0, columns=["event_id"]).column(0)
    except (OSError, pa.ArrowException, KeyError):
        return None  # the footer check names an unreadable file; it adds no tag
    first = column[0].as_py() if len(column) else None
    found = _OWN_ID.match(first) if isinstance(first, str) else None
    return found["tag"] if found else None
