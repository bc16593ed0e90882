"""A wiring mistake is named as one within seconds, never judged as the system's collapse:
`evbench run` against an external target that is a dead port, a wrong path (404) or a proxy
with nothing behind it (502), as a user types it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytestmark = pytest.mark.e2e

PACE_S = 40  # a pace far longer than the diagnosis should take


def _answering(status: int) -> ThreadingHTTPServer:
    """A real HTTP server on loopback that answers every POST with `status` (a wrong path's
    404; a proxy's 502, as nginx answers when its upstream is gone)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(tmp_path, ingress: str, analyse: bool) -> tuple[int, list[str], float | None]:
    """The command as a user types it: its exit code, its stderr lines, and how long after it
    started the wiring line came (None: never)."""
    flags = f"--pace 200:{PACE_S} --payload-bytes 512 --grace 1 --run-id w".split()
    flags += [] if analyse else ["--no-analyze"]
    cmd = [sys.executable, "-m", "evbench", "run", "--sut", "external", "--ingress", ingress]
    cmd += [*flags, "--runs-dir", str(tmp_path)]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines, said_after_s = [], None
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # ends when evbench exits (its children die with it)
            lines.append(line.rstrip("\n"))
            if said_after_s is None and line.startswith("wiring: "):
                said_after_s = time.monotonic() - started
        return proc.wait(timeout=300), lines, said_after_s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# The analysis reads the records alike whatever the cause: analysed once (a Spark start each).
@pytest.mark.parametrize(
    ("status", "cause", "check", "analyse"),
    [
        (None, "connection refused", "nothing listens at", True),
        (404, "HTTP 404", "has no such path", False),
        (502, "HTTP 502", "has nothing working behind it", False),
    ],
    ids=["dead port", "404", "502"],
)
def test_a_wiring_mistake_is_named_at_once_and_fails_the_run(
    tmp_path, status, cause, check, analyse
):
    server = _answering(status) if status else None
    port = server.server_address[1] if server else _dead_port()
    ingress = f"http://127.0.0.1:{port}/ns/default"
    try:
        code, lines, said_after_s = _run(tmp_path, ingress, analyse)
    finally:
        if server:
            server.shutdown()
    stderr = "\n".join(lines[-40:])
    assert code == 1, stderr
    said = [line for line in lines if line.startswith("wiring: ")]
    assert said, stderr
    assert f"failed with {cause}, none acked: " in said[0]
    assert check in said[0] and ingress in said[0]
    # Said once the first hundred failed (half a second at 200/s), not after the whole pace:
    # start-up included, well within half of its 40 s.
    assert said_after_s is not None and said_after_s < PACE_S / 2, (said_after_s, stderr)
    run = json.loads((tmp_path / "w-200x40" / "external" / "run.json").read_text())
    assert run["status"] == "failed" and any(
        f.startswith("wiring: ") for f in run["instrument_failures"]
    )
    if not analyse:
        return
    summary = json.loads(
        (tmp_path / "w-200x40" / "external" / "analysis" / "summary.json").read_text()
    )
    assert summary["verdict"].startswith("instrument failed: wiring: ")
    assert summary["breaking_point_per_s"] is None
    counts = summary["counts"]
    # (nearly) every failure of that cause, as the live line said; none acked
    assert counts["failures_by_cause"][cause] >= 0.99 * counts["send_failures"] > 0
    assert counts["acked"] == 0
