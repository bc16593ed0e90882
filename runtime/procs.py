"""Child processes of a run: started in their own session, read line by line, stopped by pid."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from contract.lines import OutputLine

_PR_SET_PDEATHSIG = 1


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's descriptor limit toward `wanted`, as far as the hard limit allows;
    returns the soft limit now in force. Servers and senders holding thousands of connections
    need more than the usual 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def die_with_parent(death_signal: int = signal.SIGTERM) -> None:
    # Own session: a Ctrl-C reaches only `evbench run`, which decides how each child stops.
    os.setsid()
    # If `evbench run` itself is killed, the kernel stops its children instead of orphaning them.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, death_signal)


def die_with_parent_at_once() -> None:
    """For the system's components, which a fault may hold stopped (SIGSTOP): a SIGTERM would
    wait, pending, on a stopped process for ever; SIGKILL ends it, stopped or not."""
    die_with_parent(signal.SIGKILL)


class Child:
    """A child whose stdout carries JSON lines; stderr goes to a log file kept with the run."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: dict[str, str] | None = None,
        preexec: Callable[[], None] = die_with_parent,
    ) -> None:
        self.name = name
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            preexec_fn=preexec,
            text=True,
            bufsize=1,
            env=env,
        )
        self.pid = self.proc.pid
        # Each line as the JSON object it holds (a line that holds none as an OutputLine); the
        # reader parses it into its type (contract.lines). None: the end of the output.
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                doc = None
            output: OutputLine = {"event": "output", "text": line}
            self.lines.put(doc if isinstance(doc, dict) else dict(output))
        self.lines.put(None)  # end of output

    def next_line(self, timeout_s: float) -> dict[str, Any] | None:
        """The next JSON line, or None at end of output; raises queue.Empty on timeout."""
        return self.lines.get(timeout=timeout_s)

    def wait_for(
        self,
        event: str,
        timeout_s: float,
        seen: Callable[[dict[str, Any]], None] = lambda doc: None,
    ) -> dict[str, Any]:
        """The first line of `event`; every line before it is handed to `seen`."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.name} did not report '{event}' within {timeout_s:g} s")
            doc = self.next_line(remaining)
            if doc is None:
                raise RuntimeError(f"{self.name} exited before reporting '{event}': {self.tail()}")
            if doc.get("event") == event:
                return doc
            seen(doc)

    def final_report(self, event: str = "stopped", timeout_s: float = 5.0) -> dict[str, Any]:
        """The `stats` of the child's last report line (`{"event": "stopped", "stats": ...}`),
        read after it was stopped; {} when it never wrote one."""
        while True:
            try:
                doc = self.next_line(timeout_s)
            except queue.Empty:
                return {}
            if doc is None:
                return {}
            if doc.get("event") == event:
                stats: dict[str, Any] = doc.get("stats", {})
                return stats

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.pid, sig)

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM, then SIGKILL after `timeout_s`; returns the exit code."""
        self.signal(signal.SIGTERM)
        try:
            return self.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            return self.wait(timeout_s)

    def wait(self, timeout_s: float | None = None) -> int:
        code = self.proc.wait(timeout_s)
        self._reader.join(timeout=5)
        self._log.close()
        return code

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:]) or f"(no output; see {self.log_path})"
