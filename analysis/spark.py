"""The SparkSession the analysis runs on: local[*] by default, any master for a cluster."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pyspark
from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"
# Seconds a class archive must have been left alone before a session takes it (it is written in
# a second or two).
ARCHIVE_QUIET_S = 30

# Spark's logging unless --verbose: errors only, from the JVM's first line on, so neither its
# start-up notes (the log4j profile it picked; the default level of a shell, which PySpark's
# driver is to Spark, printed unless Spark's loggers have a level of their own) nor its
# warnings (the hostname resolving to loopback, no native-hadoop library) print. The pattern
# is Spark's own.
QUIET_LOG4J = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
rootLogger.level = error
rootLogger.appenderRef.console.ref = console
logger.spark.name = org.apache.spark
logger.spark.level = error
"""
# The local driver's JVM runs no event through it (the analysis' tasks read and reduce in
# Python: analysis.tasks), so it is tuned to start and finish, not to run long: the client
# compiler only, and the serial collector. Measured on 2 cores: the session starts in 1.7 s
# instead of 2.4-2.8, its first job takes 1.5 s instead of 1.8-1.9. The cost falls on the
# 2019 export's window functions, which run in this JVM at the client compiler's speed.
LEAN_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# What the JVM itself prints as it starts, before any logging (Spark's launcher adds
# --add-modules=jdk.incubator.vector, and no option silences the JVM's note about it).
JVM_CHATTER = re.compile(rb"WARNING: Using incubator modules: ")


def session(
    master: str = "local[*]",
    app_name: str = "evbench-analyze",
    remote: str | None = None,
    verbose: bool = False,
) -> SparkSession:
    """A session on `master` (local[*], spark://HOST:PORT, ...), or with `remote`, a Spark
    Connect session (sc://HOST:PORT): the job then makes no driver-side SparkContext call.
    Spark's start-up chatter prints only when `verbose`; its errors always do."""
    for stopping in _STOPPING:  # a session still stopping would be handed out again
        stopping.join()
    _STOPPING.clear()
    if remote is not None:
        return SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
    with _quiet_jvm_start(not verbose):
        spark = _builder(master, app_name, verbose).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# Sessions stopping on a thread (`stop_soon`).
_STOPPING: list[threading.Thread] = []


def stop_soon(spark: SparkSession) -> Callable[[], None]:
    """Start stopping `spark` on a thread; the function returned waits until its JVM side has
    stopped (~0.1 s), not for the rest: PySpark's accumulator server then takes up to a second
    to notice it should stop (measured 0.9 s, a sixth of a 200-event analysis), a thread of
    this process that ends with it. A new `session` waits for the whole stop. A Spark Connect
    session is waited for whole."""
    stopping = threading.Thread(target=_stop_quietly, args=(spark,), name="spark-stop", daemon=True)
    _STOPPING.append(stopping)
    stopping.start()
    context = getattr(spark, "_sc", None)

    def wait() -> None:
        if context is None:
            stopping.join()
            return
        # SparkContext.stop clears _jsc once the JVM's context has stopped.
        while stopping.is_alive() and getattr(context, "_jsc", None) is not None:
            stopping.join(0.01)

    return wait


def _stop_quietly(spark: SparkSession) -> None:
    """spark.stop on a daemon thread, which the interpreter may end mid-call as it exits (the
    work is done by then): a call cut short there is not worth a traceback."""
    with contextlib.suppress(Exception):
        spark.stop()


def _builder(master: str, app_name: str, verbose: bool) -> SparkSession.Builder:
    # Python workers must be this interpreter: a bare `python3` on PATH lacks our packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    if (host := driver_host(master)) is not None:
        # The driver's RPC and block-manager ports bind the host's external address by default;
        # with every executor on this machine, nothing outside it needs them.
        builder = builder.config("spark.driver.host", host).config("spark.driver.bindAddress", host)
    local = master.startswith("local")
    options = [
        *((LEAN_JVM, class_data_sharing()) if local else ()),
        None if verbose else quiet_logging(),
    ]
    if java_options := " ".join(option for option in options if option):
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    return (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Locally, 8 shuffle partitions (the export's and the memory series'), kept as they
        # are: adaptive execution coalesced a 3 M-event matrix's groups into 3 tasks for 2
        # cores, the last running alone. On a cluster, 200, coalesced as adaptive execution
        # sees fit.
        .config("spark.sql.shuffle.partitions", "8" if local else "200")
        .config("spark.sql.adaptive.coalescePartitions.enabled", str(not local).lower())
        .config("spark.driver.memory", os.environ.get("EVBENCH_DRIVER_MEMORY", "2g"))
    )


def quiet_logging(cache: Path | None = None) -> str | None:
    """The JVM option that gives the driver QUIET_LOG4J, written once under the user's cache;
    None (Spark's own logging) where it cannot be written."""
    root = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = root / "evbench" / "jvm" / "log4j2-quiet.properties"
    try:
        if not path.exists() or path.read_text() != QUIET_LOG4J:
            path.parent.mkdir(parents=True, exist_ok=True)
            written = path.with_name(f".{path.name}.{os.getpid()}")
            written.write_text(QUIET_LOG4J)
            os.replace(written, path)
    except OSError:
        return None
    return f"-Dlog4j2.configurationFile={path.as_uri()}"  # a URI: no space splits it


@contextmanager
def _quiet_jvm_start(quiet: bool) -> Iterator[None]:
    """While a session starts (and launches the JVM, the first time in a process), this
    process' stderr is a pipe that a thread copies to the real one line by line, leaving out
    JVM_CHATTER. The JVM keeps that pipe as its stderr: everything else it prints, errors
    first, still shows. Spark's launcher does not print its command line either."""
    if not quiet:
        yield
        return
    launch_command = os.environ.pop("SPARK_PRINT_LAUNCH_COMMAND", None)
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    real = os.dup(2)
    os.dup2(write_end, 2)
    os.close(write_end)
    threading.Thread(
        target=_copy_stderr, args=(read_end, real), name="jvm-stderr", daemon=True
    ).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # the pipe's last writer is now the JVM: the copy ends when it does
        if launch_command is not None:
            os.environ["SPARK_PRINT_LAUNCH_COMMAND"] = launch_command


def _copy_stderr(read_end: int, real: int) -> None:
    """Lines from `read_end` to `real` but JVM_CHATTER, until every writer has closed it;
    a stderr that cannot be written any more is drained, so that the JVM never blocks."""
    with open(read_end, "rb") as pipe, open(real, "wb", buffering=0) as out:
        writable = True
        for line in pipe:
            if writable and not JVM_CHATTER.match(line):
                try:
                    out.write(line)
                except OSError:
                    writable = False


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
    flags = hashlib.sha1(LEAN_JVM.encode()).hexdigest()[:6]  # an archive serves one set of flags
    key = f"{pyspark.__version__}-{java_id}-{flags}"
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
