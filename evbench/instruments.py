"""Starting the receiver as a child process, the one way every caller does it (a sender is
started by loadgen.settings.SenderSettings.start)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx

from contract.errors import EvbenchError
from receivers.limits import Limits, limit_argv
from runtime.procs import Child


def start_receiver(
    out: Path,
    log: Path,
    host: str = "127.0.0.1",
    port: int = 0,
    name: str = "receiver",
    timeout_s: float = 30.0,
    limits: Limits | None = None,
    clock_shift_ms: float = 0.0,
) -> tuple[Child, str]:
    """A receiver process writing to `out`; returns it and its base URL once /healthz answers."""
    child = Child(
        "receiver",
        [
            sys.executable,
            "-m",
            "receivers",
            "--out",
            str(out),
            "--host",
            host,
            "--port",
            str(port),
            "--name",
            name,
            *(limit_argv(limits) if limits else []),
            *(["--clock-shift", str(clock_shift_ms)] if clock_shift_ms else []),
        ],
        log,
    )
    try:
        listening = child.wait_for("listening", timeout_s)
        base_url = f"http://{host}:{listening['port']}"
        _wait_healthy(child, base_url, timeout_s)
    except BaseException:
        child.stop()
        raise
    return child, base_url


def _wait_healthy(child: Child, base_url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if not child.alive():
                raise EvbenchError(f"receiver exited during start-up:\n{child.tail()}")
            try:
                if client.get(f"{base_url}/healthz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise EvbenchError(f"receiver not ready at {base_url}/healthz within {timeout_s:g} s")
