"""The receiver's options that passed the checks, then burned or broke (issue 33, items 10 and
11, the receiver's part): each is refused before anything starts, in one line naming the flag
or the path, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def _receive(tmp_path: Path, *args: str, out: Path | None = None) -> subprocess.CompletedProcess:
    """`evbench receive` on a free port; a receiver that starts anyway is stopped by the
    timeout (and the test fails on it)."""
    where = out if out is not None else tmp_path / "received"
    argv = [sys.executable, "-m", "evbench", "receive", "--port", "0", "--out", str(where), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)


def _one_line(done: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    said = [
        line
        for line in done.stderr.splitlines()
        if line.strip() and not line.startswith(("usage:", " "))
    ]
    assert len(said) == 1, done.stderr
    assert done.returncode == 2, done.stderr
    return said[0]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        # Before: a flusher ticking back to back, 100 % of a core, for as long as it runs.
        (["--flush-interval", "0"], "--flush-interval: 0 must be a finite number of seconds"),
        (["--flush-interval", "nan"], "--flush-interval: nan must be a finite number of seconds"),
        (["--flush-interval", "1e-9"], "--flush-interval: 1e-9 s is too short"),
        # Before: every stamp past what int64 holds, so every delivery quarantined.
        (["--clock-shift", "1e20"], "--clock-shift: 1e20 ms is more than a day"),
        (["--clock-shift=-1e20"], "--clock-shift: -1e20 ms is more than a day"),
    ],
)
def test_a_flag_that_would_burn_or_break_is_refused(tmp_path: Path, flags: list[str], said: str):
    done = _receive(tmp_path, *flags)
    assert said in _one_line(done)
    assert not (tmp_path / "received").exists()  # nothing made


def test_out_naming_a_file_is_said_in_one_line(tmp_path: Path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    # Before: a FileExistsError traceback from the part writer, exit 1.
    line = _one_line(_receive(tmp_path, out=a_file))
    expected = f"receiver: --out {a_file}: is a file, not a directory; name a directory"
    assert line == expected + " (it is made if missing)"
    under = _one_line(_receive(tmp_path, out=a_file / "sub"))
    assert f"--out {a_file / 'sub'}: cannot make the directory (Not a directory)" in under
    assert a_file.read_text() == "not a directory\n"


def test_out_given_empty_is_refused(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "receivers", "--port", "0", "--out", ""],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
        cwd=tmp_path,
    )
    assert "--out: an empty path" in _one_line(done)
    assert list(tmp_path.iterdir()) == []  # not the working directory taken as the records'
