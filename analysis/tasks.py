"""The analysis' unit of work: one slice of one step of one system (analysis.slices), its sent
events (read in place: analysis.sentindex) and their deliveries (compacted: analysis.compact)
read together, joined, and reduced to that slice's aggregates (analysis.steps) in one Arrow
pass. A step's figures are merged from its slices' on the driver (analysis.job).

Spark runs the tasks (analysis.job): a few partitions per slot, each a bin of tasks, on any
executor. No event crosses between the JVM and Python: each task reads its slice's row groups
with pyarrow where Spark would have read them and handed them over row by row (measured on the
3 M-event matrix: Spark's read of the narrow columns and its cogroup into Python took 3.8-6.4 s
before any work was done; the tasks read the same rows in 0.5 s of CPU, and do everything else
in 3.1 s more). The records' layout is what makes a slice's data a few row groups on each side
rather than a join across the run: the sender's parts in slot order, the deliveries compacted.

A task of a routable system holds one slice, the deliveries whose ids name that slice, and
counts as foreign the deliveries among them no sent event of the slice matches. One task per
system holds the deliveries that name no slice (NO_ROUTE): all foreign. A system whose ids do
not carry their slots (analysis.routing) is one task holding everything, a part per step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.compact import ID_SEQ, RECEIVED_KEPT, Copy
from analysis.digests import TOP_K
from analysis.fanout import Fanout, fanned
from analysis.hdr import HDR_ROWS, METRICS, interval_rows
from analysis.routing import NO_ROUTE
from analysis.slices import index_of, step_of, top_count
from analysis.steprule import LATENCIES_NS, ints, latencies, outcomes, seconds_since
from analysis.steps import STEP_ARROW, StepContext, aggregate_step, foreign_row
from analysis.unrecorded import NeverSent, never_sent
from contract.errors import RecordFileError
from contract.records import INFLIGHT_CAP_ERROR, RECEIVED_FIELDS, SENT_FIELDS
from contract.units import NS_PER_MS
from runtime.clocks import Correction
from runtime.parquet import arrow_schema, with_added

# What a task reads of each side: of sent/, from the parts (analysis.sentindex); of received/,
# what its compacted chunks keep (analysis.compact).
SENT_COLUMNS = (
    "event_id",
    "seq",
    "step",
    "warmup",
    "decoy",
    "target_rate_per_s",
    "intended_ns",
    "sent_ns",
    "ack_ns",
    "status",
    "error",
    "worker",
)
RECEIVED_COLUMNS = (*RECEIVED_KEPT, ID_SEQ.name)


# Exact top values kept per step and latency at least (analysis.digests.TOP_K), and above the
# ceil(n * 1e-4) that P99.99 needs, a margin for the interpolation's upper neighbour.
TOP_MARGIN = 16
# Where a step's aggregates carry no slice (a system read whole, a part per step).
WHOLE = 0
# A task's files: (path of a sent part or a received chunk, its row groups to read), in order.
Reads = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class StepTask:
    """One system's slice (`keys` of one, analysis.slices), or all its steps (a system read
    whole), or (`keys` empty) its deliveries that name no slice: the row groups of each file
    (sent part, received chunk) that hold it, and how many exact top values each step keeps."""

    sut: str
    keys: tuple[int, ...]
    sent: Reads
    received: Reads
    rows: int  # sent rows + received rows: the task's size, for the order they run in
    top_k: int = TOP_K
    whole: bool = False
    # sent/ read in place (analysis.sentindex): the slice's slot range, lowest and highest; of
    # the row groups read, a row group at the slice's edge holds the next slice's rows too.
    sent_slots: tuple[int, int] | None = None

    @property
    def steps(self) -> tuple[int, ...]:
        """The steps whose events it holds."""
        return tuple(sorted({step_of(key) for key in self.keys}))


def plan(copies: Mapping[str, tuple[Copy, Copy]]) -> list[StepTask]:
    """The tasks of every system (`copies`: SUT key -> its sent and received chunks), the
    largest first so that the last to finish is a small one."""
    tasks = []
    for sut, (sent, received) in copies.items():
        whole = sent.ranges is None or not sent.ranges.routable
        rows = sent.rows_by_key()
        per_step: dict[int, int] = {}
        for key, count in rows.items():
            per_step[step_of(key)] = per_step.get(step_of(key), 0) + count
        # Each slice keeps as many top values as its step needs (a system read whole: its
        # largest step), so every step's P99.99 is exact. Not the whole run's count: every slice
        # would send it to the driver, which grows with the square of the run's length
        # (analysis.digests.verified_top says where the run's own figure is exact).
        top_k = _step_top(max(per_step.values(), default=0))
        keys = [sorted(rows)] if whole else [[key] for key in sorted(rows)]
        if not whole and NO_ROUTE in received.keys:
            keys.append([])
        for mine in keys:
            wanted = received.keys if whole else set(mine) if mine else {NO_ROUTE}
            sent_reads, sent_count = _reads(sent, mine)
            received_reads, received_count = _reads(received, wanted)
            k = top_k if whole or not mine else _step_top(per_step[step_of(mine[0])])
            rows_read = sent_count + received_count
            slots = _slots(sent, mine) if sent.in_place and not whole else None
            task = StepTask(
                sut, tuple(mine), sent_reads, received_reads, rows_read, k, whole, slots
            )
            tasks.append(task)
    return sorted(tasks, key=lambda t: -t.rows)


def _slots(sent: Copy, keys: Sequence[int]) -> tuple[int, int] | None:
    """A slice's slot range, where its sent rows are read from parts shared with others."""
    if not keys or sent.ranges is None:
        return None
    (key,) = keys
    return sent.ranges.low[key], sent.ranges.high[key]


