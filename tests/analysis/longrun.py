"""A synthetic long run's analysis directory, written directly (no events, no Spark): what the job
leaves for a soak of `hours` at `rate_per_s`, one step, whose e2e latency creeps from 2 to 12 ms.

The per-second digests are written in digests.parquet's stored format (analysis.digests
STORED_COLUMNS), each second's values as single-value centroids, which is what a digest of so
few values holds; so the windows merged from them are numpy's exact percentiles.
"""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.drift import drift_of
from analysis.verdicts import Thresholds, drift_verdict_text
from contract.figures import TailDoc
from contract.layout import SutDir
from contract.summarydocs import SummaryDoc

S = 1_000_000_000
T0 = 1_750_000_000 * S
CENTROID = pa.struct([("m", pa.float64()), ("c", pa.float64())])


def latencies_ms(seconds: int, rate_per_s: int, seed: int = 3) -> np.ndarray:
    """(seconds, rate) e2e latencies: a median creeping 2 -> 12 ms, lognormal noise, and one
    event in 10^4 a 80 ms spike."""
    rng = np.random.default_rng(seed)
    level = 2.0 + 10.0 * np.arange(seconds) / seconds
    values = level[:, None] * rng.lognormal(0.0, 0.3, (seconds, rate_per_s))
    spikes = rng.random((seconds, rate_per_s)) < 1e-4
    return np.where(spikes, 80.0, values)


def digest_table(metric: str, values: np.ndarray, first_second: int = 0) -> pa.Table:
    """digests.parquet's rows of one metric: a row per second (a row of `values`)."""
    seconds, rate = values.shape
    ordered = np.sort(values, axis=1)
    offsets = pa.array(np.arange(seconds + 1, dtype=np.int32) * rate)
    pairs = pa.StructArray.from_arrays(
        [pa.array(ordered.ravel()), pa.array(np.ones(ordered.size))], fields=list(CENTROID)
    )
    p50, p99 = np.percentile(values, [50, 99], axis=1)
    return pa.table(
        {
            "metric": [metric] * seconds,
            "step": pa.array(np.ones(seconds, dtype=np.int32)),
            "second": pa.array(np.arange(first_second, first_second + seconds)),
            "n": pa.array(np.full(seconds, rate)),
            "min_ms": ordered[:, 0],
            "max_ms": ordered[:, -1],
            "p50_ms": p50,
            "p99_ms": p99,
            "centroids": pa.ListArray.from_arrays(offsets, pairs),
        }
    )


def _tail(values: np.ndarray) -> TailDoc:
    p50, p99, p999, p9999 = (float(v) for v in np.percentile(values, [50, 99, 99.9, 99.99]))
    return {
        "p50": p50,
        "p99": p99,
        "p999": p999,
        "p9999": p9999,
        "max": float(values.max()),
        "n": int(values.size),
        "p9999_is_max": False,
        "exact": ["p50", "p99", "p999", "p9999"],
        "rank_error": {},
    }


def _summary(hours: float, rate_per_s: int, e2e: np.ndarray, points: list[dict]) -> SummaryDoc:
    seconds = e2e.shape[0]
    events = seconds * rate_per_s
    counts = dict.fromkeys(("duplicates", "foreign", "decoys", "filtered", "leaked", "lost"), 0)
    step = {
        "step": 1,
        "target_rate_per_s": rate_per_s,
        "duration_s": seconds,
        "scheduled": events,
        "achieved_send_rate_per_s": float(rate_per_s),
        "delivered_rate_per_s": float(rate_per_s),
        **{k: 0 for k in ("send_failures", "inflight_cap_refused", "lost", "duplicates")},
        **{k: 0 for k in ("filtered", "leaked")},
        "sender_lag_p99_ms": 0.2,
        "p99_e2e_ms": float(np.percentile(e2e, 99)),
        "p9999_e2e_ms": float(np.percentile(e2e, 99.99)),
        "e2e_n": events,
        "p9999_is_max": False,
        "e2e_rise_ms": 10.0,
        "verdict": "holds",
        "reasons": [],
        "drift": drift_of(points, Thresholds()),
    }
    return {
        "run_id": "run-soak",
        "sut": "direct",
        "pace": f"{rate_per_s}:{seconds}",
        "status": "completed",
        # as analysis.summary words it: the capacity, then the drifting step
        "verdict": f"held every judged step; max sustainable {rate_per_s}/s; "
        + drift_verdict_text([(1, rate_per_s, step["drift"])]),
        "instrument_failures": [],
        "schedule_start_ns": T0,
        "schedule_start_from": "run.json",
        "trim_s": 0.0,
        "trimmed": None,
        "counts": {
            **counts,
            **dict.fromkeys(("sent", "scheduled", "acked", "received"), events),
            "send_failures": 0,
        },
        "latency_ms": {"e2e": _tail(e2e), "publish": _tail(e2e / 4)},
        "steps": [step],
        "breaking_point_per_s": None,
        "max_sustainable_rate_per_s": rate_per_s,
        "thresholds": Thresholds().as_dict(),
    }


