"""Where the analysis' Spark driver binds, and the archive its JVM loads classes from."""

import os
import time
from pathlib import Path

import pytest

from analysis.spark import ARCHIVE_QUIET_S, class_data_sharing, driver_host


@pytest.mark.parametrize(
    ("master", "host"),
    [
        ("local[*]", "127.0.0.1"),
        ("local[2]", "127.0.0.1"),
        ("spark://127.0.0.1:7077", "127.0.0.1"),
        ("spark://localhost:7077", "127.0.0.1"),
        ("spark://spark-master.example:7077", None),  # a real cluster must reach the driver
        ("yarn", None),
    ],
)
def test_the_driver_binds_loopback_only_when_every_executor_is_on_this_machine(master, host):
    assert driver_host(master) == host


def test_the_jvm_class_archive_is_written_once_then_used(tmp_path, monkeypatch):
    monkeypatch.delenv("EVBENCH_JVM_ARCHIVE", raising=False)
    first = class_data_sharing(tmp_path)
    assert first is not None and "-XX:ArchiveClassesAtExit=" in first
    written = Path(first.split("=", 1)[1].split()[0])
    assert written.name.endswith(f".{os.getpid()}")  # this process writes it, as it exits
    assert class_data_sharing(tmp_path) == first  # while its writer lives, nobody takes it
    dead = written.with_name(written.name.rsplit(".", 1)[0] + ".999999999")
    dead.write_bytes(b"archive")  # its writer has exited, but it may still be being written
    assert class_data_sharing(tmp_path) == first
    late = written.with_name(written.name.rsplit(".", 1)[0] + ".999999998")
    late.write_bytes(b"another")
    for archive in (dead, late):  # left alone long enough: done
        os.utime(archive, (time.time() - 2 * ARCHIVE_QUIET_S,) * 2)
    used = class_data_sharing(tmp_path)
    assert used is not None and "-XX:SharedArchiveFile=" in used
    archive = Path(used.split("=", 1)[1].split()[0])
    assert archive.read_bytes() in (b"archive", b"another")
    assert not dead.exists() and not late.exists()  # one taken, the other removed
    monkeypatch.setenv("EVBENCH_JVM_ARCHIVE", "off")
    assert class_data_sharing(tmp_path) is None
