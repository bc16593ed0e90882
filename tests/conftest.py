"""Shared fixtures: real processes on loopback ports the OS picks, stopped by pid."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from evbench.procs import Child


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
    child = Child(
        "receiver",
        [sys.executable, "-m", "receivers", "--out", str(out), "--port", "0", "--name", "rx"],
        tmp_path / "receiver.log",
    )
    try:
        listening = child.wait_for("listening", timeout_s=30)
        url = f"http://127.0.0.1:{listening['port']}"
        wait_until(lambda: _healthy(url), 10, "receiver /healthz")
        yield RunningReceiver(child, url, out, listening["port"])
    finally:
        if child.alive():
            child.stop()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
