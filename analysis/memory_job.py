"""A memory run (`evbench memory`) through Spark like every other run: every scenario's samples
read together, reduced to per-second series (the largest sample of each second), the figures
recomputed from them, and one report for the run."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.load import load_records
from analysis.memory import memory_figures
from contract.documents import read_document
from contract.memorydocs import (
    MemoryDoc,
    MemoryFiguresDoc,
    MemorySummaryDoc,
    MemorySummaryRowDoc,
)
from contract.records import MEMORY_SAMPLE_FIELDS
from contract.units import NS_PER_S

SERIES_COLUMNS = (
    "rss_bytes",
    "uss_bytes",
    "hwm_bytes",
    "consumed",
    "py_traced_bytes",
    "fetchq_bytes",
)


def is_memory_run(path: Path) -> bool:
    return (path / "memory.json").is_file()


def per_second(samples: DataFrame) -> DataFrame:
    """(scenario, whole seconds since its consumer started (`started_ns`), each second's
    largest values)."""
    return (
        samples.withColumn(
            "second", F.floor((F.col("t_ns") - F.col("started_ns")) / F.lit(NS_PER_S))
        )
        .groupBy("scenario", "second")
        .agg(*(F.max(c).alias(c) for c in SERIES_COLUMNS))
        .orderBy("scenario", "second")
    )


def analyze_memory(
    spark: SparkSession, root: Path
) -> tuple[list[MemorySummaryRowDoc], dict[str, list[dict[str, Any]]]]:
    """Each scenario's row (scenario.json with figures from the series) and its series."""
    scenarios = read_document(root / "memory.json", MemoryDoc)["scenarios"]
    names = [s.get("folder", f"{s['consumer']}-p{s['partitions']}") for s in scenarios]
    frames = [
        load_records(spark, root / name / "samples" / "memory", MEMORY_SAMPLE_FIELDS)
        .where(F.col("process") == "consumer")
        .withColumn("scenario", F.lit(name))
        .withColumn("started_ns", F.lit(scenario["consumer_started_ns"]).cast("long"))
        for name, scenario in zip(names, scenarios, strict=True)
    ]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    series: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for row in per_second(union).collect():
        series[row["scenario"]].append(row.asDict())
    rows: list[MemorySummaryRowDoc] = []
    for name, scenario in zip(names, scenarios, strict=True):
        points = series[name]
        hwm = max((p["hwm_bytes"] or 0 for p in points), default=None)
        figures = (
            memory_figures(
                [(p["second"], p["rss_bytes"]) for p in points],
                scenario["first_message_s"],
                scenario["drained_s"],
                hwm,
            )
            if points
            else None
        )
        figures_doc = cast(MemoryFiguresDoc, asdict(figures)) if figures else None
        done = cast(MemorySummaryRowDoc, {**scenario, "scenario": name})
        done["figures"] = figures_doc
        rows.append(done)
    summary: MemorySummaryDoc = {"scenarios": rows}
    (root / "memory-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return rows, series