def _step_top(rows: int) -> int:
    return max(TOP_K, top_count(rows, TOP_MARGIN))


def _reads(copy: Copy, keys: Iterable[int]) -> tuple[Reads, int]:
    """The row groups of each chunk holding these keys, and their rows."""
    keys = set(keys)
    reads, rows = [], 0
    for chunk in copy.chunks:
        groups = chunk.groups(keys)
        if groups:
            reads.append((str(chunk.path), groups))
            rows += chunk.rows_of(keys)
    return tuple(reads), rows


# Partitions per task slot: each a bin of tasks. Spark pays ~70 ms per Python task (measured:
# 72 one-row partitions took 2.7 s on 2 cores, 2 took 0.15 s), so a step is not a partition of
# its own; two bins per slot even out slots that run at different speeds.
BINS_PER_SLOT = 2


def binned(tasks: Sequence[StepTask], slots: int) -> list[list[StepTask]]:
    """The tasks in bins of nearly equal rows (largest first into the lightest bin), at most
    BINS_PER_SLOT per slot; the heaviest bin first, as Spark runs partitions in order."""
    count = max(1, min(len(tasks), slots * BINS_PER_SLOT))
    bins: list[list[StepTask]] = [[] for _ in range(count)]
    loads = [0] * count
    for task in sorted(tasks, key=lambda t: -t.rows):
        lightest = loads.index(min(loads))
        bins[lightest].append(task)
        loads[lightest] += task.rows
    return [bins[i] for i in sorted(range(count), key=lambda i: -loads[i])]


def run(task: StepTask, context: StepContext) -> pa.Table:
    """A task's STEP_ARROW rows: its slice's aggregates (or, read whole, each step's) from
    `analysis.steps`, and a row carrying the count of its foreign deliveries."""
    events, unmet, strays = counted_events(task, context)
    parts = [foreign_row(task.sut, unmet, strays)]
    part = WHOLE if task.whole or not task.keys else index_of(task.keys[0])
    for table in by_step(events):
        parts.append(aggregate_step(table, context=context, part=part, top_k=task.top_k))
    return pa.concat_tables(parts).cast(STEP_ARROW)


