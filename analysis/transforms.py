"""DataFrame -> DataFrame transforms (DESIGN §4 definitions). Each one is small and tested on a
hand-written frame; `analysis.job` chains them.

Vocabulary: an *event* is one sent row (one schedule slot); a *delivery* is one received row.
Every frame carries `sut` and `start_ns` (the SUT's schedule start, see `analysis.load`), so the
SUTs of a run go through one chain of jobs together.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from evbench.shared.clocks import Correction
from evbench.shared.records import INFLIGHT_CAP_ERROR

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000

# Latency metrics: name -> (end column, start column). Each is only defined where both exist and,
# for publish latencies, the answer was a 2xx.
LATENCIES_NS = {
    "publish": ("ack_ns", "sent_ns"),
    "publish_corrected": ("ack_ns", "intended_ns"),
    "e2e": ("received_ns", "intended_ns"),
    "e2e_uncorrected": ("received_ns", "sent_ns"),
    "sender_lag": ("sent_ns", "intended_ns"),
}


def _ok(status: Column) -> Column:
    return (status >= 200) & (status < 300)


def measured(sent: DataFrame) -> DataFrame:
    """Drop warmup events: they are recorded, never counted."""
    return sent.where(~F.col("warmup"))


def trimmed(sent: DataFrame, trim_s: float) -> DataFrame:
    """Drop events intended in the first `trim_s` seconds of the schedule (sanitized figures)."""
    if trim_s <= 0:
        return sent
    return sent.where(F.col("intended_ns") >= F.col("start_ns") + F.lit(int(trim_s * NS_PER_S)))


def first_deliveries(received: DataFrame) -> DataFrame:
    """One row per delivered event id: the first arrival counts, later ones are duplicates."""
    return received.groupBy("sut", "event_id").agg(
        F.min("received_ns").alias("received_ns"),
        F.count(F.lit(1)).alias("deliveries"),
    )


def join_deliveries(sent: DataFrame, deliveries: DataFrame) -> DataFrame:
    """Sent events with their first delivery, and deliveries of ids never sent, in one join.

    Full outer: a row with `is_sent` null is a foreign delivery (received, never sent); every other
    row is a sent event with its first `received_ns` (null when none) and its `deliveries`.
    Give it every sent event, warmup included, so warmup deliveries are not taken for foreign.
    """
    return (
        sent.withColumn("is_sent", F.lit(True))
        .join(deliveries, on=["sut", "event_id"], how="full")
        .withColumn("deliveries", F.coalesce(F.col("deliveries"), F.lit(0)))
    )


def sent_events(joined: DataFrame) -> DataFrame:
    return joined.where(F.col("is_sent").isNotNull()).drop("is_sent")


def foreign_deliveries(joined: DataFrame) -> DataFrame:
    """Ids received but never sent, with how often each arrived."""
    return joined.where(F.col("is_sent").isNull()).select("sut", "event_id", "deliveries")


def on_sender_clock(
    events: DataFrame, corrections: Mapping[tuple[str, int], Correction]
) -> DataFrame:
    """`received_ns` moved onto the clock of the worker that sent the event: minus the
    receiver's offset to that worker, interpolated at the event's intended time. Keyed by (sut,
    worker); events of other workers, and foreign deliveries, keep the receiver's stamp."""
    if not corrections:
        return events
    offset = F.lit(None).cast("double")
    for (sut, worker), correction in corrections.items():
        here = (F.col("sut") == F.lit(sut)) & (F.col("worker") == F.lit(worker))
        at = F.col("intended_ns") - F.lit(correction.before.at_ns)
        line = F.lit(float(correction.before.offset_ns)) + F.lit(correction.slope) * at
        offset = F.when(here, line).otherwise(offset)
    # The offset rounded to whole ns first: long minus double would be a double, which at
    # epoch nanoseconds resolves only 256 ns.
    corrected = F.col("received_ns") - F.round(offset).cast("long")
    return events.withColumn("received_ns", F.coalesce(corrected, F.col("received_ns")))


def with_outcomes(events: DataFrame) -> DataFrame:
    """ok = 2xx answer; send_failure = not ok; lost = ok but never received; duplicates.

    A decoy (a type the trigger should drop) is never lost: not arriving is `filtered`, and
    arriving is `leaked`, a filter that let through what it should not have.
    """
    ok = _ok(F.col("status"))
    missing = F.col("received_ns").isNull()
    return (
        events.withColumn("ok", ok)
        .withColumn("send_failure", ~ok)
        .withColumn("delivered", ~missing)
        .withColumn("lost", ok & missing & ~F.col("decoy"))
        .withColumn("filtered", ok & missing & F.col("decoy"))
        .withColumn("leaked", ~missing & F.col("decoy"))
        .withColumn("duplicates", F.greatest(F.col("deliveries") - 1, F.lit(0)))
    )


def with_latencies(events: DataFrame) -> DataFrame:
    """Latency columns in ms (`<name>_ms`). Publish latencies only for 2xx answers; end-to-end
    only for delivered events; sender lag for every event that was sent."""
    out = events
    for name, (end, start) in LATENCIES_NS.items():
        value = (F.col(end) - F.col(start)) / F.lit(float(NS_PER_MS))
        if name.startswith("publish"):
            value = F.when(_ok(F.col("status")), value)
        out = out.withColumn(f"{name}_ms", value)
    return out


def with_second(df: DataFrame, time_col: str, name: str = "second") -> DataFrame:
    """Whole seconds since the schedule start, by `time_col`."""
    return df.withColumn(
        name, F.floor((F.col(time_col) - F.col("start_ns")) / F.lit(NS_PER_S)).cast("long")
    )


