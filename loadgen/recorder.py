"""Sent records kept as columns of machine integers, turned into Arrow off the hot path.

Per event the pacer stores five integers (seq, intended, sent, ack, status) in typed arrays and,
rarely, an error text: no tuple of thirteen Python objects, no id string. Everything else in a
sent row (event id, step, rate, warmup, decoy, worker, payload size) follows from the seq and
the plan, so it is derived a whole batch at a time with numpy and pyarrow when the buffer is
flushed, which runs on a worker thread (they release the GIL for most of it).
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contract.records import SENT_FIELDS
from loadgen.schedule import PlannedStep
from runtime.parquet import PartWriter, arrow_schema, record_roll_s

# Stored instead of null for a time that does not exist (never sent, never answered): epoch
# nanoseconds are always positive.
NO_TIME = -1


@dataclass(frozen=True)
class RowPlan:
    """What a sent row takes from the run's plan rather than from the send itself."""

    steps: tuple[PlannedStep, ...]
    event_id_prefix: str  # f"{run_tag}-{worker}-": the id is this plus the seq
    worker: int
    payload_bytes: int
    decoy_every: int


class SentColumns:
    """One buffer of sent rows; the engine swaps it for an empty one at each flush (on the
    loop's thread) and hands the full one to the writer thread."""

    def __init__(self) -> None:
        self.seq = array("q")
        self.intended_ns = array("q")
        self.sent_ns = array("q")
        self.ack_ns = array("q")
        self.status = array("i")
        self.errors: dict[int, str] = {}  # row index -> text; most rows have none
        # Leading rows already in the live histograms: a failed write's rows are written again
        # at the next flush, but never counted twice.
        self.observed = 0

    def __len__(self) -> int:
        return len(self.seq)

    def append(
        self, seq: int, intended_ns: int, sent_ns: int, ack_ns: int, status: int, error: str | None
    ) -> None:
        if error is not None:
            self.errors[len(self.seq)] = error
        self.seq.append(seq)
        self.intended_ns.append(intended_ns)
        self.sent_ns.append(sent_ns)
        self.ack_ns.append(ack_ns)
        self.status.append(status)


def _times(values: array[int]) -> pa.Array:
    column = np.frombuffer(values, dtype=np.int64)
    return pa.array(column, type=pa.int64(), mask=column == NO_TIME)


def to_batch(columns: SentColumns, plan: RowPlan) -> pa.RecordBatch:
    """The buffer as a record batch in the contract's schema (records.SENT_FIELDS)."""
    schema = arrow_schema(SENT_FIELDS)
    rows = len(columns)
    seq = np.frombuffer(columns.seq, dtype=np.int64)
    seq_array = pa.array(seq, type=pa.int64())
    first_seqs = np.array([s.first_seq for s in plan.steps], dtype=np.int64)
    which = np.searchsorted(first_seqs, seq, side="right") - 1
    step = np.array([s.number for s in plan.steps], dtype=np.int32)[which]
    rate = np.array([s.rate_per_s for s in plan.steps], dtype=np.int32)[which]
    warmup = np.array([s.warmup for s in plan.steps], dtype=bool)[which]
    every = plan.decoy_every
    decoy = (~warmup & (seq % every == every - 1)) if every else np.zeros(rows, dtype=bool)
    if columns.errors:
        texts: list[str | None] = [None] * rows
        for index, text in columns.errors.items():
            texts[index] = text
        errors = pa.array(texts, type=pa.string())
    else:
        errors = pa.nulls(rows, pa.string())
    arrays = {
        "event_id": pc.binary_join_element_wise(
            pa.scalar(plan.event_id_prefix), pc.cast(seq_array, pa.string()), ""
        ),
        "seq": seq_array,
        "step": pa.array(step, type=pa.int32()),
        "warmup": pa.array(warmup, type=pa.bool_()),
        "decoy": pa.array(decoy, type=pa.bool_()),
        "target_rate_per_s": pa.array(rate, type=pa.int32()),
        "intended_ns": pa.array(np.frombuffer(columns.intended_ns, dtype=np.int64)),
        "sent_ns": _times(columns.sent_ns),
        "ack_ns": _times(columns.ack_ns),
        "status": pa.array(np.frombuffer(columns.status, dtype=np.int32), type=pa.int32()),
        "error": errors,
        "worker": pa.array(np.full(rows, plan.worker, dtype=np.int32)),
        "payload_bytes": pa.array(np.full(rows, plan.payload_bytes, dtype=np.int32)),
    }
    return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=schema)


