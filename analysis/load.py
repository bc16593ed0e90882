"""Reading a run's record directories into DataFrames, with errors that name the bad file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.schemas import spark_schema
from evbench.parquet import check_parts
from evbench.records import Field


def load_records(spark: SparkSession, directory: Path, fields: Sequence[Field]) -> DataFrame:
    """Every part file of `directory` as one DataFrame in contract schema.

    Footers are checked first (cheap), so a truncated file or a missing column is reported with
    its path before Spark starts, instead of as a stack trace from an executor.
    """
    schema = spark_schema(fields)
    paths = check_parts(directory, fields)
    if not paths:
        return spark.createDataFrame([], schema)
    # The directory, not the file list: Spark lists it in one go and skips `.`/`_` files too.
    return spark.read.schema(schema).parquet(str(directory))


def with_run_columns(df: DataFrame, sut: str, start_ns: int) -> DataFrame:
    """Tag a SUT's records so several SUTs can share one chain of transforms."""
    return df.withColumn("sut", F.lit(sut)).withColumn("start_ns", F.lit(start_ns).cast("long"))
