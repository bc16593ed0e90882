"""`--export-knative`: results as the 2019 two-column files, so existing gnuplot scripts plot them.

Each file is `x_ms_since_epoch,value` without a header, latencies in ms, written to
`<sut>/analysis/knative/`:
- points-{publish,delivery}-latency.csv: one row per event, x = its send time;
- p99-, p99-9-, p99-99-{publish,delivery}-latency.csv: the cumulative lines, one row per event
  as 2019 wrote them. Events in send order (ties by sequence number) feed one T-Digest of
  compression 1000 (fastdigest, `max_centroids=1000`), one value at a time; row i is x = event
  i's send time and y = that digest's quantile right after event i went in, i.e. of the first
  i samples. The digest's own estimate, as 2019's: under 10^4 samples P99.99 is not replaced by
  the maximum, and the right end can differ from summary.json's exact tail figures. (The
  report's cumulative lines, in cumulative.parquet, stay one point per second.)
- {send,delivery,send-failure,delivery-failure}-throughput.csv: per event, the trailing
  one-second count.
Delivery latency is 2019's RECEIVED - SENT (`e2e_uncorrected`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import fastdigest
import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.digests import CUMULATIVE_CENTROIDS
from contract.layout import SutDir
from contract.units import NS_PER_MS, NS_PER_S

# File prefix -> (column of the running line, quantile).
CUMULATIVE_FILES = {
    "p99": ("p99_ms", 0.99),
    "p99-9": ("p999_ms", 0.999),
    "p99-99": ("p9999_ms", 0.9999),
}
# File metric -> latency column of the events.
CUMULATIVE_METRICS = {"publish": "publish_ms", "delivery": "e2e_uncorrected_ms"}
RUNNING_SCHEMA = (
    "sut string, metric string, n long, sent_ns long, p99_ms double, p999_ms double, "
    "p9999_ms double"
)


def _ms(column: str) -> F.Column:
    return F.col(column) / F.lit(float(NS_PER_MS))


def trailing_throughput(df: DataFrame, time_col: str) -> DataFrame:
    """The 2019 throughput: at each event's time t, the number of events in (t - 1 s, t].

    One sample per event, so the line shows oscillation that per-second buckets would hide.
    Needs every event of a SUT in one ordered window: for exports, not for the main job.
    """
    window = Window.partitionBy("sut").orderBy("t_ns").rangeBetween(-(NS_PER_S - 1), 0)
    return df.select("sut", F.col(time_col).alias("t_ns")).withColumn(
        "per_s", F.count(F.lit(1)).over(window)
    )


def _per_event_files(events: DataFrame) -> dict[str, DataFrame]:
    """File name -> (sut, x, y) rows."""
    sent = events.where(F.col("sent_ns").isNotNull())
    return {
        "points-publish-latency.csv": events.where(F.col("publish_ms").isNotNull()).select(
            "sut", _ms("sent_ns").alias("x"), F.col("publish_ms").alias("y")
        ),
        "points-delivery-latency.csv": events.where(F.col("e2e_uncorrected_ms").isNotNull()).select(
            "sut", _ms("sent_ns").alias("x"), F.col("e2e_uncorrected_ms").alias("y")
        ),
        "send-throughput.csv": trailing_throughput(sent, "sent_ns"),
        "delivery-throughput.csv": trailing_throughput(events.where("delivered"), "received_ns"),
        "send-failure-throughput.csv": trailing_throughput(
            events.where("send_failure"), "intended_ns"
        ),
        "delivery-failure-throughput.csv": trailing_throughput(events.where("lost"), "sent_ns"),
    }


def running_quantiles(
    values_ms: np.ndarray, digest: fastdigest.TDigest | None = None
) -> np.ndarray:
    """Row i: the p99, p99.9 and p99.99 of values_ms[: i + 1], from one T-Digest of compression
    1000 fed a value at a time, as the 2019 processor did; `digest` (a line's so far) goes on
    from where its last batch left it.

    fastdigest buffers an update and folds it in at the next query, so each event costs one
    merge into <= 1000 centroids: ~10 us measured, ~5 s for a 500k-event SUT and metric."""
    if digest is None:
        digest = fastdigest.TDigest(max_centroids=CUMULATIVE_CENTROIDS)
    update, quantile = digest.update, digest.quantile
    qs = [q for _, q in CUMULATIVE_FILES.values()]
    out = np.empty((len(values_ms), len(qs)))
    for i, value in enumerate(values_ms.tolist()):
        update(value)
        out[i] = [quantile(q) for q in qs]
    return out


def running_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A partition's samples, sorted by (sut, metric, sent_ns, seq) -> the cumulative lines, a
    row per event. A line is fed batch by batch, carrying its digest and count across batches:
    memory is a batch and a digest, whatever the run's length."""
    key: tuple[str, str] | None = None
    digest, count = None, 0
    for batch in batches:
        if batch.num_rows == 0:  # an empty partition's batch
            continue
        suts, metrics = batch.column("sut").to_pylist(), batch.column("metric").to_pylist()
        starts = [
            i
            for i in range(batch.num_rows)
            if i == 0 or (suts[i], metrics[i]) != (suts[i - 1], metrics[i - 1])
        ]
        for start, end in zip(starts, [*starts[1:], batch.num_rows], strict=True):
            if (suts[start], metrics[start]) != key:
                key = (suts[start], metrics[start])
                digest, count = fastdigest.TDigest(max_centroids=CUMULATIVE_CENTROIDS), 0
            part = batch.slice(start, end - start)
            lines = running_quantiles(part.column("value_ms").to_numpy(), digest)
            yield pa.RecordBatch.from_pydict(
                {
                    "sut": part.column("sut"),
                    "metric": part.column("metric"),
                    "n": pa.array(np.arange(count + 1, count + part.num_rows + 1)),
                    "sent_ns": part.column("sent_ns"),
                    **{c: lines[:, i] for i, (c, _) in enumerate(CUMULATIVE_FILES.values())},
                }
            )
            count += part.num_rows


def running_lines(events: DataFrame) -> DataFrame:
    """(sut, metric, n, sent_ns, p99_ms, p999_ms, p9999_ms): the 2019 cumulative lines, one row
    per sample. Each (sut, metric) line is one partition's sorted run (Spark's sort spills to
    disk), streamed through its digest on an executor in batches: raw events never reach the
    driver, and no line is held whole in memory (a day at 1,000/s is 86 M samples a line)."""
    samples = [
        events.where(F.col(column).isNotNull()).select(
            "sut", F.lit(metric).alias("metric"), "sent_ns", "seq", F.col(column).alias("value_ms")
        )
        for metric, column in CUMULATIVE_METRICS.items()
    ]
    union = samples[0].unionByName(samples[1]).repartition("sut", "metric")
    ordered = union.sortWithinPartitions("sut", "metric", "sent_ns", "seq")
    return ordered.mapInArrow(running_batches, RUNNING_SCHEMA)


def _cumulative_files(lines: DataFrame) -> dict[str, DataFrame]:
    """File name -> (sut, x, y, n) rows; `n` keeps the running order where send times tie."""
    return {
        f"{prefix}-{metric}-latency.csv": lines.where(F.col("metric") == metric).select(
            "sut", _ms("sent_ns").alias("x"), F.col(column).alias("y"), "n"
        )
        for metric in CUMULATIVE_METRICS
        for prefix, (column, _) in CUMULATIVE_FILES.items()
    }


def export_knative(events: DataFrame, dirs: dict[str, Path]) -> None:
    """Write every SUT's two-column files (`dirs`: sut key -> SUT directory)."""
    targets = {key: SutDir(path).knative_export for key, path in dirs.items()}
    for target in targets.values():
        target.mkdir(parents=True, exist_ok=True)
    # Six files read the running lines: computed once.
    lines = running_lines(events).cache()
    staging = Path(tempfile.mkdtemp(prefix=".evbench-export-", dir=next(iter(dirs.values()))))
    try:
        files = {**_per_event_files(events), **_cumulative_files(lines)}
        for name, frame in files.items():
            if "t_ns" in frame.columns:  # throughput: x = the event's time, y = the count
                frame = frame.select("sut", _ms("t_ns").alias("x"), F.col("per_s").alias("y"))
            _write_two_column(frame, staging / name, {k: t / name for k, t in targets.items()})
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        lines.unpersist()


def _write_two_column(frame: DataFrame, staging: Path, outs: dict[str, Path]) -> None:
    """One task per SUT, sorted by x (then by `n`, where the frame has it) inside it, so each
    SUT gets one ordered file; its parts are concatenated into `outs[sut]`."""
    order = ["sut", "x", *(["n"] if "n" in frame.columns else [])]
    frame.repartition("sut").sortWithinPartitions(*order).select(
        "sut", F.format_string("%.3f", "x").alias("x"), "y"
    ).write.partitionBy("sut").option("header", "false").csv(str(staging))
    for key, out in outs.items():
        parts = sorted((staging / f"sut={key}").glob("part-*.csv"))
        with out.open("wb") as merged:
            for part in parts:
                merged.write(part.read_bytes())