def counted_events(task: StepTask, context: StepContext) -> tuple[pa.Table, NeverSent, int]:
    """The task's measured events (warmup out, the first `trim` seconds out) with their first
    delivery on the sender's clock (`received_ns`, null when none) and `deliveries`, as
    analysis.steprule reads them; how many distinct ids were received but never sent, foreign
    or the run's own (analysis.unrecorded); and, in a fan-out, how many deliveries came to a
    path no subscriber has (analysis.fanout)."""
    sent = sent_rows(task)
    received = read_rows(task.received, RECEIVED_COLUMNS)
    # Every sent event meets its deliveries, warmup too, so warmup deliveries are not foreign.
    sliced, strays = bool(task.keys) and not task.whole, 0
    own = context.own_ids.get(task.sut)
    if fanout := context.fanout.get(task.sut, ()):
        rows = slot_rows(sent, received) if sliced else None
        events, foreign, strays = fanned(
            sent, received, id_rows(sent, received) if rows is None else rows, fanout, own
        )
    else:
        met = by_slot(sent, received, own) if sliced else None
        events, foreign = met if met is not None else by_id(sent, received, own)
    window_ns = context.start_ns[task.sut] + context.trim_ns if context.trim_ns > 0 else None
    events = measured(events, context.corrections.get(task.sut, {}), window_ns)
    # The group's key as the step pass reads it: one dictionary entry, not a string per row.
    codes = pa.array(np.zeros(events.num_rows, np.int32))
    sut = pa.DictionaryArray.from_arrays(codes, [task.sut])
    return _with(events, "sut", sut), foreign, strays


def files_events(
    sent_parts: Sequence[str],
    received_parts: Sequence[str],
    corrections: Mapping[int, Correction],
    fanout: Fanout = (),
) -> pa.Table:
    """`counted_events` for whole record files rather than a task's row groups: a capacity
    probe's, which the search judges the moment it ends (evbench.probejudge), so that a probe
    and the run's final analysis read its events alike, clock correction and fan-out included."""
    sent = read_rows(_whole(sent_parts), SENT_COLUMNS)
    received = read_rows(_whole(received_parts), RECEIVED_KEPT)
    if fanout:
        events, _, _ = fanned(sent, received, id_rows(sent, received), fanout)
    else:
        events, _ = by_id(sent, received)
    return measured(events, corrections)


def measured(
    events: pa.Table, corrections: Mapping[int, Correction], window_ns: int | None = None
) -> pa.Table:
    """Sent events met with their deliveries, as the step rule reads them: `received_ns` on the
    sender's clock, the in-flight cap's refusals flagged, warmup out and, with `window_ns`,
    every event intended before it."""
    for name in [n for n in events.column_names if n.startswith("received_ns")]:
        events = _with(events, name, on_sender_clock(events, corrections, name))
    refused = pc.fill_null(pc.equal(events.column("error"), INFLIGHT_CAP_ERROR), False)
    events = _with(events, "inflight_cap_refused", refused)
    keep = pc.invert(events.column("warmup"))
    if window_ns is not None:  # sanitized figures: the leading window left out
        keep = pc.and_(keep, pc.greater_equal(events.column("intended_ns"), window_ns))
    return events.filter(keep)


def _whole(paths: Sequence[str]) -> Reads:
    """Every row group of each file."""
    return tuple((p, tuple(range(pq.ParquetFile(p).num_row_groups))) for p in paths)


def sent_rows(task: StepTask) -> pa.Table:
    """The task's sent events: its row groups' rows, and where sent/ is read in place, of those
    the rows in its slice's slot range (a row group at the slice's edge holds the next's too)."""
    sent = read_rows(task.sent, SENT_COLUMNS)
    if task.sent_slots is None:
        return sent
    seqs = sent.column("seq").to_numpy()
    low, high = task.sent_slots
    return sent.filter(pa.array((seqs >= low) & (seqs <= high)))


# The per-event outcomes the 2019 export reads (analysis.steprule.outcomes), besides `duplicates`.
RULE_FLAGS = ("ok", "send_failure", "delivered", "lost", "filtered", "leaked")
RULE_EVENTS_ARROW = pa.schema(
    [
        ("sut", pa.string()),
        ("seq", pa.int64()),
        *((name, pa.int64()) for name in ("intended_ns", "sent_ns", "ack_ns", "received_ns")),
        ("status", pa.int32()),
        ("decoy", pa.bool_()),
        ("deliveries", pa.int64()),
        *((name, pa.bool_()) for name in RULE_FLAGS),
        ("duplicates", pa.int64()),
        *((f"{name}_ms", pa.float64()) for name in LATENCIES_NS),
    ]
)


