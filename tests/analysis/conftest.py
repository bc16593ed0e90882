"""One local SparkSession for every analysis test (starting Spark costs seconds)."""

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from analysis.spark import session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    spark = session("local[2]", "evbench-tests")
    yield spark
    spark.stop()
