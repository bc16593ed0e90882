"""Names of record files, and the one rule for which files of a directory hold its records.

A writer (runtime.parquet.PartWriter) writes a part per flush, `<prefix>-<n>.parquet`, and
every so often rolls a run of them into one file, `<prefix>-<first>-<last>.rolled.parquet`,
which holds parts first..last; then it deletes those parts. A process killed between the
rename and the deletes leaves both, so the rule is: every rolled file, plus every part that no
rolled file of the same prefix covers, plus any other visible `.parquet` file (a name neither
pattern matches is someone's record file, as it always was). Dot-names (files being written)
are never records. Everything that reads, counts, serves or collects records uses `kept_names`
(through runtime.parquet.part_files), so no row is ever counted twice.

The two patterns cannot be confused: a part ends in digits before `.parquet`, a rolled file in
`.rolled`; the prefix is everything before the last one (or two) `-<digits>`. Pure.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

SUFFIX = ".parquet"
ROLLED_SUFFIX = ".rolled.parquet"
_PART = re.compile(r"^(?P<prefix>.+)-(?P<first>\d+)\.parquet$")
_ROLLED = re.compile(r"^(?P<prefix>.+)-(?P<first>\d+)-(?P<last>\d+)\.rolled\.parquet$")


@dataclass(frozen=True)
class Named:
    """What a record file's name says: whose it is and which part numbers it holds."""

    prefix: str
    first: int
    last: int  # == first for a part
    rolled: bool


def part_name(prefix: str, number: int) -> str:
    return f"{prefix}-{number:06d}{SUFFIX}"


def rolled_name(prefix: str, first: int, last: int) -> str:
    return f"{prefix}-{first:06d}-{last:06d}{ROLLED_SUFFIX}"


def rolling_name(prefix: str, first: int) -> str:
    """The hidden file a roll is written into until it is whole (a dot-name: never listed)."""
    return f".{prefix}-{first:06d}.rolling.tmp"


def parse(name: str) -> Named | None:
    """A part's or a rolled file's name read back; None for any other name."""
    if found := _ROLLED.match(name):
        first, last = int(found["first"]), int(found["last"])
        return Named(found["prefix"], first, last, rolled=True) if first <= last else None
    if found := _PART.match(name):
        number = int(found["first"])
        return Named(found["prefix"], number, number, rolled=False)
    return None


def visible(name: str) -> bool:
    return name.endswith(SUFFIX) and not name.startswith(".")


def kept_names(names: Iterable[str]) -> list[str]:
    """The names among `names` (one directory's) whose files hold its records, sorted: rolled
    files, parts no rolled file of their prefix covers, and other visible Parquet files."""
    shown = [name for name in names if visible(name)]
    parsed = {name: parse(name) for name in shown}
    spans: dict[str, list[tuple[int, int]]] = {}
    for named in parsed.values():
        if named is not None and named.rolled:
            spans.setdefault(named.prefix, []).append((named.first, named.last))
    sorted_spans = {prefix: sorted(found) for prefix, found in spans.items()}
    return sorted(
        name
        for name, named in parsed.items()
        if named is None
        or named.rolled
        or not _covered(sorted_spans.get(named.prefix, []), named.first)
    )


def _covered(spans: list[tuple[int, int]], number: int) -> bool:
    """Whether a span of `spans` (sorted by first number) holds part `number`: the span that
    starts last at or before it (rolls never overlap, so it is the only candidate)."""
    at = bisect.bisect_right(spans, number, key=lambda span: span[0]) - 1
    return at >= 0 and spans[at][0] <= number <= spans[at][1]


def covered_names(names: Iterable[str]) -> list[str]:
    """The visible parts a rolled file already holds: leftovers of a roll cut short."""
    shown = [name for name in names if visible(name)]
    kept = set(kept_names(shown))
    return sorted(name for name in shown if name not in kept)


def overlapping(names: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of rolled files of one prefix whose spans overlap. A writer never makes them (its
    numbers only grow); if they exist, their shared rows would count twice."""
    by_prefix: dict[str, list[tuple[int, int, str]]] = {}
    for name in names:
        named = parse(name) if visible(name) else None
        if named is not None and named.rolled:
            by_prefix.setdefault(named.prefix, []).append((named.first, named.last, name))
    pairs = []
    for spans in by_prefix.values():
        spans.sort()
        for before, after in itertools.pairwise(spans):
            if after[0] <= before[1]:
                pairs.append((before[2], after[2]))
    return pairs


def next_number(names: Iterable[str], prefix: str) -> int:
    """The next part number for `prefix`: past every part and every rolled file's span."""
    lasts = [n.last for name in names if (n := parse(name)) is not None and n.prefix == prefix]
    return max(lasts, default=-1) + 1


def stale_names(names: Iterable[str], prefix: str) -> list[str]:
    """What a writer of `prefix` may delete when it starts in a directory: its own files a kill
    left half-written (dot-names) and its own parts a rolled file already holds."""
    hidden = re.compile(rf"^\.{re.escape(prefix)}-\d+(\.rolling|\.parquet)\.tmp$")
    listed = list(names)
    leftovers = [name for name in covered_names(listed) if _prefix_of(name) == prefix]
    return sorted([name for name in listed if hidden.match(name)] + leftovers)


def _prefix_of(name: str) -> str | None:
    named = parse(name)
    return named.prefix if named is not None else None
