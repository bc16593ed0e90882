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

Names can be copied, so a file also says what it holds in its Parquet metadata (`Identity`:
the writer, a random id per PartWriter, and its part numbers). A file whose parts another file
of the directory already holds is a copy (`unique_files`): read once, however it is named.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

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


# The key of a record file's Parquet metadata that says what it holds (`Identity`).
IDENTITY_KEY = b"evbench.part"


@dataclass(frozen=True)
class Identity:
    """What a record file holds, whatever its name: parts first..last of one writer."""

    writer: str  # a random id, one per writer (runtime.parquet.PartWriter)
    first: int
    last: int


def identity_metadata(identity: Identity) -> dict[bytes, bytes]:
    doc = {"writer": identity.writer, "first": identity.first, "last": identity.last}
    return {IDENTITY_KEY: json.dumps(doc).encode()}


def read_identity(metadata: Mapping[bytes, bytes] | None) -> Identity | None:
    """A file's identity from its Parquet metadata; None for a file that has none (written
    before files said it, or by someone else) or a malformed one."""
    raw = (metadata or {}).get(IDENTITY_KEY)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
        found = Identity(str(doc["writer"]), int(doc["first"]), int(doc["last"]))
    except (ValueError, KeyError, TypeError):
        return None
    return found if found.first <= found.last else None


@dataclass
class UniqueFiles:
    """A directory's record files read once each: those `kept` (in the order given), each
    `copies` entry a file left out and the kept file that holds its parts, and `clashes`,
    pairs of one writer's files that share some parts but not all (neither can be left out)."""

    kept: list[str] = field(default_factory=list)
    copies: list[tuple[str, str]] = field(default_factory=list)
    clashes: list[tuple[str, str]] = field(default_factory=list)


def unique_files(files: Sequence[tuple[str, Identity | None]]) -> UniqueFiles:
    """`files` (name, identity), each writer's parts held once: its widest files first (a
    rolled file over the parts it holds), then a file named for what it holds, then by name.
    A file without an identity is kept: nothing says what it holds."""
    found = UniqueFiles()
    held: dict[str, list[tuple[int, int, str]]] = {}
    skipped: set[str] = set()
    identified = [(name, ident) for name, ident in files if ident is not None]
    for name, ident in sorted(identified, key=_preference):
        spans = [
            s for s in held.get(ident.writer, []) if s[0] <= ident.last and ident.first <= s[1]
        ]
        if not spans:
            held.setdefault(ident.writer, []).append((ident.first, ident.last, name))
        elif _spanned(spans, ident.first, ident.last):
            found.copies.append((name, spans[0][2]))
            skipped.add(name)
        else:
            found.clashes.append((spans[0][2], name))
    found.kept = [name for name, _ in files if name not in skipped]
    return found


def _preference(file: tuple[str, Identity]) -> tuple[int, bool, str]:
    name, ident = file
    named = parse(name)
    as_named = named is not None and (named.first, named.last) == (ident.first, ident.last)
    return (ident.first - ident.last, not as_named, name)


def _spanned(spans: list[tuple[int, int, str]], first: int, last: int) -> bool:
    """Whether `spans` (first, last, name) hold every number of first..last."""
    at = first
    for low, high, _ in sorted(spans):
        if low > at:
            return False
        at = max(at, high + 1)
    return at > last