def write_long_run(sut_dir: Path, hours: float, rate_per_s: int = 20) -> SummaryDoc:
    """The analysis files of a soak: summary.json, metrics, cumulative lines, points (at the
    job's 100,000 buckets), per-second digests of e2e and publish, and three processes'
    samples every second. Returns its summary."""
    layout = SutDir(sut_dir)
    layout.analysis.mkdir(parents=True)
    e2e = latencies_ms(int(hours * 3600), rate_per_s)
    seconds = np.arange(e2e.shape[0])
    layout.digests_parquet.mkdir()
    for metric, values in (("e2e", e2e), ("publish", e2e / 4)):
        pq.write_table(digest_table(metric, values), layout.digests_parquet / f"{metric}.parquet")
    points = digest_table("e2e", e2e).select(["step", "second", "n", "p50_ms", "p99_ms"])
    summary = _summary(hours, rate_per_s, e2e, points.to_pylist())
    layout.summary_json.write_text(json.dumps(summary))
    counts = {k: np.full(seconds.size, rate_per_s) for k in ("scheduled", "sent", "acked")}
    zeros = np.zeros(seconds.size, dtype=np.int64)
    metrics = {"second": seconds, "t_ns": T0 + seconds * S, "step": np.ones(seconds.size)}
    metrics |= {"target_rate_per_s": counts["sent"], "send_failures": zeros, "lost": zeros}
    metrics |= {**counts, "delivered": counts["sent"] - (seconds % 7 == 0)}
    pq.write_table(pa.table(metrics), layout.metrics_parquet)
    running = np.maximum.accumulate(e2e.max(axis=1))
    n = (seconds + 1) * rate_per_s
    cumulative = [
        pa.table({"metric": [m] * seconds.size, "second": seconds, "n": n, "p9999_ms": running / d})
        for m, d in (("e2e", 1.0), ("publish", 4.0))
    ]
    pq.write_table(pa.concat_tables(cumulative), layout.cumulative_parquet)
    _write_points(layout, e2e)
    _write_samples(layout, seconds.size)
    layout.run_json.write_text(json.dumps({"schedule": {"start_ns": T0}}))
    return summary


def _write_points(layout: SutDir, e2e: np.ndarray, buckets: int = 100_000) -> None:
    flat = e2e.ravel()
    size = -(-flat.size // buckets)
    starts = np.arange(0, flat.size, size)
    highest = np.maximum.reduceat(flat, starts)
    t_ns = T0 + starts * (S // e2e.shape[1])
    table = {"t_ns": t_ns, "events": np.full(starts.size, size), "e2e_ms": highest}
    pq.write_table(pa.table({**table, "publish_ms": highest / 4}), layout.points_parquet)


def _write_samples(layout: SutDir, seconds: int) -> None:
    layout.samples.mkdir(parents=True, exist_ok=True)
    t_ns = T0 + np.arange(seconds) * S
    rows = {
        "t_ns": np.tile(t_ns, 3),
        "process": np.repeat(["sender", "receiver", "sut"], seconds),
        "pid": np.repeat([1, 2, 3], seconds),
        "rss_bytes": np.repeat([100e6, 120e6, 300e6], seconds) + np.tile(np.arange(seconds), 3),
        "cpu_percent": np.tile(np.arange(seconds) % 50, 3).astype(float),
    }
    pq.write_table(pa.table(rows), layout.samples / "processes-0.parquet")
