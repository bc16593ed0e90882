"""A bad $EVBENCH_RECORD_ROLL_S is the user's wiring mistake: named before anything starts, not
reported as the receiver failing to listen (as it was when only the instruments read it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.parquet import ROLL_ENV

pytestmark = pytest.mark.e2e


COMMANDS = {
    "run": ["run", "--sut", "direct", "--pace", "50:1", "--no-analyze"],
    "search": ["search", "--sut", "direct"],
    "memory": ["memory", "--consumers", "confluent"],
}


@pytest.mark.parametrize(
    ("command", "value"), [("run", "abc"), ("run", "-1"), ("search", "nan"), ("memory", "abc")]
)
def test_a_bad_roll_interval_is_named_before_a_run_starts(
    tmp_path: Path, command: str, value: str
) -> None:
    runs = tmp_path / "runs"
    argv = [*COMMANDS[command], "--runs-dir", str(runs)]
    result = subprocess.run(
        [sys.executable, "-m", "evbench", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, ROLL_ENV: value},
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    said = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and f"{ROLL_ENV}={value!r}" in said[0], result.stderr
    assert "receiver" not in said[0]
    assert not runs.exists() or not any(runs.iterdir())  # no run directory took the run id
