"""`--export-knative`: results as the 2019 two-column files, so existing gnuplot scripts plot them.

Each file is `x_ms_since_epoch,value` without a header, latencies in ms, written to
`<sut>/analysis/knative/`: points-{publish,delivery}-latency.csv (one row per event, x = send
time), p99-, p99-9-, p99-99-{publish,delivery}-latency.csv (the cumulative lines, one row per
second) and {send,delivery,send-failure,delivery-failure}-throughput.csv (per event, the
trailing one-second count). Delivery latency is 2019's RECEIVED - SENT (`e2e_uncorrected`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.transforms import trailing_throughput

CUMULATIVE_FILES = {"p99": "p99_ms", "p99-9": "p999_ms", "p99-99": "p9999_ms"}
CUMULATIVE_METRICS = {"publish": "publish", "delivery": "e2e_uncorrected"}


def _ms(column: str) -> F.Column:
    return F.col(column) / F.lit(1e6)


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


def export_knative(
    events: DataFrame,
    cumulative: dict[str, list[dict]],
    starts_ns: dict[str, int],
    dirs: dict[str, Path],
) -> None:
    """Write every SUT's two-column files (`dirs`: sut key -> SUT directory)."""
    targets = {key: path / "analysis" / "knative" for key, path in dirs.items()}
    for target in targets.values():
        target.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".evbench-export-", dir=next(iter(dirs.values()))))
    try:
        for name, frame in _per_event_files(events).items():
            if "t_ns" in frame.columns:  # throughput: x = the event's time, y = the count
                frame = frame.select("sut", _ms("t_ns").alias("x"), F.col("per_s").alias("y"))
            out = staging / name
            # One task per SUT, sorted by time inside it, so each SUT gets one ordered file.
            frame.repartition("sut").sortWithinPartitions("sut", "x").select(
                "sut", F.format_string("%.3f", "x").alias("x"), "y"
            ).write.partitionBy("sut").option("header", "false").csv(str(out))
            for key, target in targets.items():
                parts = sorted((out / f"sut={key}").glob("part-*.csv"))
                with (target / name).open("wb") as merged:
                    for part in parts:
                        merged.write(part.read_bytes())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for key, target in targets.items():
        for file_metric, metric in CUMULATIVE_METRICS.items():
            line = sorted(
                (r for r in cumulative.get(key, []) if r["metric"] == metric),
                key=lambda r: r["second"],
            )
            for prefix, column in CUMULATIVE_FILES.items():
                rows = [
                    f"{(starts_ns[key] + (r['second'] + 1) * 10**9) / 1e6:.3f},{r[column]}"
                    for r in line
                    if r[column] is not None
                ]
                (target / f"{prefix}-{file_metric}-latency.csv").write_text(
                    "\n".join(rows) + ("\n" if rows else "")
                )
