"""The sender's record flush when the run ends mid-write (a real PartWriter, real Parquet)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from contract.records import SENT_FIELDS
from loadgen.engine import Engine
from loadgen.pace import Step
from loadgen.recorder import RowPlan
from loadgen.schedule import plan_steps
from runtime.parquet import PartWriter, read_parts


class _NoTransport:
    """The flush never sends: only the engine's bookkeeping is under test."""

    def bind(self, complete) -> None:
        pass


def test_a_flush_cancelled_before_its_write_started_still_writes_every_row(tmp_path: Path):
    """When a run ends, its flush loop is cancelled. A write the writer thread had not started
    yet used to be cancelled with it, and its rows were never written (an interrupted run in a
    fresh-clone suite lost a whole flush, 200 records). Here the writer thread is held busy so
    the cancel always lands before the write starts."""
    steps = plan_steps([Step(rate_per_s=100, duration_s=1)], 0.0)
    plan = RowPlan(steps=steps, event_id_prefix="t-0-", worker=0, payload_bytes=64, decoy_every=0)
    engine = Engine(
        _NoTransport(),
        PartWriter(tmp_path / "sent", SENT_FIELDS, prefix="sent-w0"),
        steps,
        plan=plan,
    )

    async def end_of_run_during_a_flush() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        gate = threading.Event()
        busy = loop.run_in_executor(None, gate.wait)  # the only writer thread is taken
        for seq in range(5):
            engine.records.columns.append(seq, 1_000 + seq, 2_000 + seq, 3_000 + seq, 202, None)
        flush = asyncio.create_task(engine.records.flush())
        await asyncio.sleep(0)  # the flush has queued its write behind the busy thread
        flush.cancel()
        await asyncio.gather(flush, return_exceptions=True)
        gate.set()
        await busy
        await engine.records.settle()  # what run() does after cancelling its background tasks
        await engine.records.flush()

    asyncio.run(end_of_run_during_a_flush())
    rows = read_parts(tmp_path / "sent", SENT_FIELDS).to_pylist()
    assert sorted(r["seq"] for r in rows) == [0, 1, 2, 3, 4]
    assert engine.records.flush_errors == 0
