"""A receiver process started with any flags, a real small tmpfs, and events over real HTTP:
what the failure tests (tests/receivers/test_failure_*.py) share."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from runtime.procs import Child
from tests.conftest import wait_until

EVENT_HEADERS = {
    "ce-specversion": "1.0",
    "ce-type": "dev.evbench.measure",
    "ce-source": "tests",
    "content-type": "application/json",
}


@dataclass
class Rx:
    child: Child
    url: str
    port: int
    log: Path

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/stats", timeout=5).json()


@contextmanager
def receiver_process(out: Path, log: Path, *flags: str) -> Iterator[Rx]:
    """`python -m receivers` on a free loopback port, stopped by its pid at the end."""
    argv = [sys.executable, "-m", "receivers", "--out", str(out), "--port", "0", "--name", "rx"]
    child = Child("receiver", [*argv, *flags], log)
    try:
        port = child.wait_for("listening", 30)["port"]
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _healthy(url), 30, "the receiver's /healthz")
        yield Rx(child, url, port, log)
    finally:
        if child.alive():
            child.stop()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def post_events(client: httpx.Client, url: str, ids: list[str]) -> None:
    for event_id in ids:
        headers = {**EVENT_HEADERS, "ce-id": event_id, "ce-evbenchid": event_id}
        response = client.post(url, content=b"{}", headers=headers)
        assert response.status_code == 202, response.text


@contextmanager
def small_tmpfs(where: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of `size_bytes` mounted at `where` (needs root), unmounted at the end."""
    where.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(where)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (root needed): {done.stderr.strip()}")
    try:
        yield where
    finally:
        # Lazy: a receiver killed by a failed test may still hold a file open in there.
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(path: Path) -> None:
    """Write `path` until the file system it is on is full."""
    block = b"\0" * 65536
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(block) == 1:
                    return
                block = block[: len(block) // 2]  # the last pages, to the very last byte
    finally:
        os.close(fd)


def wait_stopped(child: Child, timeout_s: float = 30) -> tuple[int, dict]:
    """The exit code and the stats of the `stopped` line of a child already signalled."""
    deadline = time.monotonic() + timeout_s
    code = child.wait(max(1.0, deadline - time.monotonic()))
    return code, child.final_report("stopped", timeout_s=5)
