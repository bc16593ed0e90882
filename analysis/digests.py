"""T-Digests: built by the analysis' tasks on Spark's executors (fastdigest), merged into
per-step, whole-run and cumulative figures.

Each (sut, step) group (`analysis.steps`) builds, per metric, that step's per-second digests and
the step's own digest (its seconds' merged) in one pass. Between stages digests travel as
fastdigest bytes (serialising is ~1 µs; JSON was ~1 ms per digest and dominated the stage).
What is stored, `digests.parquet`, carries each digest as `n` plus
`centroids: list<struct<m, c>>`: a row read back is the `tdigest` package's dict format, so
either library loads it (`digest_from_row`).

Why 3000 centroids, not the 2019 compression of 1000: on latency data with rare large spikes,
1000 centroids put P99.99 of 10^6 samples up to 3.7 % off the exact value once per-second
digests are merged; 3000 kept it within 0.25 % in every case measured (lognormal with spikes,
GC-like bursts, bimodal; 10^5 and 10^6 samples).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import fastdigest
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from contract.errors import EvbenchError
from contract.figures import TailDoc

MAX_CENTROIDS = 3000
# Exact top values kept per step: every quantile whose rank from the top falls inside them is
# computed exactly. A T-Digest interpolates between centroids; where P99.99 sits at the edge of
# a spike cluster it lands in the empty gap between body and spikes (measured: 37.8 ms against an
# exact 10.8 ms on 500,798 samples). 1024 values cover P99.99 exactly up to ~10^7 samples.
TOP_K = 1024
# The cumulative P99.99 line reproduces the 2019 graphs, which used compression 1000, and drew
# it for publish and end-to-end (delivery) latency: the lines computed (analysis.figures draws
# them), each a pass over every per-second digest of its metric.
CUMULATIVE_CENTROIDS = 1000
CUMULATIVE_METRICS = ("publish", "e2e")
# Below this many samples P99.99 is not a percentile but the maximum, and is reported as such.
P9999_MIN_SAMPLES = 10_000
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999, "p9999": 0.9999}

_CENTROID = pa.struct([("m", pa.float64()), ("c", pa.float64())])
# `second` is null on the row that holds the whole step's digest.
DIGEST_ARROW = pa.schema(
    [
        ("sut", pa.string()),
        ("metric", pa.string()),
        ("step", pa.int32()),
        ("second", pa.int64()),
        ("n", pa.int64()),
        ("min_ms", pa.float64()),
        ("max_ms", pa.float64()),
        ("p50_ms", pa.float64()),
        ("p99_ms", pa.float64()),
        ("digest", pa.binary()),
        ("centroids", pa.list_(_CENTROID)),
        ("top_ms", pa.list_(pa.float64())),
    ]
)


def digest_of(values: np.ndarray | Iterable[float]) -> fastdigest.TDigest:
    array: Any = np.asarray(values, dtype=float)  # fastdigest takes any float sequence
    return fastdigest.TDigest.from_values(array, max_centroids=MAX_CENTROIDS)


# fastdigest's serialisation starts with this (then a version byte: b"FASTDIG~" in 0.9+,
# where the check for the whole b"FASTDIGE" had quietly sent every digest down the slow path).
_FORMAT_MAGIC = b"FASTDIG"


def centroid_pairs(digest: fastdigest.TDigest, data: bytes) -> np.ndarray:
    """The digest's (mean, weight) pairs as an (n, 2) array, read from its serialised `data`,
    which ends with them as little-endian float64 pairs: ~1 µs, where the list of tuples
    `digest.centroids` costs ~0.4 ms per 1500 centroids (a tenth of a step group's time).
    The list is the fallback should a fastdigest release serialise otherwise (a test holds the
    two equal)."""
    tail = 16 * digest.n_centroids
    if data.startswith(_FORMAT_MAGIC) and len(data) > tail:
        pairs = np.frombuffer(data, dtype="<f8", offset=len(data) - tail).reshape(-1, 2)
        if pairs[:, 1].sum() == digest.n_values:
            return pairs
    return np.asarray(digest.centroids, dtype=float).reshape(-1, 2)


def from_bytes(data: bytes) -> fastdigest.TDigest:
    return fastdigest.TDigest.from_bytes(data)


def digest_from_row(row: dict) -> fastdigest.TDigest:
    """A stored digests.parquet row (as read by pyarrow's to_pylist) back into a digest."""
    return fastdigest.TDigest.from_dict({"n": row["n"], "centroids": row["centroids"]})


def merged(digests: Iterable[fastdigest.TDigest]) -> fastdigest.TDigest:
    total = fastdigest.TDigest(max_centroids=MAX_CENTROIDS)
    for digest in digests:
        total.merge_inplace(digest)
    return total


def top_values(values: np.ndarray, k: int = TOP_K) -> np.ndarray:
    """The k largest values, largest first."""
    if len(values) > k:
        values = np.partition(values, len(values) - k)[len(values) - k :]
    return np.sort(values)[::-1]


def merged_top(tops: Iterable[np.ndarray], k: int = TOP_K) -> np.ndarray:
    """Exact: the k largest of a union are among the k largest of each part."""
    parts = [np.asarray(t, dtype=float) for t in tops if t is not None and len(t)]
    return top_values(np.concatenate(parts), k) if parts else np.empty(0)


def verified_top(parts: Iterable[tuple[fastdigest.TDigest, np.ndarray]]) -> np.ndarray:
    """The largest values of a union of parts (each a digest and its kept top values, largest
    first), as far as they are provably the union's: a part that kept fewer values than it
    holds may have dropped some just under its smallest kept one, so the union's list stops
    above the largest such value. A value it returns is exact; past its end, `quantile` falls
    back to the digest."""
    kept, floor = [], -np.inf
    for digest, top in parts:
        top = np.asarray(top, dtype=float)
        if len(top) < int(digest.n_values):  # cut off: below its last value, others may hide
            floor = max(floor, float(top[-1]) if len(top) else np.inf)
        kept.append(top)
    union = merged_top(kept, sum(len(t) for t in kept))
    return union[union > floor]


def union_sketch(
    parts: Sequence[tuple[fastdigest.TDigest, np.ndarray]],
) -> tuple[fastdigest.TDigest, np.ndarray]:
    """Several parts (steps, in order) as one: their digests merged, their top values as far as
    they are provably the union's (`verified_top`)."""
    return merged(d for d, _ in parts), verified_top(parts)


def quantile(digest: fastdigest.TDigest, top: np.ndarray | None, q: float) -> tuple[float, bool]:
    """(value, exact). Exact, numpy's linear interpolation, when both neighbouring order
    statistics are among the kept top values; otherwise the T-Digest's estimate."""
    n = int(digest.n_values)
    rank = q * (n - 1)
    low = int(np.floor(rank))
    from_top = n - 1 - low  # index of the lower order statistic in the descending top list
    if top is not None and 0 <= from_top < len(top) and (rank == low or from_top >= 1):
        lower = float(top[from_top])
        upper = float(top[from_top - 1]) if rank > low else lower
        return lower + (rank - low) * (upper - lower), True
    return float(digest.quantile(q)), False


def empty_tail() -> TailDoc:
    """The tail figures of no samples."""
    return {
        "p50": None,
        "p99": None,
        "p999": None,
        "p9999": None,
        "max": None,
        "n": 0,
        "p9999_is_max": False,
        "exact": [],
        "rank_error": {},
    }


def rank_error(pairs: np.ndarray, q: float) -> float:
    """How far from q the rank of a digest's estimate at q can be, as a fraction of its n: the
    estimate interpolates between the means of the two centroids around rank q·n, and every
    sample of those two may lie on either side of it."""
    weights = pairs[:, 1]
    n = float(weights.sum())
    if n == 0 or len(weights) == 0:
        return 0.0
    centres = np.cumsum(weights) - weights / 2
    at = int(np.clip(np.searchsorted(centres, q * n), 1, max(1, len(weights) - 1)))
    around = weights[at - 1 : at + 1].sum()
    return round(float(around) / n, 8)


def tail_figures(
    digest: fastdigest.TDigest, top: np.ndarray | None = None, with_errors: bool = True
) -> TailDoc:
    """p50 … p99.99, max and the sample count n. `exact` lists the figures computed exactly from
    the kept top values, `rank_error` bounds the others (left out without `with_errors`: the
    cumulative lines, a call per second, do not store it); P99.99 under 10^4 samples is flagged
    as the max."""
    n = int(digest.n_values)
    if n == 0:
        return empty_tail()
    values: dict[str, float] = {}
    exact = []
    errors: dict[str, float] = {}
    pairs: np.ndarray | None = None
    for name, q in QUANTILES.items():
        value, is_exact = quantile(digest, top, q)
        values[name] = round(value, 4)
        if is_exact:
            exact.append(name)
        elif with_errors and not (name == "p9999" and n < P9999_MIN_SAMPLES):
            pairs = centroid_pairs(digest, digest.to_bytes()) if pairs is None else pairs
            errors[name] = rank_error(pairs, q)
    top_value = round(float(top[0]) if top is not None and len(top) else digest.max(), 4)
    is_max = n < P9999_MIN_SAMPLES
    return {
        "p50": values["p50"],
        "p99": values["p99"],
        "p999": values["p999"],
        "p9999": top_value if is_max else values["p9999"],
        "max": top_value,
        "n": n,
        "p9999_is_max": is_max,
        "exact": exact,
        "rank_error": errors,
    }


def _digest_metric(
    sut: str, step: int, metric: str, seconds: np.ndarray, values: np.ndarray, top_k: int
) -> pa.Table:
    """One metric of one (sut, step): per-second digest rows and one whole-step row.

    Every second's digest is fed its values in ascending order: fastdigest builds the same
    digest from them (a test holds the bytes equal) in half the time (measured: 0.93 ms against
    1.87 ms for 36,000 values; numpy sorts them in 0.12 ms)."""
    order = np.argsort(seconds, kind="stable")  # nearly sorted already: seconds follow slots
    seconds, values = seconds[order], values[order]
    firsts, starts = np.unique(seconds, return_index=True)
    ends = np.append(starts[1:], len(values))
    chunks: list[tuple[int | None, np.ndarray]] = [
        (int(s), np.sort(values[a:b])) for s, a, b in zip(firsts, starts, ends, strict=True)
    ]
    # The whole step (or slice): its seconds' digests merged, as the driver merges slices
    # (from its values it cost half the digests' CPU: sorting a million values and feeding them
    # all again, ~25 ms a metric), its exact top values from all of them.
    chunks.append((None, values))
    rows: dict[str, list] = {name: [] for name in DIGEST_ARROW.names}
    means, weights, offsets = [], [], [0]
    seconds_digests: list[fastdigest.TDigest] = []
    for second, chunk in chunks:
        digest = digest_of(chunk) if second is not None else merged(seconds_digests)
        seconds_digests.append(digest)
        data = digest.to_bytes()
        centroids = centroid_pairs(digest, data)
        means.append(centroids[:, 0])
        weights.append(centroids[:, 1])
        offsets.append(offsets[-1] + len(centroids))
        rows["second"].append(second)
        rows["n"].append(len(chunk))
        rows["min_ms"].append(float(chunk.min()))
        rows["max_ms"].append(float(chunk.max()))
        rows["p50_ms"].append(float(digest.quantile(0.5)))
        rows["p99_ms"].append(float(digest.quantile(0.99)))
        rows["digest"].append(data)
        rows["top_ms"].append(top_values(chunk, top_k) if second is None else None)
    rows["sut"] = [sut] * len(chunks)
    rows["metric"] = [metric] * len(chunks)
    rows["step"] = [step] * len(chunks)
    centroid_values = pa.StructArray.from_arrays(
        [pa.array(np.concatenate(means)), pa.array(np.concatenate(weights))], fields=list(_CENTROID)
    )
    columns = [
        pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), centroid_values)
        if name == "centroids"
        else pa.array(rows[name], type=DIGEST_ARROW.field(name).type)
        for name in DIGEST_ARROW.names
    ]
    return pa.Table.from_arrays(columns, schema=DIGEST_ARROW)


