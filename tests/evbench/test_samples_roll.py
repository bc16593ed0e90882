"""The process sampler runs as long as the run: its files roll as the records do (a day leaves
~1,440 of them, not 8,640), and what it wrote is read back once, rolled or not."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from analysis.report import _samples
from contract.partnames import parse
from evbench.samples import ProcessSampler
from runtime.parquet import ROLL_ENV, part_files


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
            rolled = [n for n in os.listdir(tmp_path) if (p := parse(n)) and p.rolled]
            if len(rolled) >= 2:
                break
            time.sleep(0.05)
    finally:
        sampler.stop()
    assert len(rolled) >= 2, os.listdir(tmp_path)
    kept = part_files(tmp_path)
    loose = [f for f in kept if (p := parse(f.name)) is None or not p.rolled]
    # The stop rolls what the open roll holds; a last lone part stays a file of its own.
    assert len(loose) <= 1 and all(f.name > r.name for f in loose for r in kept if r not in loose)
    rows = _samples(tmp_path, "processes")
    stamps = [r["t_ns"] for r in rows]
    assert len(stamps) == len(set(stamps)) >= 4  # every sample once
    assert stamps == sorted(stamps)
