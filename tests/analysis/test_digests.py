"""T-Digest figures against exact quantiles, through the same Spark path the job uses."""

import json

import numpy as np
import pandas as pd
import pytest
import tdigest

from analysis.digests import (
    P9999_MIN_SAMPLES,
    cumulative_lines,
    digest_of,
    from_json,
    merged,
    per_second_digests,
    per_step_digests,
    prefix_digests,
    tail_figures,
    to_json,
)


def _spiky_latencies(n: int, seed: int) -> np.ndarray:
    """Gamma-shaped body (1-3 ms) plus rare bursts of 5-40 ms stalls and single large spikes."""
    rng = np.random.default_rng(seed)
    values = rng.gamma(4, 0.4, n) + 0.5
    for start in rng.integers(0, n - 50, n // 20_000):
        values[start : start + 50] += rng.uniform(5, 40)
    values[rng.integers(0, n, n // 5_000)] *= 30
    return values


@pytest.mark.parametrize(("n", "seed"), [(100_000, 1), (300_000, 2)])
def test_tail_accuracy_through_spark(spark, n, seed):
    values = _spiky_latencies(n, seed)
    seconds = np.arange(n) * 200 // n  # 200 seconds of data
    frame = pd.DataFrame({"metric": "e2e", "step": 1, "second": seconds, "value_ms": values})
    rows = [r.asDict() for r in per_second_digests(spark.createDataFrame(frame)).collect()]
    assert len(rows) == 200 and sum(r["n"] for r in rows) == n
    figures = tail_figures(merged(from_json(r["digest"]) for r in rows))
    assert figures["n"] == n and not figures["p9999_is_max"]
    assert figures["p9999"] == pytest.approx(np.quantile(values, 0.9999), rel=0.01)
    assert figures["p99"] == pytest.approx(np.quantile(values, 0.99), rel=0.005)
    assert figures["p50"] == pytest.approx(np.quantile(values, 0.5), rel=0.005)
    assert figures["max"] == pytest.approx(values.max())
    # per-second rows carry exact extremes
    assert min(r["min_ms"] for r in rows) == values.min()


def test_small_samples_report_the_max_as_p9999():
    values = np.arange(1.0, P9999_MIN_SAMPLES)  # one short of the threshold
    figures = tail_figures(digest_of(values))
    assert figures["p9999_is_max"] and figures["p9999"] == figures["max"] == values.max()
    assert tail_figures(digest_of([]))["n"] == 0


def test_stored_format_is_read_by_the_tdigest_package_and_round_trips():
    values = _spiky_latencies(50_000, 3)
    digest = digest_of(values)
    text = to_json(digest)
    doc = json.loads(text)
    assert {"n", "delta", "K", "centroids"} <= set(doc) and {"m", "c"} == set(doc["centroids"][0])
    other = tdigest.TDigest().update_from_dict(doc)
    assert other.percentile(99) == pytest.approx(digest.quantile(0.99), rel=0.01)
    back = from_json(text)
    assert back.n_values == digest.n_values
    assert back.quantile(0.999) == pytest.approx(digest.quantile(0.999), rel=1e-9)


def test_cumulative_line_continues_across_steps_and_ends_at_the_whole_run(spark):
    rng = np.random.default_rng(4)
    # two steps of three seconds; an early spike, as at the start of the 2019 runs
    chunks = {s: rng.gamma(2, 1, 1000) + (50 if s == 0 else 0) for s in range(6)}
    frame = pd.DataFrame(
        [
            {"metric": "e2e", "step": 1 if s < 3 else 2, "second": s, "value_ms": v}
            for s, values in chunks.items()
            for v in values
        ]
    )
    per_second = per_second_digests(spark.createDataFrame(frame)).cache()
    steps = {
        (r["metric"], r["step"]): from_json(r["digest"])
        for r in per_step_digests(per_second).collect()
    }
    prefixes = spark.createDataFrame(
        prefix_digests(steps, [1, 2]), "metric string, step int, prefix string"
    )
    line = sorted(
        (r.asDict() for r in cumulative_lines(per_second, prefixes).collect()),
        key=lambda r: r["second"],
    )
    assert [p["second"] for p in line] == list(range(6))
    assert [p["n"] for p in line] == [1000 * (s + 1) for s in range(6)]
    everything = np.concatenate(list(chunks.values()))
    assert line[-1]["p99_ms"] == pytest.approx(np.quantile(everything, 0.99), rel=0.01)
    assert line[-1]["p99_ms"] == pytest.approx(
        tail_figures(merged(steps.values()))["p99"], rel=1e-6
    )
    assert line[0]["p50_ms"] > line[-1]["p50_ms"]  # the spike dominates the start