def digest_rows(
    sut: str,
    step: int,
    seconds: np.ndarray,
    latencies: dict[str, pa.ChunkedArray],
    top_k: int = TOP_K,
) -> pa.Table:
    """One (sut, step): per metric (`<metric>_ms` -> values, null where undefined), per-second
    digest rows and one row with `second` null holding the step's digest (DIGEST_ARROW)."""
    parts = []
    for name, column in latencies.items():
        present = ~np.asarray(column.is_null())
        if present.any():
            values = column.fill_null(0.0).to_numpy()[present]
            parts.append(
                _digest_metric(sut, step, name.removesuffix("_ms"), seconds[present], values, top_k)
            )
    return pa.concat_tables(parts) if parts else DIGEST_ARROW.empty_table()


# digests.parquet: the per-second rows as users read them (the SUT is the directory).
STORED_COLUMNS = (
    "metric",
    "step",
    "second",
    "n",
    "min_ms",
    "max_ms",
    "p50_ms",
    "p99_ms",
    "centroids",
)
# What the cumulative lines read back: the per-second digests of their metrics, as bytes.
LINE_INPUT_COLUMNS = ("metric", "second", "digest")


def step_file(staging: str, kind: str, sut: str, step: int, part: int = 0) -> Path:
    """Where a slice's per-second digests are written: one file per (kind, sut, step, slice),
    named by them, so a retried task rewrites the same file rather than adding one."""
    return Path(staging) / kind / f"sut={sut}" / f"step-{step:06d}-{part:06d}.parquet"


