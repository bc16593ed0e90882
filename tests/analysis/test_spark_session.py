"""Where the analysis' Spark driver binds, the archive its JVM loads classes from, and what
it prints as it starts."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.spark import ARCHIVE_QUIET_S, class_data_sharing, driver_host
from tests.analysis.crafted import craft

REPO = Path(__file__).resolve().parents[2]

# What Spark and its JVM print as a session starts, on this machine or any.
CHATTER = [
    "Using Spark's default log4j profile",
    "Setting default log level",
    "To adjust logging level",
    "NativeCodeLoader",  # Unable to load native-hadoop library
    "resolves to a loopback address",  # WARN Utils: Your hostname, ...
    "SPARK_LOCAL_IP",
    "Using incubator modules",
    " WARN ",
]

# A session started, then an error logged by the JVM and a line it prints itself.
START_AND_FAIL = """
import sys
from analysis.spark import session
spark = session("local[1]", "evbench-tests", verbose=sys.argv[1] == "verbose")
spark._jvm.org.apache.logging.log4j.LogManager.getLogger("evbench.test").error("logged error")
spark._jvm.java.lang.System.err.println("printed by the JVM")
spark._jvm.java.lang.System.err.flush()
spark.stop()
"""


def _chatter(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if any(c in line for c in CHATTER)]


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO, env=env)


@pytest.mark.spark
@pytest.mark.e2e
def test_analyze_prints_no_spark_chatter(tmp_path):
    sut, _ = craft(tmp_path / "runs")
    evbench = str(Path(sys.executable).with_name("evbench"))
    result = _run([evbench, "analyze", str(sut.parent)])
    assert result.returncode == 0, result.stderr
    assert _chatter(result.stderr) == [], result.stderr
    headline = next(line for line in result.stderr.splitlines() if line.startswith("direct: "))
    assert re.search(r"; e2e (max|P99\.99) \d\.\d\d ms \(n=", headline), headline


@pytest.mark.spark
@pytest.mark.e2e
@pytest.mark.parametrize("verbose", [False, True])
def test_a_quiet_session_still_shows_errors(verbose):
    """Quiet hides the chatter only: what the JVM logs as an error, or prints, still shows."""
    result = _run([sys.executable, "-c", START_AND_FAIL, "verbose" if verbose else "quiet"])
    assert result.returncode == 0, result.stderr
    assert re.search(r"^\S+ \S+ ERROR test: logged error$", result.stderr, re.M), result.stderr
    assert "printed by the JVM" in result.stderr
    if verbose:  # the chatter the quiet runs must not show is there to hide
        assert "Using Spark's default log4j profile" in result.stderr, result.stderr
    else:
        assert _chatter(result.stderr) == [], result.stderr


@pytest.mark.parametrize(
    ("master", "host"),
    [
        ("local[*]", "127.0.0.1"),
        ("local[2]", "127.0.0.1"),
        ("spark://127.0.0.1:7077", "127.0.0.1"),
        ("spark://localhost:7077", "127.0.0.1"),
        ("spark://spark-master.example:7077", None),  # a real cluster must reach the driver
        ("yarn", None),
    ],
)
def test_the_driver_binds_loopback_only_when_every_executor_is_on_this_machine(master, host):
    assert driver_host(master) == host


def test_the_jvm_class_archive_is_written_once_then_used(tmp_path, monkeypatch):
    monkeypatch.delenv("EVBENCH_JVM_ARCHIVE", raising=False)
    first = class_data_sharing(tmp_path)
    assert first is not None and "-XX:ArchiveClassesAtExit=" in first
    written = Path(first.split("=", 1)[1].split()[0])
    assert written.name.endswith(f".{os.getpid()}")  # this process writes it, as it exits
    assert class_data_sharing(tmp_path) == first  # while its writer lives, nobody takes it
    dead = written.with_name(written.name.rsplit(".", 1)[0] + ".999999999")
    dead.write_bytes(b"archive")  # its writer has exited, but it may still be being written
    assert class_data_sharing(tmp_path) == first
    late = written.with_name(written.name.rsplit(".", 1)[0] + ".999999998")
    late.write_bytes(b"another")
    for archive in (dead, late):  # left alone long enough: done
        os.utime(archive, (time.time() - 2 * ARCHIVE_QUIET_S,) * 2)
    used = class_data_sharing(tmp_path)
    assert used is not None and "-XX:SharedArchiveFile=" in used
    archive = Path(used.split("=", 1)[1].split()[0])
    assert archive.read_bytes() in (b"archive", b"another")
    assert not dead.exists() and not late.exists()  # one taken, the other removed
    monkeypatch.setenv("EVBENCH_JVM_ARCHIVE", "off")
    assert class_data_sharing(tmp_path) is None


# A session stopped soon, then another: the second must be a new, working session; and the
# JVM's context is stopped when the wait returns.
STOP_SOON_THEN_START = """
from analysis.spark import session, stop_soon
first = session("local[1]", "evbench-tests")
context = first.sparkContext
stopped = stop_soon(first)
stopped()
print("jvm context stopped:", context._jsc is None)
second = session("local[1]", "evbench-tests")
print("new session:", second is not first, second.range(5).count())
"""


@pytest.mark.spark
@pytest.mark.e2e
def test_a_session_stopped_soon_is_never_handed_out_again():
    result = _run([sys.executable, "-c", STOP_SOON_THEN_START])
    assert result.returncode == 0, result.stderr
    assert "jvm context stopped: True" in result.stdout, result.stdout
    assert "new session: True 5" in result.stdout, result.stdout
