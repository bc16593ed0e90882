"""DataFrame -> DataFrame transforms (DESIGN §4 definitions). Each one is small and tested on a
hand-written frame; `analysis.job` chains them.

Vocabulary: an *event* is one sent row (one schedule slot); a *delivery* is one received row.
Every frame carries `sut` and `start_ns` (the SUT's schedule start, see `analysis.load`), so the
SUTs of a run go through one chain of jobs together.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import BooleanType, DoubleType, LongType, StructField, StructType

from analysis.steprule import INPUT_COLUMNS as STEP_INPUTS
from analysis.steprule import LATENCIES_NS, RULE_INPUTS, latencies, outcomes
from analysis.steps import STEP_ARROW, StepContext, aggregate_step
from contract.clocks import Correction
from contract.records import INFLIGHT_CAP_ERROR
from contract.units import NS_PER_S

# The per-event outcomes the export reads (analysis.steprule.outcomes), besides `duplicates`.
RULE_FLAGS = ("ok", "send_failure", "delivered", "lost", "filtered", "leaked")
STEP_SCHEMA = from_arrow_schema(STEP_ARROW)


def _is_measured() -> Column:
    return ~F.col("warmup")


def _in_window(trim_s: float) -> Column:
    return F.col("intended_ns") >= F.col("start_ns") + F.lit(int(trim_s * NS_PER_S))


def measured(sent: DataFrame) -> DataFrame:
    """Drop warmup events: they are recorded, never counted."""
    return sent.where(_is_measured())


def trimmed(sent: DataFrame, trim_s: float) -> DataFrame:
    """Drop events intended in the first `trim_s` seconds of the schedule (sanitized figures)."""
    if trim_s <= 0:
        return sent
    return sent.where(_in_window(trim_s))


def counted(joined: DataFrame, trim_s: float) -> DataFrame:
    """What the figures count, from the joined rows in one filter: measured sent events inside
    the window (`measured`, `trimmed`) and the foreign deliveries (`is_sent` null, `step`
    null), which are counted apart."""
    keep = _is_measured() & (_in_window(trim_s) if trim_s > 0 else F.lit(True))
    return joined.where(F.col("is_sent").isNull() | keep)


def first_deliveries(received: DataFrame) -> DataFrame:
    """One row per delivered event id: the first arrival counts, later ones are duplicates."""
    return received.groupBy("sut", "event_id").agg(
        F.min("received_ns").alias("received_ns"),
        F.count(F.lit(1)).alias("deliveries"),
    )


def join_deliveries(sent: DataFrame, deliveries: DataFrame) -> DataFrame:
    """Sent events with their first delivery, and deliveries of ids never sent, in one join.

    A shuffled hash join: the deliveries are hashed, nothing is sorted (measured: the sort-merge
    join's sort was a third of a cold analysis's join stage).

    Full outer: a row with `is_sent` null is a foreign delivery (received, never sent); every other
    row is a sent event with its first `received_ns` (null when none) and its `deliveries`.
    Give it every sent event, warmup included, so warmup deliveries are not taken for foreign.
    """
    return (
        sent.withColumn("is_sent", F.lit(True))
        .join(deliveries.hint("shuffle_hash"), on=["sut", "event_id"], how="full")
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


def with_rule_columns(events: DataFrame, keep: Sequence[str]) -> DataFrame:
    """Sent events' `keep` columns with their outcomes and `<latency>_ms` columns, per event, for
    the 2019 export, which plots every event. Computed by the step rule itself
    (analysis.steprule, in numpy on the Python side) rather than by a SQL copy of it, so the two
    cannot disagree: the rule is written once."""
    narrow = events.select(*dict.fromkeys([*keep, *RULE_INPUTS]))
    derived = [StructField(name, BooleanType()) for name in RULE_FLAGS]
    derived.append(StructField("duplicates", LongType()))
    derived += [StructField(f"{name}_ms", DoubleType()) for name in LATENCIES_NS]
    schema = StructType([*narrow.schema.fields, *derived])

    def derive(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            table = pa.Table.from_batches([batch])
            found = outcomes(table)
            columns = {name: pa.array(found[name]) for name in RULE_FLAGS}
            columns["duplicates"] = pa.array(found["duplicates"], pa.int64())
            columns.update(latencies(table, found["ok"]))
            for name, column in columns.items():
                table = table.append_column(name, column)
            yield from table.to_batches()

    return narrow.mapInArrow(derive, schema)


def step_inputs(rows: DataFrame) -> DataFrame:
    """The raw columns a step group needs (analysis.steprule.INPUT_COLUMNS): outcomes and
    latencies are derived on the Python side, where they cost nothing to compute, instead of
    crossing to it as a dozen more columns."""
    refused = F.coalesce(F.col("error") == F.lit(INFLIGHT_CAP_ERROR), F.lit(False))
    return rows.withColumn("inflight_cap_refused", refused).select(*STEP_INPUTS)


def step_stats(inputs: DataFrame, context: StepContext) -> DataFrame:
    """Per (sut, step), in one Arrow pass: digests, totals, per-second counts and point buckets
    (analysis.steps); the group with a null step counts the foreign deliveries."""

    def aggregate(table: pa.Table) -> pa.Table:
        return aggregate_step(table, context=context)

    return inputs.groupBy("sut", "step").applyInArrow(aggregate, STEP_SCHEMA)


def trailing_throughput(df: DataFrame, time_col: str) -> DataFrame:
    """The 2019 throughput: at each event's time t, the number of events in (t - 1 s, t].

    One sample per event, so the line shows oscillation that per-second buckets would hide.
    Needs every event of a SUT in one ordered window: for exports, not for the main job.
    """
    window = Window.partitionBy("sut").orderBy("t_ns").rangeBetween(-(NS_PER_S - 1), 0)
    return df.select("sut", F.col(time_col).alias("t_ns")).withColumn(
        "per_s", F.count(F.lit(1)).over(window)
    )
