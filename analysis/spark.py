"""The SparkSession the analysis runs on: local[*] by default, any master for a cluster."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pyspark
from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"
# Seconds a class archive must have been left alone before a session takes it (it is written in
# a second or two).
ARCHIVE_QUIET_S = 30


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
    local = master.startswith("local")
    if local and (options := class_data_sharing()):
        builder = builder.config("spark.driver.extraJavaOptions", options)
    spark = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Locally, 8 shuffle partitions, kept as they are: adaptive execution coalesced the
        # (system, step) groups of a 3 M-event matrix into 3 tasks for 2 cores, the last
        # running alone. On a cluster, 200, coalesced by adaptive execution as it sees fit.
        .config("spark.sql.shuffle.partitions", "8" if local else "200")
        .config("spark.sql.adaptive.coalescePartitions.enabled", str(not local).lower())
        .config("spark.driver.memory", os.environ.get("EVBENCH_DRIVER_MEMORY", "2g"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def class_data_sharing(cache: Path | None = None) -> str | None:
    """JVM options that load Spark's classes from an archive of them (Java's AppCDS) instead of
    from its jars: measured here, the session starts in 2.6 s instead of 4.3 and its first job
    takes 1.0 s instead of 1.8. The first session writes the archive at its exit (seconds, once
    per Java and PySpark version) under the user's cache; `EVBENCH_JVM_ARCHIVE=off` disables it.

    The archive is written under a name of its writer's own and taken by the next session once
    that writer has exited (the JVM writes it as it exits, after this process can rename it)."""
    if os.environ.get("EVBENCH_JVM_ARCHIVE", "on") == "off":
        return None
    root = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    home = os.environ.get("JAVA_HOME")
    java = (home and shutil.which("java", path=os.path.join(home, "bin"))) or shutil.which("java")
    if java is None:
        return None
    real = Path(java).resolve()
    java_id = hashlib.sha1(f"{real}:{real.stat().st_mtime_ns}".encode()).hexdigest()[:12]
    key = f"{pyspark.__version__}-{java_id}"
    archive = root / "evbench" / "jvm" / f"spark-{key}.jsa"
    quiet = "-Xlog:cds=off -Xlog:cds+dynamic=off"
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        for written in archive.parent.glob(f".{archive.name}.*"):
            writer = int(written.name.rsplit(".", 1)[-1])
            # The JVM writes the archive as it exits, which can be after the Python process
            # that named it: taken only once untouched for a while as well.
            quiet_s = time.time() - written.stat().st_mtime
            if psutil.pid_exists(writer) or quiet_s < ARCHIVE_QUIET_S:
                continue
            if archive.exists() or not written.stat().st_size:
                written.unlink()  # another session's archive was taken first
            else:
                os.replace(written, archive)
    except (OSError, ValueError):
        return None
    if archive.exists():
        return f"-XX:SharedArchiveFile={archive} {quiet}"
    return f"-XX:ArchiveClassesAtExit={archive.parent / f'.{archive.name}.{os.getpid()}'} {quiet}"


def driver_host(master: str) -> str | None:
    """Loopback for a master whose executors all run on this machine (local mode, or a
    standalone master on loopback); None lets Spark pick the address a cluster can reach."""
    if master.startswith("local"):
        return LOOPBACK
    host = urlsplit(master).hostname
    return LOOPBACK if host in ("127.0.0.1", "localhost", "::1") else None