def is_decoy(seq: int, warmup: bool, decoy_every: int) -> bool:
    """The one rule for which events are decoys (the batch form above mirrors it)."""
    return bool(decoy_every) and not warmup and seq % decoy_every == decoy_every - 1


class SentRecorder:
    """The sent rows of a run: appended on the loop to `columns`, written by a worker thread at
    each flush, and kept for the next flush when a write fails (`warn` says so)."""

    def __init__(self, writer: PartWriter, plan: RowPlan, warn: Callable[[str], None]) -> None:
        self.writer = writer
        if writer.roll_s is None:  # unless its maker chose: every $EVBENCH_RECORD_ROLL_S
            writer.roll_s = record_roll_s()
        self.plan = plan
        self.warn = warn
        self.columns = SentColumns()
        self.flush_errors = 0
        self.last_error: str | None = None  # the last failed write's, as said in `warn`
        # Called on the writer thread with each buffer before it is written (the live figures
        # of loadgen.sendmetrics: their histograms follow the records, a batch at a time).
        self.observe: Callable[[SentColumns], None] | None = None
        # The write a flush handed to the writer thread, with its rows, until it is done.
        self._writing: tuple[asyncio.Future[None], SentColumns] | None = None
        # Set once the recording ends (settle() or close()): every flush from then on also
        # finishes the writer's open roll, so a normal stop leaves no minute of parts behind.
        self._ending = False

    async def flush(self) -> None:
        await self._flush_rows()
        if self._ending:  # on the writer's thread; never raises (runtime.parquet)
            await asyncio.get_running_loop().run_in_executor(None, self.writer.roll)

    async def _flush_rows(self) -> None:
        columns, self.columns = self.columns, SentColumns()
        if not len(columns):
            return
        write = asyncio.get_running_loop().run_in_executor(None, self._write, columns)
        self._writing = (write, columns)
        try:
            # Shielded: the flush loop is cancelled when the run ends, and cancelling a write
            # whose job the writer thread has not started yet cancels the job, so its rows were
            # never written (seen once in 17 fresh-clone suites: an interrupted run lost 200
            # records). The engine settles the write instead (settle()).
            await asyncio.shield(write)
        except Exception as exc:  # a cancel (not an Exception) leaves the write to settle()
            self._write_failed(columns, exc)
        self._writing = None

    async def close(self) -> None:
        """The last flush, then the open roll finished (runtime.parquet)."""
        self._ending = True
        await self.flush()

    async def settle(self) -> None:
        """Wait for the write a cancelled flush left running; its rows stay if it fails.
        The engine settles once its flush loop is cancelled: the recording is ending, so the
        flushes after this one roll too (as close() does)."""
        self._ending = True
        if self._writing is None:
            return
        write, columns = self._writing
        self._writing = None
        try:
            await write
        except Exception as exc:
            self._write_failed(columns, exc)

    @property
    def unwritten_rows(self) -> int:
        """Rows kept for a retry that has not succeeded (after the last flush: rows lost)."""
        return len(self.columns)

    def _write_failed(self, columns: SentColumns, exc: Exception) -> None:
        self.flush_errors += 1
        self.last_error = str(exc)
        self.columns = _merged(columns, self.columns)
        self.warn(f"writing sent records failed, will retry: {exc}")

    def _write(self, columns: SentColumns) -> None:  # on a worker thread
        # Before the write, so a full disk does not stop the live figures too.
        if self.observe is not None and columns.observed < len(columns):
            try:
                self.observe(columns)
            except Exception as exc:  # the live figures must never cost a record
                self.observe = None
                self.warn(f"the live figures stopped (the records go on): {exc!r}")
            columns.observed = len(columns)
        self.writer.write_batches([to_batch(columns, self.plan)])


def _merged(first: SentColumns, second: SentColumns) -> SentColumns:
    """A failed flush's rows back in front of those recorded since (kept for the next try)."""
    merged = SentColumns()
    merged.observed = first.observed  # the rows since (second's) were never flushed
    for columns in (first, second):
        for index in range(len(columns)):
            merged.append(
                columns.seq[index],
                columns.intended_ns[index],
                columns.sent_ns[index],
                columns.ack_ns[index],
                columns.status[index],
                columns.errors.get(index),
            )
    return merged
