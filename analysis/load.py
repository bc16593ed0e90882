"""Reading a run's record directories into DataFrames, with errors that name the bad file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from analysis.schemas import spark_schema
from contract.records import Field
from runtime.parquet import check_parts


def load_records(
    spark: SparkSession,
    directory: Path,
    fields: Sequence[Field],
) -> DataFrame:
    """Every part file of `directory` as one DataFrame in contract schema.

    Footers are checked first (cheap), so a truncated file or a missing column is reported with
    its path instead of as a stack trace from an executor.
    """
    schema = spark_schema(fields)
    paths = check_parts(directory, fields)
    if not paths:
        return spark.createDataFrame([], schema)
    # The files the records' rule keeps (contract.partnames), not the directory: a roll cut
    # short leaves parts that its rolled file also holds.
    return spark.read.schema(schema).parquet(*(str(p) for p in paths))
