"""The process sampler runs as long as the run: its files roll as the records do (a day leaves
~1,440 of them, not 8,640), and what it wrote is read back once, rolled or not."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from analysis.report import _samples
from contract.partnames import parse
from contract.records import MEMORY_SAMPLE_FIELDS
from evbench.samples import ProcessSampler
from runtime.parquet import ROLL_ENV, part_files, read_parts


def test_the_process_samples_roll_and_read_back_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ROLL_ENV, "0.3")
    sampler = ProcessSampler(tmp_path, interval_s=0.02, flush_every=2)
    sampler.watch("me", os.getpid())
    sampler.start()
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:  # two rolls made, whatever the machine's speed
            rolled = [
                n
                for n in os.listdir(tmp_path)
                if n.startswith("processes") and (p := parse(n)) and p.rolled
            ]
            if len(rolled) >= 2:
                break
            time.sleep(0.05)
    finally:
        sampler.stop()
    assert len(rolled) >= 2, os.listdir(tmp_path)
    kept = [f for f in part_files(tmp_path) if f.name.startswith("processes")]
    loose = [f for f in kept if (p := parse(f.name)) is None or not p.rolled]
    # The stop rolls what the open roll holds; a last lone part stays a file of its own.
    assert len(loose) <= 1 and all(f.name > r.name for f in loose for r in kept if r not in loose)
    rows = _samples(tmp_path, "processes")
    stamps = [r["t_ns"] for r in rows]
    assert len(stamps) == len(set(stamps)) >= 4  # every sample once
    assert stamps == sorted(stamps)
    # The host is sampled in the same ticks, stamped alike, so the analysis can tell the run's
    # own CPU from others' (analysis.hostload).
    host = _samples(tmp_path / "host", "host")  # a folder of its own
    assert [r["t_ns"] for r in host] == stamps
    assert all(0 <= r["busy_percent"] <= 100 * r["cpus"] + 1 for r in host), host[:3]


def test_a_process_watched_in_detail_gives_the_policy_and_the_files_every_sample(
    tmp_path: Path,
) -> None:
    # The memory study's consumer, sampled by the one sampler: each sample carries what the
    # process says of itself beside /proc's accounting, reaches the policy once, and is written.
    said = {"consumed": 0}
    sampler = ProcessSampler(tmp_path / "processes", interval_s=0.02, flush_every=5)
    sampler.watch_memory("me", os.getpid(), lambda: dict(said), tmp_path / "memory")
    sampler.start()
    taken = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and len(taken) < 10:
            said["consumed"] += 1
            taken += sampler.take_memory("me")
            time.sleep(0.01)
    finally:
        sampler.stop()
    taken += sampler.take_memory("me")
    assert len(taken) >= 10, "fewer than 10 detailed samples in 30 s"
    assert all(s.process == "me" and s.pid == os.getpid() for s in taken)
    assert all(s.uss_bytes and s.hwm_bytes and s.hwm_bytes >= s.rss_anon_bytes for s in taken)
    consumed = [s.consumed for s in taken]
    assert consumed == sorted(consumed) and consumed[-1] > consumed[0]  # what it said, in order
    assert len({s.t_ns for s in taken}) == len(taken)  # each sample handed over once
    written = read_parts(tmp_path / "memory", MEMORY_SAMPLE_FIELDS)
    assert written.num_rows >= len(taken)