def rule_events(task: StepTask, context: StepContext) -> pa.Table:
    """The task's measured events, each with its outcomes and `<latency>_ms` (RULE_EVENTS_ARROW),
    for the 2019 export, which plots every event. Derived by the step rule itself
    (analysis.steprule), so the export and the summary cannot disagree."""
    events, _, _ = counted_events(task, context)
    found = outcomes(events)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        name: events.column(name) for name in RULE_EVENTS_ARROW.names if name in events.schema.names
    }
    columns["sut"] = pa.array([task.sut] * events.num_rows, pa.string())
    columns.update({name: pa.array(found[name]) for name in RULE_FLAGS})
    columns["duplicates"] = pa.array(found["duplicates"], pa.int64())
    columns.update(latencies(events, found["ok"]))
    return pa.table(columns).select(RULE_EVENTS_ARROW.names).cast(RULE_EVENTS_ARROW)


def hdr_rows(task: StepTask, context: StepContext) -> pa.Table:
    """The task's e2e and publish latencies as HdrHistogram intervals (analysis.hdr.HDR_ROWS):
    a histogram per second and step, from the step rule's own latencies, so the export and
    the summary cannot disagree. A slice holds whole seconds, so no interval is split."""
    events, _, _ = counted_events(task, context)
    found = latencies(events, outcomes(events)["ok"], METRICS)
    seconds = seconds_since(ints(events, "intended_ns"), context.start_ns[task.sut])
    steps = ints(events, "step")
    columns: dict[str, list[object]] = {name: [] for name in HDR_ROWS.names}
    for metric in METRICS:
        column = found[f"{metric}_ms"]
        defined = ~np.asarray(column.is_null())
        values_ms = column.fill_null(0.0).to_numpy()[defined]
        values_ns = np.rint(values_ms * float(NS_PER_MS)).astype(np.int64)
        rows = interval_rows(task.sut, metric, steps[defined], seconds[defined], values_ns)
        for name, values in rows.items():
            columns[name].extend(values)
    return pa.table(columns, schema=HDR_ROWS)


def by_id(sent: pa.Table, received: pa.Table, own: str | None = None) -> tuple[pa.Table, NeverSent]:
    """The sent events with their first delivery (`received_ns`, null when none) and how many
    (`deliveries`), met by a hash join of the ids; and the distinct ids received but never
    sent, the run's `own` among them told apart (analysis.unrecorded)."""
    firsts = first_deliveries(received.select(["event_id", "received_ns"]))
    events = sent.join(firsts, "event_id", join_type="left outer", use_threads=False)
    ids = firsts.column("event_id")
    unmet = never_sent(ids.filter(pc.invert(pc.is_in(ids, value_set=sent.column("event_id")))), own)
    return _with(events, "deliveries", pc.fill_null(events.column("deliveries"), 0)), unmet


def by_slot(
    sent: pa.Table, received: pa.Table, own: str | None = None
) -> tuple[pa.Table, NeverSent] | None:
    """`by_id`'s result for a slice, met by slot: a slice's slots are a short range, so each
    delivery finds its sent event by the slot its id names (ID_SEQ) and the ids are compared
    there, with no hash table of ids (measured on a 1 M-event slice: 0.1 s against 1.0 s for the
    join, its grouping and the foreign check). None where two sent events share a slot or the
    slots are sparse (no evbench writer does either): the join then."""
    row = slot_rows(sent, received)
    if row is None:
        return None
    met = row >= 0
    unmet = never_sent(received.column("event_id").filter(pa.array(~met)), own)
    deliveries = np.bincount(row[met], minlength=sent.num_rows)
    first = np.full(sent.num_rows, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, row[met], received.column("received_ns").to_numpy()[met])
    received_ns = pa.array(first, mask=deliveries == 0)
    events = sent.append_column("received_ns", received_ns)
    return events.append_column("deliveries", pa.array(deliveries, pa.int64())), unmet


def slot_rows(sent: pa.Table, received: pa.Table) -> np.ndarray | None:
    """The sent row each delivery is of (-1: none, a foreign id), found by the slot its id
    names (ID_SEQ) and checked by the id; None where the slots cannot index the sent rows (two
    events in one slot, or sparse slots)."""
    seqs = sent.column("seq").to_numpy()
    if len(seqs) == 0:
        return None
    low, span = int(seqs.min()), int(seqs.max()) - int(seqs.min()) + 1
    if span > 4 * len(seqs) + 1024:  # sparse slots (a user's own writer): an index would not fit
        return None
    at = np.full(span, -1, dtype=np.int64)
    at[seqs - low] = np.arange(len(seqs))
    if np.count_nonzero(at >= 0) != len(seqs):
        return None
    slots = received.column(ID_SEQ.name).to_numpy() - low
    row = np.full(len(slots), -1, dtype=np.int64)
    inside = (slots >= 0) & (slots < len(at))
    row[inside] = at[slots[inside]]
    ids = received.column("event_id")
    same = pc.equal(ids, sent.column("event_id").take(pa.array(np.maximum(row, 0))))
    row[~np.asarray(same.fill_null(False), dtype=bool)] = -1
    return row


