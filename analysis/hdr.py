"""`--export-hdr`: each system's latencies as HdrHistogram interval logs.

HdrHistogram's own tools read them (its HistogramLogProcessor and plotter, the `hdrhistogram`
Python package, wrk2-style percentile charts). Per system, `<sut>/analysis/hdr/`:
`e2e.hlog` and `publish.hlog` for the whole run, and `step-N/e2e.hlog` and `step-N/publish.hlog`
for each step (the summary's definitions: analysis.steprule.LATENCIES_NS). One interval per
second of the run, keyed by the second each event was due (as the per-second digests are);
every line untagged and each interval once in its log, so that a reader that adds every
interval up (the Python package's HistogramLogReader, which does not filter by tag) and one
that reads untagged lines only (HistogramLogProcessor without `-tag`) count each event once.
(Tagged lines beside untagged ones in one log were counted twice by the first.) A second that
two steps share (a pace with no gap between steps) is one interval of the whole run's log, the
two steps' histograms added up, and a line in each step's. Values are nanoseconds, 3
significant digits (every value within 0.1 % of its bucket), from 0 to an hour; the
interval's max column is in milliseconds (the tools' default ratio, 10^6). A value outside that
range is recorded at its end (a negative end-to-end latency after clock correction as 0, a
latency over an hour as an hour) and counted in a comment at the file's end: counted, never
dropped.

The histograms are built with numpy here (the bucket arithmetic of HdrHistogram's layout) and
encoded in its V2 compressed form; the `hdrhistogram` package is the tests' reader, the oracle
that the encoding is HdrHistogram's own.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from contract.units import NS_PER_MS, NS_PER_S

SIGNIFICANT_DIGITS = 3
HIGHEST_NS = 3_600 * NS_PER_S
METRICS = ("e2e", "publish")
# HdrHistogram's layout for lowest trackable value 1 (unit magnitude 0): 2^11 sub-buckets,
# the smallest power of two >= 2 x 10^digits, and buckets doubling from there.
_SUB_BUCKET_COUNT_MAGNITUDE = math.ceil(math.log2(2 * 10**SIGNIFICANT_DIGITS))
_HALF_COUNT_MAGNITUDE = _SUB_BUCKET_COUNT_MAGNITUDE - 1
_SUB_BUCKET_MASK = (1 << _SUB_BUCKET_COUNT_MAGNITUDE) - 1
# The V2 encoding's cookies (with the word-size nibble 0x10) and its header: cookie, payload
# length, normalizing index offset, significant digits, lowest, highest, integer-to-double ratio.
_ENCODING_COOKIE = 0x1C849303 | 0x10
_COMPRESSED_COOKIE = 0x1C849304 | 0x10
_HEADER = struct.Struct(">iiiiqqd")
HDR_ROWS = pa.schema(
    [
        ("sut", pa.string()),
        ("metric", pa.string()),
        ("second", pa.int64()),
        ("step", pa.int64()),
        ("n", pa.int64()),
        ("max_ns", pa.int64()),
        ("histogram", pa.string()),
        ("below", pa.int64()),  # values under 0, recorded as 0
        ("above", pa.int64()),  # values over HIGHEST_NS, recorded as HIGHEST_NS
    ]
)


def counts_index(values_ns: np.ndarray) -> np.ndarray:
    """Each value's index in HdrHistogram's counts array (values in 0 .. HIGHEST_NS)."""
    values = values_ns.astype(np.int64)
    # bit_length(v | mask) from float64's exponent: exact, as values stay below 2^53.
    _, bits = np.frexp((values | _SUB_BUCKET_MASK).astype(np.float64))
    bucket = bits.astype(np.int64) - _SUB_BUCKET_COUNT_MAGNITUDE
    sub_bucket = values >> bucket
    return ((bucket + 1) << _HALF_COUNT_MAGNITUDE) + sub_bucket - (1 << _HALF_COUNT_MAGNITUDE)


def _zigzag_leb128(counts: np.ndarray) -> bytes:
    """The V2 payload: counts as ZigZag LEB128 varints, each run of zeros before a count as its
    negated length. Vectorised: a second at 20,000/s has thousands of filled buckets."""
    nonzero = np.flatnonzero(counts)
    if len(nonzero) == 0:
        return b""
    zeros_before = np.diff(nonzero, prepend=-1) - 1
    tokens = np.stack([-zeros_before, counts[nonzero]], axis=1).ravel()
    tokens = tokens[np.stack([zeros_before > 0, np.ones(len(nonzero), bool)], axis=1).ravel()]
    zigzag = ((tokens << 1) ^ (tokens >> 63)).astype(np.uint64)
    # Up to 8 groups of 7 bits: counts and runs stay far below 2^56, where LEB128 and
    # HdrHistogram's 9-byte variant agree.
    shifts = np.arange(8, dtype=np.uint64) * np.uint64(7)
    groups = ((zigzag[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    length = 1 + ((zigzag[:, None] >> shifts[1:]) > 0).sum(axis=1)
    position = np.arange(8)[None, :]
    groups |= ((position < (length[:, None] - 1)) * 0x80).astype(np.uint8)
    return groups[position < length[:, None]].tobytes()


def encode(values_ns: np.ndarray) -> str:
    """One histogram of `values_ns` (already within 0 .. HIGHEST_NS), base64 of its V2
    compressed encoding, as HdrHistogram's interval logs hold it."""
    indexes = counts_index(values_ns)
    return encode_counts(np.bincount(indexes) if len(indexes) else np.zeros(0, np.int64))


