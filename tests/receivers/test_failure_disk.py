"""The receiver on a disk that fills (a real small tmpfs): every row is written once, what could
not be written is counted once, the full disk is said in one line naming the path, and nothing
half-written is left behind (issue 33, item 1)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contract.records import RECEIVED_FIELDS
from runtime.parquet import read_parts
from tests.conftest import wait_until
from tests.receivers.rxproc import (
    Rx,
    fill,
    post_events,
    receiver_process,
    small_tmpfs,
    wait_stopped,
)

pytestmark = pytest.mark.e2e

_DISK_BYTES = 4 * 1024 * 1024


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", _DISK_BYTES) as where:
        yield where


def _fill_after_first_batch(rx: Rx, disk: Path) -> Path:
    """200 events written, then the disk filled, then 300 more whose flush fails."""
    with httpx.Client(timeout=5) as client:
        post_events(client, rx.url, [f"a-{i}" for i in range(200)])
        wait_until(lambda: rx.stats()["rows_written"] >= 200, 30, "the first 200 rows written")
        filler = disk / "filler"
        fill(filler)
        post_events(client, rx.url, [f"b-{i}" for i in range(300)])
    wait_until(lambda: rx.stats()["write_errors"] >= 1, 30, "a flush failing on the full disk")
    return filler


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if not p.name.endswith(".parquet"))


def test_a_batch_that_failed_is_written_once_when_space_returns(disk: Path, tmp_path: Path):
    out = disk / "received"
    # A long interval: the stop comes before the flusher's next try, so close() writes them.
    with receiver_process(out, tmp_path / "rx.log", "--flush-interval", "4") as rx:
        filler = _fill_after_first_batch(rx, disk)
        filler.unlink()
        rx.child.signal(signal.SIGINT)
        code, stats = wait_stopped(rx.child)
    ids = read_parts(out, RECEIVED_FIELDS).column("event_id").to_pylist()
    # Before the fix: 800 rows for 500 ids (the failed batch put back twice).
    assert len(ids) == len(set(ids)) == 500
    assert stats["rows_written"] == 500 and stats["unwritten_rows"] == 0
    assert code == 0
    assert _leftovers(out) == []


def test_rows_still_unwritable_at_the_stop_are_counted_once(disk: Path, tmp_path: Path):
    out = disk / "received"
    log = tmp_path / "rx.log"
    with receiver_process(out, log, "--flush-interval", "4") as rx:
        _fill_after_first_batch(rx, disk)
        rx.child.signal(signal.SIGINT)
        code, stats = wait_stopped(rx.child)
    # Before the fix: 600 "could not be written" for 300 rows.
    assert stats["unwritten_rows"] == 300 and stats["rows_written"] == 200
    assert code == 1
    ids = read_parts(out, RECEIVED_FIELDS).column("event_id").to_pylist()
    assert sorted(ids) == sorted(f"a-{i}" for i in range(200))
    assert _leftovers(out) == []  # no temporary part file holding the space
    text = log.read_text()
    assert "Traceback" not in text
    said = [line for line in text.splitlines() if "No space left" in line]
    assert said and all(str(out) in line for line in said), text
    assert any("300 records could not be written" in line for line in said), text
