"""Shared fixtures: real processes on loopback ports the OS picks, stopped by pid."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from contract.procs import Child
from evbench.instruments import start_receiver

if TYPE_CHECKING:  # PySpark is imported by the tests that use Spark, not by the pure ones
    from pyspark.sql import SparkSession


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for a SparkSession, however indirectly, is a `spark` test."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


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
