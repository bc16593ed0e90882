"""Reading a run's record directories into DataFrames, with errors that name the bad file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.schemas import spark_schema
from contract.parquet import check_parts
from contract.records import Field


def load_records(
    spark: SparkSession,
    directory: Path,
    fields: Sequence[Field],
    checked: Sequence[Path] | None = None,
) -> DataFrame:
    """Every part file of `directory` as one DataFrame in contract schema.

    Footers are checked first (cheap), so a truncated file or a missing column is reported with
    its path instead of as a stack trace from an executor; `checked` are part files a caller
    already checked that way (before starting Spark).
    """
    schema = spark_schema(fields)
    paths = check_parts(directory, fields) if checked is None else checked
    if not paths:
        return spark.createDataFrame([], schema)
    if checked is not None:
        # The files the caller checked (the parts' compacted copy, analysis.compact), and only
        # those: a part written since is not half taken.
        return spark.read.schema(schema).parquet(*map(str, paths))
    # No list given: the directory, which Spark lists in one go (skipping `.`/`_` files).
    return spark.read.schema(schema).parquet(str(directory))


def with_run_columns(df: DataFrame, sut: str, start_ns: int) -> DataFrame:
    """Tag a SUT's records so several SUTs can share one chain of transforms.

    In the chain, `sut` is the job's key for one SUT directory (`s0`, `s1`, ...), not the SUT's
    name: directories of different runs may hold systems of the same name. Names come back from
    run.json when the job writes each directory's summary (analysis.summary)."""
    return df.withColumn("sut", F.lit(sut)).withColumn("start_ns", F.lit(start_ns).cast("long"))