def id_rows(sent: pa.Table, received: pa.Table) -> np.ndarray:
    """The sent row each delivery is of (-1: none), by a hash of the ids: `slot_rows` where
    the slots cannot say."""
    found = pc.index_in(received.column("event_id"), value_set=sent.column("event_id"))
    return np.asarray(found.fill_null(-1), dtype=np.int64)


def first_deliveries(received: pa.Table) -> pa.Table:
    """One row per delivered id: the first arrival (`received_ns`) and how many there were."""
    found = received.group_by("event_id", use_threads=False).aggregate(
        [("received_ns", "min"), ("received_ns", "count")]
    )
    return found.rename_columns(["event_id", "received_ns", "deliveries"])


def on_sender_clock(
    events: pa.Table, corrections: Mapping[int, Correction], name: str = "received_ns"
) -> pa.Array:
    """`received_ns` (or a subscriber's, `name`) moved onto the clock of the worker that sent
    the event: minus the
    receiver's offset to that worker at the event's intended time (runtime.clocks.Correction,
    linear between the two measurements); events of other workers keep the receiver's stamp.
    The offset is rounded half away from zero to whole ns before it is subtracted, so that no
    stamp goes through a double (which at epoch nanoseconds resolves only 256 ns)."""
    received = events.column(name)
    if not corrections or events.num_rows == 0:
        return received
    stamps = received.fill_null(0).to_numpy().copy()
    worker = events.column("worker").to_numpy()
    intended = events.column("intended_ns").to_numpy()
    for number, correction in corrections.items():
        here = worker == number
        at = (intended[here] - correction.before.at_ns).astype(np.float64)
        offset = float(correction.before.offset_ns) + correction.slope * at
        stamps[here] -= (np.sign(offset) * np.floor(np.abs(offset) + 0.5)).astype(np.int64)
    return pa.array(stamps, mask=np.asarray(received.is_null()))


def by_step(events: pa.Table) -> Iterable[pa.Table]:
    """The events of each step, a table per step in step order."""
    if events.num_rows == 0:
        return
    steps = events.column("step").to_numpy()
    if steps.min() == steps.max():
        yield events
        return
    for step in np.unique(steps):
        yield events.filter(pa.array(steps == step))


def read_rows(reads: Reads, columns: tuple[str, ...]) -> pa.Table:
    """The row groups, in the contract's types: sent parts read in place may be of a run
    recorded before a column's encoding changed (a dictionary, say)."""
    schema = _empty(columns).schema
    tables = []
    for path, groups in reads:
        try:
            file = pq.ParquetFile(path)
            # A raw part recorded before a column was added (contract.records.added_later)
            # lacks it: read as null.
            held = [name for name in columns if name in file.schema_arrow.names]
            table = file.read_row_groups(list(groups), columns=held, use_threads=False)
            tables.append(with_added(table, schema))
        except (pa.ArrowException, OSError) as exc:  # named here: it fails on an executor
            raise RecordFileError(f"{path}: unreadable as the analysis reads it ({exc})") from exc
    if not tables:
        return _empty(columns)
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _empty(columns: tuple[str, ...]) -> pa.Table:
    """No rows, in the contract's (and the compacted copy's) types of these columns."""
    fields = {f.name: f for f in arrow_schema([*SENT_FIELDS, *RECEIVED_FIELDS])}
    fields[ID_SEQ.name] = ID_SEQ
    return pa.schema([fields[name] for name in columns]).empty_table()


def _with(table: pa.Table, name: str, column: pa.Array | pa.ChunkedArray) -> pa.Table:
    """`table` with column `name` replaced, or added."""
    at = table.schema.get_field_index(name)
    return table.set_column(at, name, column) if at >= 0 else table.append_column(name, column)
