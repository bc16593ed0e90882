"""Reading a run's record directories into DataFrames, with errors that name the bad file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

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