def write_per_second(digests: pa.Table, staging: str, sut: str, step: int, part: int = 0) -> None:
    """A step's per-second digest rows, written by the executor that made them: into
    digests.parquet (STORED_COLUMNS) and, for the cumulative lines, as bytes. They are twice the
    size of the events they summarise; written here, they never cross into the JVM (measured:
    converting, caching, shuffling and writing them there took a third of a 3 M-event analysis).
    Each file appears whole (written aside, renamed)."""
    line_input = digests.filter(pc.is_in(digests.column("metric"), pa.array(CUMULATIVE_METRICS)))
    for kind, table in (
        ("digests", digests.select(list(STORED_COLUMNS))),
        ("lines", line_input.select(list(LINE_INPUT_COLUMNS))),
    ):
        target = step_file(staging, kind, sut, step, part)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        # Dictionary encoding for the metric name only: tried on the digest blobs (each one
        # unique) it cost five times the write (measured: 28 ms against 5 ms a step); and
        # statistics only where a reader filters, not on the centroids (6.2 -> 4.4 ms a file).
        keys = [name for name in ("metric", "step", "second") if name in table.column_names]
        pq.write_table(table, partial, use_dictionary=["metric"], write_statistics=keys)
        os.replace(partial, target)


def cumulative_line(
    sut: str, metric: str, prefix: bytes | None, seconds: list[int], digests: list[bytes]
) -> pa.Table:
    """One (sut, metric, step) of the 2019 line: at each second, the quantiles of every sample
    up to and including it. `prefix` is the merge of the metric's earlier steps (null for the
    first), so the line continues where the previous step left it."""
    # The 2019 line: one digest of compression 1000 fed everything sent so far. Its right end
    # can differ from the summary's figures, which are exact in the tail.
    running = fastdigest.TDigest(max_centroids=CUMULATIVE_CENTROIDS)
    if prefix is not None:
        running.merge_inplace(from_bytes(prefix))
    points: dict[str, list[Any]] = {
        name: [] for name in ("second", "n", "p50_ms", "p99_ms", "p999_ms", "p9999_ms", "max_ms")
    }
    for second, data in sorted(zip(seconds, digests, strict=True), key=lambda p: p[0]):
        running.merge_inplace(from_bytes(data))
        figures: Mapping[str, Any] = tail_figures(running, with_errors=False)
        points["second"].append(second)
        points["n"].append(figures["n"])
        for name in ("p50", "p99", "p999", "p9999", "max"):
            points[f"{name}_ms"].append(figures[name])
    count = len(points["second"])
    return pa.table({"sut": [sut] * count, "metric": [metric] * count, **points})


