"""The SparkSession the analysis runs on: local[*] by default, any master for a cluster."""

from __future__ import annotations

import os
import sys
from urllib.parse import urlsplit

from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"


def session(
    master: str = "local[*]", app_name: str = "evbench-analyze", remote: str | None = None
) -> SparkSession:
    """A session on `master` (local[*], spark://HOST:PORT, ...), or with `remote`, a Spark
    Connect session (sc://HOST:PORT): the job then makes no driver-side SparkContext call."""
    if remote is not None:
        return SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
    # Python workers must be this interpreter: a bare `python3` on PATH lacks our packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    if (host := driver_host(master)) is not None:
        # The driver's RPC and block-manager ports bind the host's external address by default;
        # with every executor on this machine, nothing outside it needs them.
        builder = builder.config("spark.driver.host", host).config("spark.driver.bindAddress", host)
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


def driver_host(master: str) -> str | None:
    """Loopback for a master whose executors all run on this machine (local mode, or a
    standalone master on loopback); None lets Spark pick the address a cluster can reach."""
    if master.startswith("local"):
        return LOOPBACK
    host = urlsplit(master).hostname
    return LOOPBACK if host in ("127.0.0.1", "localhost", "::1") else None
