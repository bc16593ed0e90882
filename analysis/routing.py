"""Which slice of which step a record belongs to, from its event id alone: the rule that lets a
slice's sent events and their deliveries be read together without a join across the whole run.

Every sent id ends with `-<seq>`, its slot number (contract.records.event_id_seq; loadgen and
import-knative write them so), and a slice (analysis.slices) is a contiguous range of slots. So
a delivery's id names its slice: parse the slot, find the range. A delivery whose id names no
sent slice (foreign, rewritten, from another run) routes nowhere, NO_ROUTE, and is counted
foreign where it lands.

Sent records whose ids do not carry their own slot (no evbench writer makes them) cannot be
routed: `SeqRanges.routable` is false and the analysis reads such a system whole, as one group
(analysis.tasks), which is slower, unbounded in memory, and exactly as correct.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contract.records import EVENT_ID_SEQ_PATTERN

# The route of a record that belongs to no slice (stored as a row group's key; never a slice).
NO_ROUTE = -1


def id_seqs(event_ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The slot each id carries (int64), NO_ROUTE where it carries none in canonical form."""
    found = pc.struct_field(pc.extract_regex(event_ids, EVENT_ID_SEQ_PATTERN), [0])
    seqs = pc.cast(pc.if_else(pc.is_valid(found), found, None), pa.int64())
    return np.asarray(pc.fill_null(seqs, NO_ROUTE), dtype=np.int64)


def ids_carry(event_ids: pa.Array | pa.ChunkedArray, seqs: np.ndarray) -> bool:
    """Whether every id carries its own slot: `id_seqs(event_ids) == seqs`, checked the fast way
    where it can be. A sender's ids are one prefix and the slot (contract.records.event_id), so
    the ids are compared with that prefix joined to each slot's decimal (0.1 s a million, where
    the pattern takes 0.24 s); the rows of another prefix are read by the pattern."""
    if len(seqs) == 0:
        return True
    first = str(event_ids[0].as_py() or "")
    prefix = first.removesuffix(str(int(seqs[0])))
    if prefix == first or not prefix.endswith("-") or not 0 <= seqs.min() <= seqs.max() < 10**18:
        return bool(np.array_equal(id_seqs(event_ids), seqs))
    expected = pc.binary_join_element_wise(prefix, pc.cast(pa.array(seqs), pa.string()), "")
    same = np.asarray(pc.fill_null(pc.equal(event_ids, expected), False), dtype=bool)
    if same.all():
        return True
    others = pc.filter(event_ids, pa.array(~same))
    return bool(np.array_equal(id_seqs(others), seqs[~same]))


@dataclass
class SeqRanges:
    """Per key (a step's slice, analysis.slices), the lowest and highest slot of its sent
    events, gathered part by part while the sent records are indexed (`add`, `merge`), and
    whether every sent id carries its own slot."""

    low: dict[int, int] = field(default_factory=dict)
    high: dict[int, int] = field(default_factory=dict)
    ids_carry_seq: bool = True

    def add(self, keys: np.ndarray, sent: pa.Table) -> None:
        """A part's rows (event_id, seq), each of the key in `keys`."""
        if sent.num_rows == 0:
            return
        seqs = sent.column("seq").to_numpy()
        self.ids_carry_seq = self.ids_carry_seq and ids_carry(sent.column("event_id"), seqs)
        found = pa.table({"key": keys, "seq": seqs}).group_by("key")
        found = found.aggregate([("seq", "min"), ("seq", "max")])
        for key, low, high in zip(
            *(found.column(n).to_pylist() for n in ("key", "seq_min", "seq_max")), strict=True
        ):
            self._widen(key, low, high)

    def merge(self, other: SeqRanges) -> None:
        """`other`'s ranges (another chunk's) into these."""
        self.ids_carry_seq = self.ids_carry_seq and other.ids_carry_seq
        for key, low in other.low.items():
            self._widen(key, low, other.high[key])

    def _widen(self, key: int, low: int, high: int) -> None:
        self.low[key] = min(low, self.low.get(key, low))
        self.high[key] = max(high, self.high.get(key, high))

    @property
    def routable(self) -> bool:
        """Ids carry their slots and the steps' slot ranges do not overlap."""
        if not self.ids_carry_seq:
            return False
        bounds = sorted((self.low[s], self.high[s]) for s in self.low)
        return all(high < low for (_, high), (low, _) in pairwise(bounds))

    def to_json(self) -> list[list[int]]:
        return [[step, self.low[step], self.high[step]] for step in sorted(self.low)]

    @classmethod
    def from_json(cls, rows: Iterable[list[int]], ids_carry_seq: bool = True) -> SeqRanges:
        ranges = cls(ids_carry_seq=ids_carry_seq)
        for step, low, high in rows:
            ranges.low[step], ranges.high[step] = low, high
        return ranges


def routes(event_ids: pa.Array | pa.ChunkedArray, ranges: SeqRanges) -> np.ndarray:
    """The key each delivery's id names (int64), NO_ROUTE where none: the key (a step's slice)
    whose slot range holds the slot its id carries. Every route is NO_ROUTE when `ranges` is not
    routable (the system is read whole)."""
    if not ranges.routable or not ranges.low:
        return np.full(len(event_ids), NO_ROUTE, dtype=np.int64)
    return seq_routes(id_seqs(event_ids), ranges)


def seq_routes(seqs: np.ndarray, ranges: SeqRanges) -> np.ndarray:
    """`routes` of slots already parsed from their ids (`id_seqs`)."""
    if not ranges.routable or not ranges.low:
        return np.full(len(seqs), NO_ROUTE, dtype=np.int64)
    steps = sorted(ranges.low, key=ranges.low.__getitem__)
    lows = np.array([ranges.low[s] for s in steps], dtype=np.int64)
    highs = np.array([ranges.high[s] for s in steps], dtype=np.int64)
    at = np.clip(np.searchsorted(lows, seqs, side="right") - 1, 0, len(steps) - 1)
    inside = (seqs >= lows[at]) & (seqs <= highs[at]) & (seqs != NO_ROUTE)
    return np.where(inside, np.asarray(steps, dtype=np.int64)[at], NO_ROUTE)


def runs(keys: np.ndarray) -> Iterable[tuple[int, np.ndarray]]:
    """(key, row indices) for each distinct key, rows in their order: how a part's rows are
    split into per-key row groups."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.diff(ordered)) + 1
    for chunk in np.split(order, starts):
        if len(chunk):
            yield int(keys[chunk[0]]), chunk