def cumulative_points(tasks: Iterable[tuple]) -> Iterator[dict]:
    """The cumulative lines' points, from the per-second digests the tasks wrote
    (`write_per_second`), one (sut, metric, slice, prefix, path) piece of line at a time
    (`line_tasks`): one slice's file in memory at a time.

    On the driver: these are aggregates (a digest per metric per second, never an event), and a
    line is a fold along time. Measured on a 3 M-event matrix: 0.6 s here, where as a Spark job
    (a task per piece, prefixes shipped to executors) it took 5 s."""
    files: dict[str, pa.Table] = {}
    for sut, metric, _, prefix, path in tasks:
        if path not in files:
            files.clear()  # pieces come slice by slice: keep only the slice at hand
            files[path] = _step_file(path)
        table = files[path]
        mine = table.filter(pc.equal(table.column("metric"), metric))
        yield from cumulative_line(
            sut,
            metric,
            prefix,
            mine.column("second").to_pylist(),
            mine.column("digest").to_pylist(),
        ).to_pylist()


def _step_file(path: str) -> pa.Table:
    """A step's per-second digests; every step writes its file, empty or not, so a missing one
    was written where this driver cannot see it."""
    try:
        return pq.read_table(path)
    except FileNotFoundError:
        raise EvbenchError(
            f"{path}: a step's per-second digests are missing here: the Spark executors must "
            "write to the run directory this driver reads (a filesystem both share)"
        ) from None


def line_tasks(
    slice_digest: dict[tuple[str, str, int, int], fastdigest.TDigest],
    slice_order: dict[str, list[tuple[int, int]]],
    staging: str,
) -> list[tuple[str, str, tuple[int, int], bytes | None, str]]:
    """For each (sut, metric, slice) of the cumulative lines, slices as (step, index) in time
    order: the merge of that metric's digests of all earlier slices, and the file of the
    slice's per-second digests; slice by slice, so that pieces sharing a file come together."""
    rows = []
    pairs = sorted({(s, m) for s, m, _, _ in slice_digest if m in CUMULATIVE_METRICS})
    for sut, metric in pairs:
        running: fastdigest.TDigest | None = None
        for step, part in slice_order[sut]:
            prefix = running.to_bytes() if running is not None else None
            path = str(step_file(staging, "lines", sut, step, part))
            rows.append((sut, metric, (step, part), prefix, path))
            digest = slice_digest.get((sut, metric, step, part))
            if digest is not None:
                running = digest.copy() if running is None else running.merge(digest)
    position = {sut: {key: i for i, key in enumerate(keys)} for sut, keys in slice_order.items()}
    rows.sort(key=lambda r: (r[0], position[r[0]][r[2]], r[1]))
    return rows
