"""Shared fixtures: real processes on loopback ports the OS picks, stopped by pid. The tiers
(`make check`'s fast one, and the markers that take a test out of it) are in tests/tiers.py."""

from __future__ import annotations

import fcntl
import platform
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from analysis.verdicts import Thresholds
from evbench.instruments import start_receiver
from runtime.procs import Child
from tests import tiers

# platform.platform() (run.json's `platform`) runs `uname -p` once per process and caches it: run
# here, so that the fast tier's guard does not blame whichever test first opens a session.
platform.processor()

if TYPE_CHECKING:  # PySpark is imported by the tests that use Spark, not by the pure ones
    from pyspark.sql import SparkSession


_SPAWNED = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    tiers.add_option(parser)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's tier markers from what it uses (tests/tiers.py); under --fast, the fast tier
    only. Under pytest-xdist, the modules that wait longest are handed out first (see
    _waiting_rank)."""
    tiers.mark_tiers(items)
    tiers.keep_fast(config, items)
    if hasattr(config, "workerinput"):  # an xdist worker: its order is the one files are dealt
        rank = _waiting_rank(items)
        items.sort(key=lambda item: rank[item.path])  # stable: a module's own order is kept


def _waiting_rank(items: list[pytest.Item]) -> dict[Path, int]:
    """Per module: 0 for tests/e2e (whole scenarios, up to 95 s a test), 1 for a module with a
    test that starts processes or Spark, 2 for the rest. With the files dealt in that order
    (pyproject: --dist loadfile --no-loadscope-reorder), the long ones start early and the
    many short ones fill both workers at the end: xdist's own order, most tests first, left
    the e2e files, a few tests each, to run last on one worker while the other sat idle."""
    rank: dict[Path, int] = {}
    for item in items:
        if item.path.parent.name == "e2e":
            own = 0
        elif item.get_closest_marker("e2e") or item.get_closest_marker("spark"):
            own = 1
        else:
            own = 2
        rank[item.path] = min(own, rank.get(item.path, 2))
    return rank


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """Each test, its fixtures' setup and teardown included, runs with its share of the
    machine (see _machine_share) and, under --fast, without child processes (tests/tiers.py)."""
    spawned = item.stash.setdefault(_SPAWNED, [])
    guard = tiers.no_child_processes(item.nodeid, spawned) if tiers.guarded(item) else nullcontext()
    with _machine_share(item), guard:
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport, object]:
    """A child process started on one of the test's threads fails the test too, not only one
    started on the test's own thread (that one has failed at the call already)."""
    report = yield
    spawned = item.stash.get(_SPAWNED, [])
    if spawned and report.passed:
        report.outcome = "failed"
        report.longrepr = spawned[0]
    spawned.clear()
    return report


@contextmanager
def _machine_share(item: pytest.Item) -> Iterator[None]:
    """Under pytest-xdist, a test marked `alone` runs while the other workers wait, the rest
    side by side. An `alone` test judges the instrument's own timing by the product's rule
    (a sender lag p99 over 10 ms is not "holds"): a 200-event probe fails it on two stalls, which
    a busy neighbour on the same two cores can cause (seen under -n 2, load 6.6: a search that
    holds 200/s judged "sender-limited", lag p99 14.9 ms). Two flock(2) files: `gate` gives a
    waiting `alone` test the machine once the tests running now end, before any new one starts.
    """
    base = getattr(item.config.option, "basetemp", None)
    if not hasattr(item.config, "workerinput") or not base:
        yield  # one process: nothing runs beside this test anyway
        return
    alone = item.get_closest_marker("alone") is not None
    shared = Path(base).parent  # the run's base directory, above each worker's own
    with open(shared / "gate.lock", "a") as gate, open(shared / "machine.lock", "a") as machine:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield  # closing the files releases both locks, a failing test included


# The suite's two workers share two cores, so a test's run shares its host with the other
# worker's by design. A test whose subject is not the host rule (analysis.verdicts.saturation,
# tested beside CPU hogs, alone, in tests/e2e/test_host_load.py) and that asserts a break judges
# without it, lest the other worker's load make its break inconclusive: no host is ever busier
# than all of it.
WITHOUT_HOST_RULE = Thresholds(host_busy_ratio=1.01, host_steal_ratio=1.01)


def wait_until(condition: Callable[[], object], timeout_s: float, what: str) -> object:
    """Poll `condition` until it is truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.02)


@dataclass
class RunningReceiver:
    child: Child
    url: str
    out: Path
    port: int

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/stats", timeout=2).json()


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[RunningReceiver]:
    out = tmp_path / "received"
    child, url = start_receiver(out, tmp_path / "receiver.log", name="rx")
    try:
        yield RunningReceiver(child, url, out, int(url.rsplit(":", 1)[1]))
    finally:
        if child.alive():
            child.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession for every test that analyses (starting Spark costs seconds)."""
    from analysis.spark import session

    spark = session("local[2]", "evbench-tests")
    yield spark
    spark.stop()
