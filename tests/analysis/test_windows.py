"""Latency per window (analysis.windows, read by analysis.window_report) against the exact
percentiles of the synthetic samples the per-second digests were built from."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.digests import DIGEST_ARROW, STORED_COLUMNS, centroid_pairs, digest_of, rank_error
from analysis.window_report import read_windows
from analysis.windows import (
    COMPRESS_AT,
    WINDOW_QUANTILES,
    WindowMerger,
    compress,
    quantiles,
    window_width_s,
)
from tests.analysis.longrun import digest_table, latencies_ms


@pytest.mark.parametrize(
    ("span_s", "width_s"),
    [(20, 1), (360, 3), (390, 3), (3600, 30), (86_400, 600), (10 * 86_400, 3600)],
)
def test_the_window_width_gives_at_least_a_hundred_windows(span_s, width_s):
    assert window_width_s(span_s) == width_s
    assert span_s / width_s >= 100 or width_s == 1


def _add(merger, table):
    centroids = table.column("centroids").combine_chunks()
    offsets = centroids.offsets.to_numpy()
    pairs = centroids.flatten()
    merger.add(
        table.column("second").to_numpy(),
        table.column("n").to_numpy(),
        table.column("min_ms").to_numpy(),
        table.column("max_ms").to_numpy(),
        offsets - offsets[0],
        pairs.field("m").to_numpy(),
        pairs.field("c").to_numpy(),
    )


def test_single_value_centroids_give_numpys_percentiles_exactly_in_any_order():
    values = latencies_ms(600, 50)  # 10 minutes at 50/s; one in 10^4 an 80 ms spike
    table = digest_table("e2e", values)
    merger = WindowMerger(60)
    shuffled = np.random.default_rng(1).permutation(table.num_rows)
    for part in np.array_split(shuffled, 7):  # batches out of order
        _add(merger, table.take(part))
    windows = merger.windows()
    assert [w["start_s"] for w in windows] == list(range(0, 600, 60))
    for window in windows:
        mine = values[window["start_s"] : window["start_s"] + 60].ravel()
        assert window["n"] == mine.size == 3000 and window["p9999_is_max"]
        assert window["p50_ms"] == pytest.approx(np.percentile(mine, 50), rel=1e-12)
        assert window["p99_ms"] == pytest.approx(np.percentile(mine, 99), rel=1e-12)
        assert window["p9999_ms"] == window["max_ms"] == mine.max()


def _digest_rows(values):
    """digests.parquet rows of real per-second T-Digests (fastdigest, 3000 centroids)."""
    rows = []
    for second, chunk in enumerate(values):
        digest = digest_of(np.sort(chunk))
        pairs = centroid_pairs(digest, digest.to_bytes())
        rows.append(
            {
                "metric": "e2e",
                "step": 1,
                "second": second,
                "n": chunk.size,
                "min_ms": chunk.min(),
                "max_ms": chunk.max(),
                "centroids": [{"m": m, "c": c} for m, c in pairs],
            }
        )
    # digests.parquet's columns, as the analysis writes them.
    schema = pa.schema([DIGEST_ARROW.field(name) for name in STORED_COLUMNS if name in rows[0]])
    return pa.Table.from_pylist(rows, schema=schema)


def _within_rank_error(estimate, exact_sorted, q, bound):
    """The estimate lies between the exact order statistics at q -/+ the bound (and a rank)."""
    n = exact_sorted.size
    low = exact_sorted[max(0, int(np.floor((q - bound) * (n - 1))) - 1)]
    high = exact_sorted[min(n - 1, int(np.ceil((q + bound) * (n - 1))) + 1)]
    return low <= estimate <= high


def test_digested_seconds_merge_within_the_digests_rank_error(tmp_path):
    """Seconds of 8,000 events (digests of up to 3000 centroids, so not every value is one),
    with one event in 10^4 a spike: the gap case. Read back from a stored digests.parquet; the
    windows are compressed on the way (more than COMPRESS_AT centroids each)."""
    values = latencies_ms(40, 8000, seed=5)
    stored = tmp_path / "digests.parquet"
    stored.mkdir()
    table = _digest_rows(values)
    pq.write_table(table.slice(0, 25), stored / "a.parquet")
    pq.write_table(table.slice(25), stored / "b.parquet")
    windows = read_windows(stored, "e2e", 20)
    assert len(windows) == 2 and [w["n"] for w in windows] == [160_000, 160_000]
    for window in windows:
        mine = np.sort(values[window["start_s"] : window["start_s"] + 20].ravel())
        rows = table.slice(window["start_s"], 20).column("centroids").combine_chunks().flatten()
        pooled = np.stack([rows.field("m").to_numpy(), rows.field("c").to_numpy()], axis=1)
        assert len(pooled) > COMPRESS_AT
        pooled = pooled[np.argsort(pooled[:, 0], kind="stable")]
        assert not window["p9999_is_max"] and window["max_ms"] == mine[-1]
        for name, q in WINDOW_QUANTILES.items():
            bound = rank_error(pooled, q) + 1e-5  # compression: within a k1 unit (~1e-5)
            estimate = window[f"{name}_ms"]
            assert _within_rank_error(estimate, mine, q, bound), (name, estimate, bound)


def test_compression_keeps_the_tails_nearly_exact():
    rng = np.random.default_rng(2)
    values = np.concatenate([rng.lognormal(1.0, 0.4, 999_900), np.full(100, 80.0)])
    means, weights = compress(values, np.ones(values.size))
    assert len(means) <= 5000 and weights.sum() == values.size
    exact = np.sort(values)
    for q in (0.5, 0.99, 0.999, 0.9999):
        estimate = quantiles(means, weights, exact[0], exact[-1], [q])[0]
        assert _within_rank_error(estimate, exact, q, 2e-5), q


def test_a_window_with_no_samples_is_left_out_and_an_empty_store_gives_none(tmp_path):
    merger = WindowMerger(10)
    _add(merger, digest_table("e2e", latencies_ms(5, 10)))
    assert [w["start_s"] for w in merger.windows()] == [0]
    assert read_windows(tmp_path / "missing.parquet", "e2e", 10) == []