def encode_counts(counts: np.ndarray) -> str:
    """A counts array in HdrHistogram's layout (counts_index), encoded as `encode` does."""
    payload = _zigzag_leb128(counts)
    header = _HEADER.pack(_ENCODING_COOKIE, len(payload), 0, SIGNIFICANT_DIGITS, 1, HIGHEST_NS, 1.0)
    deflated = zlib.compress(header + payload)
    return base64.b64encode(
        struct.pack(">ii", _COMPRESSED_COOKIE, len(deflated)) + deflated
    ).decode()


def decode_counts(histogram: str) -> np.ndarray:
    """`encode`'s histogram back to its counts array (this module's layout only: lowest 1,
    3 digits, no normalizing offset), up to its last non-zero count."""
    raw = base64.b64decode(histogram)
    _, length = struct.unpack_from(">ii", raw)
    inflated = zlib.decompress(raw[8 : 8 + length])
    payload_bytes = _HEADER.unpack_from(inflated)[1]
    data = np.frombuffer(inflated, np.uint8, payload_bytes, _HEADER.size)
    if len(data) == 0:
        return np.zeros(0, np.int64)
    # LEB128: a token's last byte is the one with its high bit clear.
    ends = np.flatnonzero(data < 0x80)
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    token = np.repeat(np.arange(len(ends)), ends - starts + 1)
    shifts = (np.arange(len(data)) - starts[token]).astype(np.uint64) * np.uint64(7)
    zigzag = np.zeros(len(ends), np.uint64)
    np.add.at(zigzag, token, (data & 0x7F).astype(np.uint64) << shifts)
    tokens = (zigzag >> np.uint64(1)).astype(np.int64) ^ -(zigzag & np.uint64(1)).astype(np.int64)
    # A negative token is a run of that many zero counts; any other, the next index's count.
    widths = np.where(tokens < 0, -tokens, 1)
    at = np.cumsum(widths) - widths
    counts = np.zeros(int(widths.sum()), np.int64)
    counts[at[tokens >= 0]] = tokens[tokens >= 0]
    return counts


