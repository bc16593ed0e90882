"""A sender whose records cannot be written (issue 51, item 9.2): a real sender process whose
writes fail for real, with EFBIG, under a file-size limit (RLIMIT_FSIZE) once its parts grow
past it. The tests run as root, where a read-only mode would not stop a write."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from contract.documents import problems
from contract.records import SENT_FIELDS
from contract.senderlines import SenderDone
from loadgen.settings import SenderSettings, SendKnobs
from runtime.parquet import part_files, read_parts
from runtime.procs import Child, die_with_parent

pytestmark = pytest.mark.e2e

# A second of 20 slots is a part of 3.8 KB, one of 400 of 12-14 KB (measured, no roll): the
# first step's parts fit under the limit, the second's never do, however often retried.
LIMIT_BYTES = 8 * 1024
PACE = "20:2,400:2"


def _limited() -> None:
    die_with_parent()
    # Python ignores SIGXFSZ, so a write past the limit fails with EFBIG instead of killing.
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES))


def test_a_sender_that_cannot_write_its_records_fails_and_says_how_many(tmp_path, receiver):
    settings = SenderSettings(
        target=receiver.url,
        pace=PACE,
        out=tmp_path / "sent",
        knobs=SendKnobs(step_gap_s=0.2),
        start_delay_s=0.2,
    )
    log = tmp_path / "sender.log"
    child = Child("sender", settings.command(), log, preexec=_limited)
    done: SenderDone = child.wait_for("done", 60)  # type: ignore[assignment]
    code = child.wait(30)
    assert problems(done, SenderDone) == []
    on_disk = len(read_parts(tmp_path / "sent", SENT_FIELDS))
    assert 0 < on_disk < done["sent"] == 20 * 2 + 400 * 2
    assert all(p.stat().st_size <= LIMIT_BYTES for p in part_files(settings.out))
    # Every row it sent is either on disk or counted as unwritten, and the sender failed.
    assert done["rows_written"] == on_disk
    assert done["unwritten_rows"] == done["sent"] - on_disk, done
    assert "File too large" in done["records_error"], done
    assert code == 1
    said = log.read_text()
    assert f"evbench send: {done['unwritten_rows']} sent records could not be written" in said


def test_a_sender_whose_writes_all_succeed_says_no_unwritten_rows(tmp_path: Path, receiver):
    settings = SenderSettings(
        target=receiver.url, pace="50:1", out=tmp_path / "sent", start_delay_s=0.2
    )
    child = settings.start(tmp_path / "sender.log")
    done = child.wait_for("done", 60)
    assert child.wait(30) == 0
    assert "unwritten_rows" not in done and "records_error" not in done
    assert len(read_parts(tmp_path / "sent", SENT_FIELDS)) == 50
