"""The part writer's rolls on real files: few files for many flushes, every row once, whatever
state a kill leaves (runtime.parquet, contract.partnames)."""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from contract.errors import EvbenchError
from contract.partnames import parse
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from loadgen.pace import Step
from loadgen.recorder import RowPlan, SentRecorder
from loadgen.schedule import plan_steps
from runtime.parquet import (
    DEFAULT_ROLL_S,
    ROLL_ENV,
    PartWriter,
    checked_parts,
    part_files,
    read_parts,
    record_roll_s,
)


def _rows(first: int, count: int) -> list[tuple]:
    return [
        (f"e-{i}", 1_000 + i, "rx", 10, f"e-{i}", "t", "s", "/")
        for i in range(first, first + count)
    ]


def _ids(directory: Path) -> list[str]:
    return read_parts(directory, RECEIVED_FIELDS).column("event_id").to_pylist()


def _names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def test_a_writer_rolling_every_roll_s_leaves_few_files_and_every_row_once(tmp_path):
    out = tmp_path / "received"
    roll_s = 0.25
    writer = PartWriter(out, RECEIVED_FIELDS, prefix="rx", roll_s=roll_s)
    written = 0
    began = time.monotonic()
    # A flush every 20 ms (12x the parts of one a second) for 1.5 s and 60 parts at least.
    while writer.parts_written < 60 or time.monotonic() - began < 1.5:
        assert time.monotonic() - began < 60, f"{writer.parts_written} parts in 60 s"
        writer.write(_rows(written, 7))
        written += 7
        time.sleep(0.02)
    elapsed_s = time.monotonic() - began
    files_before_stop = part_files(out)
    writer.roll()  # a normal stop
    files = part_files(out)
    # One file per roll_s, never one per flush; before the stop, plus the parts of the roll
    # still open (the last roll_s), and only those.
    most = math.ceil(elapsed_s / roll_s) + 1
    assert most < writer.parts_written / 3
    named = [parse(p.name) for p in files_before_stop]
    rolled = [n for n in named if n is not None and n.rolled]
    assert 0 < len(rolled) <= most and all(n.last > n.first for n in rolled)
    tail = [n for n in named if n is not None and not n.rolled]
    assert all(n.first > max(r.last for r in rolled) for n in tail)
    # After the stop: rolled files, and a part only where the last roll held just that one.
    singles = [p for p in files if not p.name.endswith(".rolled.parquet")]
    assert len(files) <= most and len(singles) <= 1
    assert writer.rolls_written == len(files) - len(singles) and writer.roll_errors == 0
    ids = _ids(out)
    assert len(ids) == len(set(ids)) == written
    assert not [n for n in _names(out) if n.startswith(".")]  # no hidden file left


def test_a_kill_between_the_roll_and_its_deletes_counts_no_row_twice(tmp_path):
    out = tmp_path / "received"
    writer = PartWriter(out, RECEIVED_FIELDS, prefix="rx", roll_s=3600)
    for first in (0, 5, 10):
        writer.write(_rows(first, 5))
    parts = {p.name: p.read_bytes() for p in part_files(out)}
    assert len(parts) == 3
    rolled_path = writer.roll()
    assert rolled_path is not None
    rolled = Path(rolled_path)
    assert rolled.name == "rx-000000-000002.rolled.parquet"
    for name, data in parts.items():  # as a kill before the deletes leaves the directory
        (out / name).write_bytes(data)
    assert [p.name for p in part_files(out)] == [rolled.name]
    assert sorted(_ids(out)) == sorted(f"e-{i}" for i in range(15))
    # A writer that starts there again numbers after the roll and clears the leftovers.
    again = PartWriter(out, RECEIVED_FIELDS, prefix="rx", roll_s=3600)
    assert again.write(_rows(15, 1)) == str(out / "rx-000003.parquet")
    assert _names(out) == [".rx-000003.rolling.tmp", rolled.name, "rx-000003.parquet"]


def test_a_kill_mid_roll_leaves_only_complete_parts_to_read(tmp_path):
    out = tmp_path / "received"
    writer = PartWriter(out, RECEIVED_FIELDS, prefix="rx", roll_s=3600)
    for first in (0, 4):
        writer.write(_rows(first, 4))
    hidden = [n for n in _names(out) if n.startswith(".")]
    assert hidden == [".rx-000000.rolling.tmp"]  # the roll in progress: no footer yet
    # The writer is dropped without a roll, as a SIGKILL leaves it: the parts hold every row.
    assert sorted(_ids(out)) == sorted(f"e-{i}" for i in range(8))
    PartWriter(out, RECEIVED_FIELDS, prefix="rx", roll_s=3600)  # the next start tidies it
    assert _names(out) == ["rx-000000.parquet", "rx-000001.parquet"]


def test_a_roll_of_one_part_leaves_the_part_and_no_hidden_file(tmp_path):
    out = tmp_path / "received"
    writer = PartWriter(out, RECEIVED_FIELDS, prefix="rx", roll_s=3600)
    writer.write(_rows(0, 3))
    assert writer.roll() is None
    assert _names(out) == ["rx-000000.parquet"]
    assert writer.roll() is None  # nothing open: nothing to do


