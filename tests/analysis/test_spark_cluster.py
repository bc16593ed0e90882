"""`evbench analyze` on a Spark standalone master and worker, and through a Spark Connect server,
each started from the PySpark installation on loopback (logs, pids and work directories in a
temporary directory; memory and cores capped): the summary equals local mode's."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from analysis.job import AnalyzeOptions, analyze_sut
from tests.analysis.crafted import craft
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e

SPARK_HOME = Path(pyspark.__file__).resolve().parent
COMPARED = ("counts", "latency_ms", "steps", "verdict", "breaking_point_per_s", "clock")


def _env(tmp: Path) -> dict[str, str]:
    conf = tmp / "conf"
    conf.mkdir(exist_ok=True)  # empty: nothing from a user's own Spark configuration
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": "127.0.0.1",  # every daemon and web UI binds loopback only
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_PID_DIR": str(tmp),
        "SPARK_LOCAL_DIRS": str(tmp / "local"),
        "SPARK_DAEMON_MEMORY": "512m",
        "PYSPARK_PYTHON": sys.executable,
    }


def _daemon(name: str, argv: list[str], tmp: Path) -> subprocess.Popen:
    log = open(tmp / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=_env(tmp), start_new_session=True
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def _logged(tmp: Path, name: str, pattern: str) -> re.Match | None:
    path = tmp / f"{name}.log"
    return re.search(pattern, path.read_text(errors="replace")) if path.exists() else None


@pytest.fixture(scope="module")
def crafted(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    sut, _ = craft(root)
    return sut, analyze_sut(spark, sut, AnalyzeOptions())


def _analyze_elsewhere(sut: Path, tmp: Path, *where: str) -> dict:
    copy = tmp / "copy" / sut.parent.name / sut.name
    shutil.copytree(sut, copy, ignore=shutil.ignore_patterns("analysis"))
    done = subprocess.run(
        [sys.executable, "-m", "evbench", "analyze", str(copy), *where],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(tmp),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((copy / "analysis" / "summary.json").read_text())


def test_two_workers_share_a_sliced_step_and_give_the_local_summary(crafted, tmp_path):
    # Slices of at most 400 events: the crafted steps (200/s and 400/s for 10 s) become 15
    # slices, spread over two workers of one core each; local mode read each step whole.
    sut, local = crafted
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master = _daemon(
        "master",
        [spark_class, "org.apache.spark.deploy.master.Master",
         "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
        tmp_path,
    )  # fmt: skip
    workers: list[subprocess.Popen] = []
    try:
        found = wait_until(
            lambda: _logged(
                tmp_path, "master", r"Starting Spark master at (spark://127\.0\.0\.1:\d+)"
            ),
            timeout_s=120,
            what="the master's URL",
        )
        url = found.group(1)
        for number in (1, 2):
            work = str(tmp_path / f"work{number}")
            argv = [spark_class, "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1", "--webui-port", "0", "--cores", "1",
                    "--memory", "1g", "--work-dir", work, url]  # fmt: skip
            workers.append(_daemon(f"worker{number}", argv, tmp_path))
        wait_until(
            lambda: len(re.findall(r"Registering worker 127\.0\.0\.1", _log(tmp_path))) >= 2,
            timeout_s=120,
            what="both workers registering",
        )
        remote = _analyze_elsewhere(sut, tmp_path, "--spark-master", url, "--slice-events", "400")
    finally:
        for proc in (*workers, master):
            _stop(proc)
    # Exact figures are equal; a digest's estimates (a step's merged from its slices) are
    # within a few per cent, and their rank-error bounds are the digests' own.
    for key in COMPARED:
        assert _exact(remote[key]) == _exact(local[key]), key
    for metric, tail in local["latency_ms"].items():
        for name in tail["rank_error"]:
            assert remote["latency_ms"][metric][name] == pytest.approx(tail[name], rel=0.05)
    for number in (1, 2):  # each worker's executor ran tasks of the analysis
        logs = list((tmp_path / f"work{number}").rglob("stderr"))
        ran = sum(path.read_text(errors="replace").count("Finished task") for path in logs)
        assert ran > 0, f"worker {number} ran no task"


def _exact(found: object) -> object:
    """`found` without its digest-estimated figures: those named in a `rank_error` (tails) or
    an `e2e_rank_error` (steps), and the bounds themselves."""
    if isinstance(found, list):
        return [_exact(item) for item in found]
    if not isinstance(found, dict):
        return found
    estimated = set(found.get("rank_error", {})) | {"rank_error", "e2e_rank_error"}
    return {k: _exact(v) for k, v in found.items() if k not in estimated}


def _log(tmp: Path) -> str:
    path = tmp / "master.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _free_port() -> int:
    # The Connect server takes its port from configuration: pick a free one, then hand it over.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_spark_connect_endpoint_gives_the_local_summary(crafted, tmp_path):
    sut, local = crafted
    port = _free_port()
    server = _daemon(
        "connect",
        [str(SPARK_HOME / "bin" / "spark-submit"),
         "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--master", "local[2]", "--driver-memory", "1g",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
         "--conf", "spark.ui.enabled=false",
         "spark-internal"],
        tmp_path,
    )  # fmt: skip
    try:
        wait_until(lambda: _listening(port) or server.poll() is not None, 180, "Spark Connect")
        assert server.poll() is None, (tmp_path / "connect.log").read_text()[-3000:]
        remote = _analyze_elsewhere(sut, tmp_path, "--spark-remote", f"sc://127.0.0.1:{port}")
    finally:
        _stop(server)
    for key in COMPARED:
        assert remote[key] == local[key], key


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