def per_second(events: DataFrame) -> DataFrame:
    """The throughput series, one row per second since the schedule start.

    Sends count by `sent_ns`, failures and losses by `intended_ns` (when the event was due), and
    deliveries by `received_ns`, as in DESIGN §4. Quiet seconds inside the run are zero rows.
    """
    keys = ["sut", "second"]
    by_intent = (
        with_second(events, "intended_ns")
        .groupBy(*keys)
        .agg(
            F.count(F.lit(1)).alias("scheduled"),
            F.sum(F.col("send_failure").cast("long")).alias("send_failures"),
            F.sum(F.col("lost").cast("long")).alias("lost"),
            F.max("target_rate_per_s").alias("target_rate_per_s"),
            F.max("step").alias("step"),
        )
    )
    by_send = (
        with_second(events.where(F.col("sent_ns").isNotNull()), "sent_ns")
        .groupBy(*keys)
        .agg(F.count(F.lit(1)).alias("sent"), F.sum(F.col("ok").cast("long")).alias("acked"))
    )
    by_delivery = (
        with_second(events.where(F.col("delivered")), "received_ns")
        .groupBy(*keys)
        .agg(F.count(F.lit(1)).alias("delivered"))
    )
    counts = ["scheduled", "send_failures", "lost", "sent", "acked", "delivered"]
    joined = by_intent.join(by_send, keys, "full").join(by_delivery, keys, "full")
    # Every second from first to last, so a second in which nothing happened shows as zero
    # instead of vanishing between its neighbours (DESIGN §4: never hide oscillation).
    starts = events.select("sut", "start_ns").distinct()
    grid = (
        joined.groupBy("sut")
        .agg(F.min("second").alias("lo"), F.max("second").alias("hi"))
        .select("sut", F.explode(F.sequence("lo", "hi")).alias("second"))
    )
    return (
        grid.join(joined, keys, "left")
        .join(starts, "sut")
        .fillna(0, subset=counts)
        .withColumn("t_ns", F.col("second") * F.lit(NS_PER_S) + F.col("start_ns"))
        .select("sut", "second", "t_ns", "step", "target_rate_per_s", *counts)
    )


def latency_columns(events: DataFrame) -> DataFrame:
    """What the digests need and nothing more: (sut, step, second by intent, <metric>_ms…)."""
    return with_second(events, "intended_ns").select(
        "sut", "step", "second", *(f"{name}_ms" for name in LATENCIES_NS)
    )


def step_totals(events: DataFrame) -> DataFrame:
    """Per-step counts and the sender's achieved rate (as
    `evbench.shared.formulas.achieved_rate_per_s`)."""
    return (
        events.groupBy("sut", "step")
        .agg(
            F.max("target_rate_per_s").alias("target_rate_per_s"),
            F.count(F.lit(1)).alias("scheduled"),
            F.count("sent_ns").alias("sent"),
            F.count(F.when(F.col("error") == F.lit(INFLIGHT_CAP_ERROR), 1)).alias("cap_refused"),
            F.sum(F.col("ok").cast("long")).alias("acked"),
            F.sum(F.col("send_failure").cast("long")).alias("send_failures"),
            F.sum(F.col("lost").cast("long")).alias("lost"),
            F.sum(F.col("delivered").cast("long")).alias("delivered"),
            F.sum(F.col("duplicates")).alias("duplicates"),
            F.sum(F.col("decoy").cast("long")).alias("decoys"),
            F.sum(F.col("filtered").cast("long")).alias("filtered"),
            F.sum(F.col("leaked").cast("long")).alias("leaked"),
            F.min("intended_ns").alias("start_ns"),
            F.max("intended_ns").alias("last_intended_ns"),
            F.max("sent_ns").alias("last_sent_ns"),
            F.min("received_ns").alias("first_received_ns"),
            F.max("received_ns").alias("last_received_ns"),
            # Arrived before it was due: only a clock disagreement (or a wrong correction) does
            # that, so it is counted, never hidden.
            F.count(F.when(F.col("received_ns") < F.col("intended_ns"), 1)).alias("negative_e2e"),
        )
        .orderBy("sut", "step")
    )


def latency_points(events: DataFrame, bucket_ns: DataFrame) -> DataFrame:
    """Per-event latencies for the points view, bounded: events are grouped into time buckets
    (`bucket_ns` gives each SUT's width, chosen so a run has a bounded number of buckets) and
    each bucket keeps the maximum of each latency, so spikes are never averaged away. Where
    events are sparser than buckets, every event is its own point."""
    return (
        events.join(F.broadcast(bucket_ns), "sut")
        .withColumn(
            "bucket", F.floor((F.col("intended_ns") - F.col("start_ns")) / F.col("bucket_ns"))
        )
        .groupBy("sut", "bucket")
        .agg(
            F.min("intended_ns").alias("t_ns"),
            F.count(F.lit(1)).alias("events"),
            F.max("publish_ms").alias("publish_ms"),
            F.max("e2e_ms").alias("e2e_ms"),
        )
        .drop("bucket")
    )


def trailing_throughput(df: DataFrame, time_col: str) -> DataFrame:
    """The 2019 throughput: at each event's time t, the number of events in (t - 1 s, t].

    One sample per event, so the line shows oscillation that per-second buckets would hide.
    Needs every event of a SUT in one ordered window: for exports, not for the main job.
    """
    window = Window.partitionBy("sut").orderBy("t_ns").rangeBetween(-(NS_PER_S - 1), 0)
    return df.select("sut", F.col(time_col).alias("t_ns")).withColumn(
        "per_s", F.count(F.lit(1)).over(window)
    )