def test_a_writer_without_roll_s_keeps_one_file_per_flush(tmp_path):
    out = tmp_path / "received"
    writer = PartWriter(out, RECEIVED_FIELDS, prefix="rx")
    for first in (0, 1, 2):
        writer.write(_rows(first, 1))
    assert writer.roll() is None
    assert _names(out) == [f"rx-00000{i}.parquet" for i in range(3)]


def test_the_writer_interns_none_of_the_names_it_makes_per_part(tmp_path, monkeypatch):
    """pathlib interns every component of a path it builds; a name made each second leaves a
    dead entry in the interpreter's interned-string table, which doubles once they fill it
    (runtime.parquet's doc). Parts, temp names, rolls and their deletes all go by strings."""
    out = tmp_path / "received"
    writer = PartWriter(out, RECEIVED_FIELDS, prefix="rx", roll_s=3600)
    interned: list[str] = []
    real_intern = sys.intern

    def intern(name: str) -> str:
        interned.append(name)
        return real_intern(name)

    # Not a probe of pathlib alone: the same patch sees what a Path would intern here.
    monkeypatch.setattr(sys, "intern", intern)
    assert (out / "rx-probe.parquet").name and "rx-probe.parquet" in interned
    interned.clear()
    paths = [writer.write(_rows(first, 2)) for first in range(0, 10, 2)]
    rolled = writer.roll()
    monkeypatch.undo()
    assert [name for name in interned if "rx-" in name] == []
    assert all(isinstance(p, str) for p in [*paths, rolled])
    assert _names(out) == ["rx-000000-000004.rolled.parquet"]
    assert sorted(_ids(out)) == sorted(f"e-{i}" for i in range(10))


def test_the_sent_recorder_rolls_at_its_close(tmp_path, monkeypatch):
    monkeypatch.setenv(ROLL_ENV, "3600")
    steps = plan_steps([Step(rate_per_s=100, duration_s=1)], 0.0)
    plan = RowPlan(steps=steps, event_id_prefix="t-0-", worker=0, payload_bytes=64, decoy_every=0)
    writer = PartWriter(tmp_path / "sent", SENT_FIELDS, prefix="sent-w0")
    recorder = SentRecorder(writer, plan, warn=print)
    assert writer.roll_s == 3600  # from the environment, as the sender process does

    async def two_flushes_and_a_stop() -> None:
        for seq in range(6):
            recorder.columns.append(seq, 1_000 + seq, 2_000 + seq, 3_000 + seq, 202, None)
            if seq == 2:
                await recorder.flush()
        await recorder.close()

    asyncio.run(two_flushes_and_a_stop())
    assert _names(tmp_path / "sent") == ["sent-w0-000000-000001.rolled.parquet"]
    seqs = read_parts(tmp_path / "sent", SENT_FIELDS).column("seq").to_pylist()
    assert sorted(seqs) == list(range(6))


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, DEFAULT_ROLL_S), ("", DEFAULT_ROLL_S), ("0.5", 0.5), ("120", 120.0), ("0", None)],
)
def test_the_roll_interval_from_the_environment(value, expected):
    environ = {} if value is None else {ROLL_ENV: value}
    assert record_roll_s(environ) == expected


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf"])
def test_a_bad_roll_interval_is_named(value):
    with pytest.raises(EvbenchError, match=ROLL_ENV):
        record_roll_s({ROLL_ENV: value})


def test_a_file_copied_under_another_name_is_read_once_and_named(tmp_path):
    """Each file says what it holds (its writer and part numbers) in its footer: a copy, under
    any name, is left out and returned with the file it copies (issue 51, item 9.3)."""
    out = tmp_path / "received"
    writer = PartWriter(out, RECEIVED_FIELDS, prefix="rx", roll_s=3600)
    for first in (0, 5, 10):
        writer.write(_rows(first, 5))
    rolled = Path(str(writer.roll()))
    writer.write(_rows(15, 5))
    part = out / "rx-000003.parquet"
    copies = {"rx-000003 (copy).parquet": part, "rx-000099.parquet": part, "mine.parquet": rolled}
    for name, source in copies.items():
        shutil.copyfile(source, out / name)
    assert len(part_files(out)) == 5  # by their names, all five would be read
    kept, found = checked_parts(out, RECEIVED_FIELDS)
    assert kept == [rolled, part]
    assert sorted(found) == sorted((out / name, source) for name, source in copies.items())
    assert sorted(_ids(out)) == sorted(f"e-{i}" for i in range(20))  # every row, once
    # A second writer's part 3 is another part: kept.
    other = PartWriter(tmp_path / "other", RECEIVED_FIELDS, prefix="rx")
    for first in (20, 21, 22, 23):
        other.write(_rows(first, 1))
    shutil.copyfile(tmp_path / "other" / "rx-000003.parquet", out / "theirs.parquet")
    assert (out / "theirs.parquet") in checked_parts(out, RECEIVED_FIELDS)[0]
