"""A full disk under `evbench run`: one line naming the path, the run finished as failed with
what was kept, nothing half-written left behind (issue 33, item 5). Real tmpfs, real processes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runtime.files import write_text_atomically
from tests.receivers.rxproc import fill, small_tmpfs

pytestmark = pytest.mark.e2e


def test_a_disk_full_before_the_start_is_one_line_and_leaves_nothing_half_written(tmp_path):
    with small_tmpfs(tmp_path / "disk", 2 * 2**20) as disk:
        fill(disk / "filler")
        done = subprocess.run(
            [sys.executable, "-m", "evbench", "run", "--sut", "direct", "--pace", "100:2",
             "--runs-dir", str(disk / "runs"), "--no-analyze"],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("evbench: no space left on the device writing "), last
        assert "/run.json" in last
        assert not list(disk.rglob("*.tmp")), list(disk.rglob("*"))


def test_a_document_that_cannot_be_written_keeps_the_old_copy_and_no_temporary(tmp_path):
    with small_tmpfs(tmp_path / "disk", 2**20) as disk:
        doc = disk / "run.json"
        write_text_atomically(doc, "old\n")
        fill(disk / "filler")
        with pytest.raises(OSError) as raised:
            write_text_atomically(doc, "x" * 2**20)
        assert raised.value.filename == str(doc)  # named, for the one-line message
        assert doc.read_text() == "old\n"
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "run.json"]
