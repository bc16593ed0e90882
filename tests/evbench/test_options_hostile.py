"""Bad options, tried as a careful user and an attacker would (issue 33, items 10 and 11): each is
refused before anything starts, in one line naming the flag, with no traceback, and nothing is
made: no run directory (which would take the run id), no records, no process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

# A documentation address (RFC 5737, TEST-NET-1): never an address of this host.
_NOT_HERE = "192.0.2.1"
_TARGET = "http://127.0.0.1:9/"


def _evbench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evbench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def _the_error_line(stderr: str) -> str:
    """The one line that says what is wrong: argparse's usage lines aside, stderr holds exactly
    one, and no traceback."""
    assert "Traceback" not in stderr, stderr
    said = [
        line
        for line in stderr.splitlines()
        if line.strip() and not line.startswith(("usage:", " "))
    ]
    assert len(said) == 1, stderr
    return said[0]


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*"))


def _run(tmp: Path) -> list[str]:
    return ["run", "--pace", "50:1", "--no-analyze", "--runs-dir", str(tmp / "runs")]


def _send(tmp: Path, *extra: str) -> list[str]:
    return ["send", "--target", _TARGET, "--pace", "1:1", "--out", str(tmp / "o"), *extra]


def _memory(tmp: Path) -> list[str]:
    return ["memory", "--consumers", "confluent", "--runs-dir", str(tmp / "runs")]


def _a_file(tmp: Path) -> Path:
    (tmp / "a-file").write_text("not a directory\n")
    return tmp / "a-file"


def _past_ns() -> str:
    return str(time.time_ns() - 3600 * 10**9)


# (id, argv for a fresh directory, what the one error line must hold)
_CASES: list[tuple[str, Callable[[Path], list[str]], str]] = [
    (
        "payload-bytes 1 (docs/cli.md's minimum)",
        lambda t: [*_run(t), "--sut", "direct", "--payload-bytes", "1"],
        "--payload-bytes: 1 is out of range: use at least 64 bytes",
    ),
    (
        "payload-bytes 10^12",
        lambda t: [*_run(t), "--sut", "direct", "--payload-bytes", "1000000000000"],
        "--payload-bytes: 1000000000000 is out of range",
    ),
    (
        "send payload-bytes 10^12",
        lambda t: _send(t, "--payload-bytes", "1000000000000"),
        "--payload-bytes: 1000000000000 is out of range",
    ),
    (
        "workers 10000",
        lambda t: [*_run(t), "--sut", "direct", "--workers", "10000"],
        f"--workers: 10000 sender processes is more than this host runs usefully: at most "
        f"{4 * (os.cpu_count() or 1)}",
    ),
    (
        "search workers 10000",
        lambda t: (
            ["search", "--sut", "direct", "--runs-dir", str(t / "runs"), "--workers", "10000"]
        ),
        "--workers: 10000 sender processes",
    ),
    (
        "receiver-clock-shift 1e20",
        lambda t: [*_run(t), "--sut", "direct", "--receiver-clock-shift", "1e20"],
        "--receiver-clock-shift: 1e20 ms is more than a day",
    ),
    (
        "ingress javascript:",
        lambda t: [*_run(t), "--sut", "external", "--ingress", "javascript:alert(1)"],
        "--ingress: 'javascript:alert(1)' is not an http:// or https:// URL",
    ),
    (
        "receiver-url javascript:",
        lambda t: [*_run(t), "--sut", "direct", "--receiver-url", "javascript:alert(1)"],
        "--receiver-url: 'javascript:alert(1)' is not an http:// or https:// URL",
    ),
    (
        "run-id empty",
        lambda t: [*_run(t), "--sut", "direct", "--run-id", ""],
        "--run-id: run id '' is not allowed",
    ),
    (
        "runs-dir empty",
        lambda t: ["run", "--pace", "50:1", "--sut", "direct", "--runs-dir", ""],
        "--runs-dir: an empty path",
    ),
    (
        "sut named twice",
        lambda t: [*_run(t), "--sut", "direct,direct"],
        "--sut: direct named more than once",
    ),
    (
        "runs-dir a file",
        lambda t: [*_run(t), "--sut", "direct", "--runs-dir", str(_a_file(t))],
        "--runs-dir: {tmp}/a-file is not a directory",
    ),
    (
        "runs-dir under a file",
        lambda t: [*_run(t), "--sut", "direct", "--runs-dir", str(_a_file(t) / "runs")],
        "--runs-dir: {tmp}/a-file/runs cannot be made: {tmp}/a-file is not a directory",
    ),
    (
        "search runs-dir a file",
        lambda t: ["search", "--sut", "direct", "--runs-dir", str(_a_file(t))],
        "--runs-dir: {tmp}/a-file is not a directory",
    ),
    (
        "memory runs-dir a file",
        lambda t: ["memory", "--consumers", "confluent", "--runs-dir", str(_a_file(t))],
        "--runs-dir: {tmp}/a-file is not a directory",
    ),
    (
        "import-knative runs-dir a file",
        lambda t: ["import-knative", str(t / "src"), "--runs-dir", str(_a_file(t))],
        "--runs-dir: {tmp}/a-file is not a directory",
    ),
    (
        "external without ingress",
        lambda t: [*_run(t), "--sut", "external"],
        "--sut external needs --ingress URL",
    ),
    (
        "receiver-host not of this host",
        lambda t: [*_run(t), "--sut", "direct", "--receiver-host", _NOT_HERE],
        f"could not listen on {_NOT_HERE}:a free port (cannot assign requested address): is "
        "--receiver-host an address of this host",
    ),
    (
        "lab consumer setting librdkafka refuses",
        lambda t: [*_run(t), "--sut", "channel-kafka", "--consumer", "bogus.key=1"],
        "--consumer: librdkafka refuses the settings: No such configuration property",
    ),
    (
        "memory consumer setting librdkafka refuses",
        lambda t: [*_memory(t), "--consumer", "bogus.key=1"],
        "--consumer: librdkafka refuses the settings: No such configuration property",
    ),
    (
        "send start-at-ns -1",
        lambda t: _send(t, "--start-at-ns", "-1"),
        "--start-at-ns: -1 is no instant in nanoseconds since the epoch",
    ),
    (
        "send start-at-ns 0",
        lambda t: _send(t, "--start-at-ns", "0"),
        "--start-at-ns: 0 is no instant",
    ),
    (
        "send start-at-ns an hour ago",
        lambda t: _send(t, "--start-at-ns", _past_ns()),
        "s past: every slot since then would be sent at once",
    ),
    (
        "send flush-interval 0",
        lambda t: _send(t, "--flush-interval", "0"),
        "--flush-interval: 0 must be a finite number of seconds, above 0",
    ),
    (
        "send flush-interval nan",
        lambda t: _send(t, "--flush-interval", "nan"),
        "--flush-interval: nan must be a finite number of seconds",
    ),
    (
        "send out a file",
        lambda t: ["send", "--target", _TARGET, "--pace", "1:1", "--out", str(_a_file(t))],
        "--out: {tmp}/a-file is not a directory",
    ),
    (
        "compare out in a missing directory",
        lambda t: ["compare", str(t / "r"), "--out", str(t / "missing" / "c.html")],
        "--out {tmp}/missing/c.html: no directory {tmp}/missing",
    ),
    (
        "compare out a directory",
        lambda t: ["compare", str(t / "r"), "--out", str(t)],
        "--out {tmp} is a directory: name a file",
    ),
    (
        "analyze spark-master garbage",
        lambda t: ["analyze", str(t / "r"), "--spark-master", "garbage://x"],
        "--spark-master: 'garbage://x' is not a Spark master",
    ),
    # evbench issue 51, part 9: bounds the re-probe found missing
    (
        "subscribers 100,000 (past the argument list Linux takes)",
        lambda t: [*_run(t), "--sut", "channel-imc", "--subscribers", "100000"],
        "argument --subscribers/--triggers/--subscriptions: '100000': subscriber counts are 1 "
        "to 1024 (the receiver tells this many paths apart)",
    ),
    (
        "subscribers 10^14 (a MemoryError)",
        lambda t: [*_run(t), "--sut", "channel-imc", "--subscribers", "1,100000000000000"],
        "'1,100000000000000': subscriber counts are 1 to 1024",
    ),
    (
        "triggers 300 on a lab Kafka system",
        lambda t: [*_run(t), "--sut", "broker-kafka", "--triggers", "300"],
        "--subscribers 300: broker-kafka takes at most 256 (a consumer group each",
    ),
    (
        "matching 0 (then called a wiring mistake)",
        lambda t: [*_run(t), "--sut", "broker-imc", "--triggers", "3", "--matching", "0"],
        "argument --matching: 0 is out of range: 1 to the --triggers (at most 1024)",
    ),
    (
        "slo empty (an unset variable gates on nothing)",
        lambda t: [*_run(t), "--sut", "direct", "--slo", ""],
        "argument --slo: --slo '' holds no objective (an unset variable?)",
    ),
    (
        "analyze slo of commas only",
        lambda t: ["analyze", str(t / "r"), "--slo", " , "],
        "argument --slo: --slo ' , ' holds no objective",
    ),
    (
        "slo bound of 400 digits (an OverflowError)",
        lambda t: [*_run(t), "--sut", "direct", "--slo", "lost<=" + "9" * 400],
        "its bound is too large: at most 1.8e+308",
    ),
    (
        "analyze spark-master sc://",
        lambda t: ["analyze", str(t / "r"), "--spark-master", "sc://h:15002"],
        "use --spark-remote sc://h:15002",
    ),
]


@pytest.mark.parametrize(("argv", "said"), [c[1:] for c in _CASES], ids=[c[0] for c in _CASES])
def test_a_bad_option_is_one_line_naming_it_and_nothing_is_made(
    tmp_path: Path, argv: Callable[[Path], list[str]], said: str
) -> None:
    args = argv(tmp_path)
    before = _files(tmp_path)
    result = _evbench(*args, cwd=tmp_path)  # an empty --runs-dir must not mean this directory
    assert result.returncode == 2, result.stderr
    assert said.format(tmp=tmp_path) in _the_error_line(result.stderr)
    assert _files(tmp_path) == before  # no run directory, no records, no log


def test_runs_dir_on_a_read_only_mount_is_one_line(tmp_path: Path) -> None:
    """An unwritable place (as root, permissions do not stop writes: a read-only mount does)."""
    place = tmp_path / "ro"
    place.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(place)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr.strip()}")
    try:
        result = _evbench(
            "run", "--sut", "direct", "--pace", "50:1", "--runs-dir", str(place / "runs")
        )
    finally:
        subprocess.run(["umount", str(place)], check=True)
    assert result.returncode == 2, result.stderr
    line = _the_error_line(result.stderr)
    assert f"--runs-dir: {place}/runs cannot be made: {place} is not writable" in line


def test_a_run_directory_made_by_another_run_meanwhile_is_already_there(tmp_path: Path) -> None:
    """Two runs racing for one new run directory: the loser finds it made between its look and
    its mkdir. A dangling symbolic link is that moment held still: it does not exist to the
    look, and mkdir finds the name taken (FileExistsError, a traceback, before)."""
    sut = tmp_path / "runs" / "x-50x1" / "direct"
    sut.parent.mkdir(parents=True)
    sut.symlink_to(tmp_path / "made-by-the-other-run")
    result = _evbench(
        "run",
        "--sut",
        "direct",
        "--pace",
        "50:1",
        "--run-id",
        "x",
        "--runs-dir",
        f"{tmp_path}/runs",
    )
    assert result.returncode == 2, result.stderr
    line = _the_error_line(result.stderr)
    assert f"{sut} already exists: choose another --run-id" in line
    assert not (tmp_path / "made-by-the-other-run").exists()