def merged(histograms: Sequence[str]) -> str:
    """Histograms of `encode` added up: as `encode` of all their values together."""
    parts = [decode_counts(h) for h in histograms]
    total = np.zeros(max((len(p) for p in parts), default=0), np.int64)
    for part in parts:
        total[: len(part)] += part
    return encode_counts(total)


def interval_rows(
    sut: str, metric: str, steps: np.ndarray, seconds: np.ndarray, values_ns: np.ndarray
) -> dict[str, list[object]]:
    """HDR_ROWS' columns for one metric of one slice: a histogram per (second, step)."""
    rows: dict[str, list[object]] = {name: [] for name in HDR_ROWS.names}
    if len(values_ns) == 0:
        return rows
    order = np.lexsort((steps, seconds))
    steps, seconds, values = steps[order], seconds[order], values_ns[order]
    edges = np.flatnonzero((np.diff(seconds) != 0) | (np.diff(steps) != 0)) + 1
    for start, end in zip([0, *edges.tolist()], [*edges.tolist(), len(values)], strict=True):
        raw = values[start:end]
        kept = np.clip(raw, 0, HIGHEST_NS)
        for name, value in (
            ("sut", sut),
            ("metric", metric),
            ("second", int(seconds[start])),
            ("step", int(steps[start])),
            ("n", len(raw)),
            ("max_ns", int(kept.max())),
            ("histogram", encode(kept)),
            ("below", int((raw < 0).sum())),
            ("above", int((raw > HIGHEST_NS).sum())),
        ):
            rows[name].append(value)
    return rows


class Interval(NamedTuple):
    """One of HDR_ROWS: a histogram of one (system, metric, second, step)."""

    sut: str
    metric: str
    second: int
    step: int
    n: int
    max_ns: int
    histogram: str
    below: int
    above: int


def per_second(intervals: Iterable[Interval]) -> Iterator[Interval]:
    """Intervals sorted by (sut, metric, second, step) -> the whole run's: one per (sut,
    metric, second), a second that steps share (no gap between them) as one histogram of all
    its values, under its first step. Streams: one second at a time."""
    for _, group in groupby(intervals, key=lambda i: (i.sut, i.metric, i.second)):
        first, *rest = group
        if not rest:
            yield first
            continue
        parts = [first, *rest]
        yield first._replace(
            n=sum(p.n for p in parts),
            max_ns=max(p.max_ns for p in parts),
            histogram=merged([p.histogram for p in parts]),
            below=sum(p.below for p in parts),
            above=sum(p.above for p in parts),
        )


def log_head(start_ns: int, step: int | None = None) -> list[str]:
    """A log's first lines: its format version, the run's start as StartTime and BaseTime (the
    intervals' timestamps are seconds from it), what it holds (`step`: that step's, None: the
    whole run), the legend."""
    start_s = start_ns / NS_PER_S
    holds = "the whole run" if step is None else f"step {step} alone"
    return [
        "#[Histogram log format version 1.3]",
        f"#[StartTime: {start_s:.3f} (seconds since epoch)]",
        f"#[BaseTime: {start_s:.3f} (seconds since epoch)]",
        f"#[evbench: {holds}; values in nanoseconds, one interval per second the events were "
        "due, each once, untagged]",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
    ]


def interval_line(interval: Interval) -> str:
    """One interval, untagged: start (seconds from the base time), length, max (ms),
    histogram. Untagged, as HistogramLogProcessor reads without `-tag`."""
    max_ms = interval.max_ns / NS_PER_MS
    return f"{interval.second:.3f},1.000,{max_ms:.3f},{interval.histogram}"


def log_tail(below: int, above: int) -> list[str]:
    """A log's last line, where values were recorded at the range's ends: how many."""
    if not (below or above):
        return []
    whole_s = HIGHEST_NS // NS_PER_S
    return [
        f"#[evbench: {below} values below 0 recorded as 0 (clock correction), {above} over "
        f"{whole_s} s recorded as {whole_s} s]"
    ]
