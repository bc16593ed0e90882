"""T-Digest figures against exact quantiles, through the functions the job's stages run."""

import fastdigest
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tdigest

from analysis.digests import (
    P9999_MIN_SAMPLES,
    centroid_pairs,
    cumulative_points,
    digest_from_row,
    digest_of,
    digest_rows,
    from_bytes,
    line_tasks,
    merged,
    merged_top,
    quantile,
    tail_figures,
    top_values,
    verified_top,
    write_per_second,
)
from contract.errors import EvbenchError


def _spiky_latencies(n: int, seed: int) -> np.ndarray:
    """Gamma-shaped body (1-3 ms) plus rare bursts of 5-40 ms stalls and single large spikes."""
    rng = np.random.default_rng(seed)
    values = rng.gamma(4, 0.4, n) + 0.5
    for start in rng.integers(0, n - 50, n // 20_000):
        values[start : start + 50] += rng.uniform(5, 40)
    values[rng.integers(0, n, n // 5_000)] *= 30
    return values


def _step_digests(values, seconds, steps, sut="x", metric="e2e"):
    """What a task makes of each (sut, step): its per-second and step digest rows
    (analysis.steps runs digest_rows per group), with one latency metric."""
    rows = []
    for step in np.unique(steps):
        mine = steps == step
        column = pa.chunked_array([pa.array(values[mine])])
        table = digest_rows(sut, int(step), seconds[mine], {f"{metric}_ms": column})
        rows.extend(table.to_pylist())
    return rows


@pytest.mark.parametrize(("n", "seed"), [(100_000, 1), (300_000, 2)])
def test_tail_accuracy(n, seed):
    values = _spiky_latencies(n, seed)
    seconds = np.arange(n) * 200 // n  # 200 seconds in 4 steps of 50
    rows = _step_digests(values, seconds, seconds // 50 + 1)
    per_second = [r for r in rows if r["second"] is not None]
    per_step = [r for r in rows if r["second"] is None]
    assert len(per_second) == 200 and sum(r["n"] for r in per_second) == n
    assert len(per_step) == 4 and sum(r["n"] for r in per_step) == n
    for parts in (per_second, per_step):  # merging seconds or steps: both within bounds
        figures = tail_figures(merged(from_bytes(r["digest"]) for r in parts))
        assert figures["n"] == n and not figures["p9999_is_max"]
        assert figures["p9999"] == pytest.approx(np.quantile(values, 0.9999), rel=0.01)
        assert figures["p99"] == pytest.approx(np.quantile(values, 0.99), rel=0.005)
        assert figures["p50"] == pytest.approx(np.quantile(values, 0.5), rel=0.005)
        assert figures["max"] == pytest.approx(values.max())
    assert min(r["min_ms"] for r in per_second) == values.min()


def test_stored_rows_are_the_tdigest_dict_format(tmp_path):
    values = _spiky_latencies(50_000, 3)
    column = pa.chunked_array([pa.array(values)])
    rows = digest_rows("x", 1, np.zeros(50_000, np.int64), {"e2e_ms": column})
    write_per_second(rows.filter(pa.compute.is_valid(rows["second"])), str(tmp_path), "x", 1)
    # what a user of digests.parquet reads: plain dicts with n and centroids [{m, c}]
    stored = pq.read_table(tmp_path / "digests" / "sut=x").to_pylist()[0]
    assert {"m", "c"} == set(stored["centroids"][0])
    other = tdigest.TDigest()
    other.update_from_dict(stored)
    assert other.percentile(99) == pytest.approx(np.quantile(values, 0.99), rel=0.01)
    back = digest_from_row(stored)
    assert back.n_values == 50_000
    assert back.quantile(0.999) == pytest.approx(np.quantile(values, 0.999), rel=0.01)


def test_small_samples_report_the_max_as_p9999():
    values = np.arange(1.0, P9999_MIN_SAMPLES)  # one short of the threshold
    figures = tail_figures(digest_of(values))
    assert figures["p9999_is_max"] and figures["p9999"] == figures["max"] == values.max()
    assert tail_figures(digest_of([]))["n"] == 0


def test_cumulative_line_continues_across_steps_and_suts_stay_apart(tmp_path):
    rng = np.random.default_rng(4)
    # two steps of three seconds; an early spike, as at the start of the 2019 runs
    chunks = {s: rng.gamma(2, 1, 1000) + (50 if s == 0 else 0) for s in range(6)}
    values = np.concatenate(list(chunks.values()))
    seconds = np.repeat(np.arange(6), 1000)
    steps = np.where(seconds < 3, 1, 2)
    # each step in slices of two seconds (analysis.slices): step 1 in two, step 2 in two
    parts = np.where(steps == 1, seconds // 2, (seconds - 3) // 2)
    per_slice = {}
    for sut, scale in (("a", 1), ("b", 10)):  # same seconds, other SUT
        for step, part in ((1, 0), (1, 1), (2, 0), (2, 1)):
            mine = (steps == step) & (parts == part)
            column = pa.chunked_array([pa.array(values[mine] * scale)])
            rows = digest_rows(sut, step, seconds[mine], {"e2e_ms": column})
            whole = rows.filter(pa.compute.is_null(rows["second"])).to_pylist()[0]
            per_slice[(sut, "e2e", step, part)] = from_bytes(whole["digest"])
            per_second = rows.filter(pa.compute.is_valid(rows["second"]))
            write_per_second(per_second, str(tmp_path), sut, step, part)
    order = [(1, 0), (1, 1), (2, 0), (2, 1)]
    tasks = line_tasks(per_slice, {"a": order, "b": order}, str(tmp_path))
    points = list(cumulative_points(tasks))
    line = sorted((p for p in points if p["sut"] == "a"), key=lambda p: p["second"])
    assert [p["second"] for p in line] == list(range(6))
    assert [p["n"] for p in line] == [1000 * (s + 1) for s in range(6)]
    assert line[-1]["p99_ms"] == pytest.approx(np.quantile(values, 0.99), rel=0.01)
    assert line[0]["p50_ms"] > line[-1]["p50_ms"]  # the spike dominates the start
    other = max((p for p in points if p["sut"] == "b"), key=lambda p: p["second"])
    assert other["p99_ms"] == pytest.approx(10 * np.quantile(values, 0.99), rel=0.01)


@pytest.mark.parametrize("n", [1, 5, 1500, 50_000])
def test_centroids_read_from_the_bytes_are_the_digests_own(n):
    digest = digest_of(np.random.default_rng(n).gamma(2, 1, n))
    pairs = centroid_pairs(digest, digest.to_bytes())
    assert np.array_equal(pairs, np.asarray(digest.centroids, dtype=float).reshape(-1, 2))
    # ...and read from the bytes, not from the slow list: a view of them, so not writable (the
    # fast path went unused for as long as fastdigest's format tag was checked too strictly)
    assert not pairs.flags.writeable
    # bytes of another shape fall back to the digest's own list
    empty = fastdigest.TDigest(max_centroids=10)
    assert centroid_pairs(digest, b"not a digest").shape == (digest.n_centroids, 2)
    assert centroid_pairs(empty, empty.to_bytes()).shape == (0, 2)


def test_p9999_at_the_edge_of_a_spike_cluster_is_exact():
    """P99.99 right where a cluster of rare spikes begins: a T-Digest alone interpolates into the
    empty gap between body and spikes (37.8 ms against an exact 10.8 ms, measured); the kept top
    values make it exact, also after merging steps."""
    rng = np.random.default_rng(11)
    n = 500_000
    values = rng.gamma(4, 0.5, n) + 1.0
    spikes = rng.choice(n, size=n // 10_000, replace=False)  # exactly 10^-4 of the samples
    values[spikes] += 80.0
    seconds = np.arange(n) * 100 // n
    rows = [r for r in _step_digests(values, seconds, seconds // 25 + 1) if r["second"] is None]
    parts = [(from_bytes(r["digest"]), np.asarray(r["top_ms"])) for r in rows]
    assert len(parts) == 4
    figures = tail_figures(merged(d for d, _ in parts), merged_top(t for _, t in parts))
    for name, q in (("p9999", 0.9999), ("p999", 0.999)):
        assert figures[name] == pytest.approx(np.quantile(values, q), rel=0.01), name
    assert "p9999" in figures["exact"] and figures["max"] == pytest.approx(values.max())


@pytest.mark.parametrize("n", [1, 7, 1000, 5000, 200_000])
def test_exact_quantiles_match_numpy_wherever_claimed(n):
    values = np.random.default_rng(n).lognormal(0, 1, n)
    digest, top = digest_of(values), top_values(values)
    for q in (0.5, 0.9, 0.99, 0.999, 0.9999, 1.0):
        value, exact = quantile(digest, top, q)
        if exact:
            assert value == pytest.approx(np.quantile(values, q), rel=1e-12)
        else:
            assert (1 - q) * n > len(top) - 2  # only ranks outside the kept tail are estimated
    assert quantile(digest, top, 0.9999)[1] == (n <= 10_000_000)


def test_a_step_file_the_driver_cannot_see_is_an_error_not_a_missing_line(tmp_path):
    # Every step writes its file, empty or not: a missing one was written on another machine.
    digest = digest_of([1.0, 2.0])
    tasks = line_tasks({("s0", "e2e", 1, 0): digest}, {"s0": [(1, 0)]}, str(tmp_path))
    with pytest.raises(EvbenchError, match="executors must write to the run directory"):
        list(cumulative_points(tasks))


@pytest.mark.parametrize(
    "values",
    [
        _spiky_latencies(36_000, 7),
        np.repeat([1.5, 2.0, 2.0, 9.0], 2_500),  # ties everywhere
        np.random.default_rng(3).gamma(2, 0.3, 700),  # fewer values than centroids
    ],
)
def test_a_digest_fed_its_values_in_order_is_the_same_digest(values):
    # digest_rows feeds fastdigest sorted values, which it digests in half the time: the digest
    # (its bytes) must be the one the values in any order give.
    shuffled = np.random.default_rng(1).permutation(values)
    assert digest_of(np.sort(values)).to_bytes() == digest_of(shuffled).to_bytes()


def _part(values, kept):
    values = np.asarray(values, dtype=float)
    return digest_of(values), top_values(values, kept)


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        # Nothing cut off: every value of the union.
        ([_part([3, 1, 2], 5), _part([9, 4], 5)], [9, 4, 3, 2, 1]),
        # A part kept 10 of its 100 values (91..100): under 91 it may hide others, so the
        # union's list stops above it, whatever the complete part holds below.
        (
            [_part(range(1, 101), 10), _part([95.5, 50, 20], 5)],
            [*range(100, 95, -1), 95.5, 95, 94, 93, 92],
        ),
        # Two cut off: the higher of their floors.
        (
            [_part(range(1, 101), 10), _part(range(50, 99), 5)],
            [100, 99, 98, 98, 97, 97, 96, 96, 95, 95],
        ),
        ([_part([5.0, 6.0], 1)], []),  # kept one of two: past it, nothing is known
    ],
)
def test_the_runs_top_values_are_kept_only_as_far_as_they_are_the_runs(parts, expected):
    assert verified_top(parts).tolist() == expected


def test_a_runs_p9999_is_exact_where_its_verified_top_reaches_its_rank():
    rng = np.random.default_rng(5)
    steps = [rng.gamma(2.0, 1.0, 30_000), rng.gamma(2.0, 1.0, 30_000) + 0.5]
    parts = [_part(v, 40) for v in steps]  # each step keeps 40 of 30,000
    union = np.concatenate(steps)
    value, exact = quantile(merged(d for d, _ in parts), verified_top(parts), 0.9999)
    assert exact and value == pytest.approx(np.quantile(union, 0.9999), abs=1e-12)
    cut = [_part(v, 3) for v in steps]  # 3 of 30,000 each: the rank (7th largest) is past them
    assert not quantile(merged(d for d, _ in cut), verified_top(cut), 0.9999)[1]


def test_a_steps_row_is_its_seconds_merged_with_its_exact_extremes():
    """The whole step's (or slice's) row: the merge of its seconds' digests (as the driver
    merges slices), its count, min, max and top values from every value, exact."""
    rng = np.random.default_rng(11)
    seconds = np.repeat(np.arange(5, dtype=np.int64), 20_000)
    values = _spiky_latencies(len(seconds), 5)
    column = pa.array(values)
    rows = digest_rows("x", 1, rng.permutation(seconds), {"e2e_ms": column}).to_pylist()
    per_second = [row for row in rows if row["second"] is not None]
    (step,) = [row for row in rows if row["second"] is None]
    assert len(per_second) == 5
    expected = merged(from_bytes(row["digest"]) for row in per_second)
    assert step["digest"] == expected.to_bytes()
    assert step["n"] == len(values)
    assert (step["min_ms"], step["max_ms"]) == (values.min(), values.max())
    assert step["top_ms"] == list(top_values(values, len(step["top_ms"])))
    exact = np.quantile(values, 0.99, method="inverted_cdf")
    assert abs(step["p99_ms"] - exact) / exact < 0.02
