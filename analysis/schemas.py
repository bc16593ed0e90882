"""Spark schemas, derived from the record contract like the Arrow ones."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import types as T

from contract.records import Field

_SPARK_TYPES = {
    "string": T.StringType(),
    "int64": T.LongType(),
    "int32": T.IntegerType(),
    "float64": T.DoubleType(),
    "bool": T.BooleanType(),
}


def spark_schema(fields: Sequence[Field]) -> T.StructType:
    return T.StructType([T.StructField(f.name, _SPARK_TYPES[f.type], f.nullable) for f in fields])
