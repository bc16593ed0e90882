"""The SparkSession the analysis runs on: local[*] by default, any master for a cluster."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"


def session(master: str = "local[*]", app_name: str = "evbench-analyze") -> SparkSession:
    # Python workers must be this interpreter: a bare `python3` on PATH lacks our packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local"):
        # The driver's RPC and block-manager ports bind the host's external address by default;
        # in local mode nothing outside this machine needs them (a cluster's executors do).
        builder = builder.config("spark.driver.host", LOOPBACK).config(
            "spark.driver.bindAddress", LOOPBACK
        )
    spark = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Runs are seconds-by-metrics sized after the first aggregation; a few partitions suffice
        # locally, and adaptive execution coalesces further on a cluster.
        .config("spark.sql.shuffle.partitions", "8" if master.startswith("local") else "200")
        .config("spark.driver.memory", os.environ.get("EVBENCH_DRIVER_MEMORY", "2g"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
