"""One (sut, step) group of events in, everything the job needs from that step out, in one pass.

A step's events are read and joined with their deliveries by its task (analysis.tasks). Its
per-second digests (`analysis.digests.digest_rows`) are written where they are made
(`analysis.digests.write_per_second`); what comes back are rows of `STEP_ARROW`:
- the step's own digest per metric (`second` null) and the e2e median of each second;
- one *step row* (`metric` null) carrying the step's `totals`, its per-second counts
  (`seconds`) and its latency `points` buckets.
Counts per second and point buckets are partial where a second or a bucket holds events of two
steps (a delivery that lands in the next step's seconds, a bucket straddling a step boundary):
`merge_seconds` and `merge_points` finish them on the driver, from a few rows per second.

Before, each of these was a Spark job of its own over the joined events, six shuffles of
millions of rows where one does. The rules are docs/design.md §4's, applied by
analysis.steprule, as the search's probe judge applies them.

A row whose `step` is null carries a count of foreign deliveries (ids received, never sent,
`foreign_row`) and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.digests import DIGEST_ARROW, TOP_K, digest_rows, write_per_second
from analysis.fanout import Fanout, fanout_step
from analysis.steprule import (
    LATE_AFTER_MS,
    Outcomes,
    StepTotals,
    ints,
    latencies,
    outcomes,
    present,
    seconds_since,
    step_totals,
)
from analysis.unrecorded import NeverSent
from contract.units import NS_PER_S
from runtime.clocks import Correction

# A step's totals on their way back to the driver (analysis.steprule.StepTotals, a test holds
# the names equal).
TOTALS_ARROW = pa.struct(
    [
        ("step", pa.int32()),
        ("target_rate_per_s", pa.int32()),
        ("scheduled", pa.int64()),
        ("sent", pa.int64()),
        ("inflight_cap_refused", pa.int64()),
        ("acked", pa.int64()),
        ("send_failures", pa.int64()),
        ("lost", pa.int64()),
        ("delivered", pa.int64()),
        ("duplicates", pa.int64()),
        ("decoys", pa.int64()),
        ("filtered", pa.int64()),
        ("leaked", pa.int64()),
        ("start_ns", pa.int64()),
        ("last_intended_ns", pa.int64()),
        ("last_sent_ns", pa.int64()),
        ("first_received_ns", pa.int64()),
        ("last_received_ns", pa.int64()),
        ("negative_e2e", pa.int64()),
        ("failures_by_cause", pa.map_(pa.string(), pa.int64())),
    ]
)
# Sends count by sent_ns, failures, losses and late deliveries (analysis.steprule.LATE_AFTER_MS)
# by intended_ns (when the event was due), deliveries by received_ns (docs/design.md §4). `step`
# and the target are those of the events due in that second; null where none was.
SECOND_COUNTS = (
    "scheduled", "send_failures", "lost", "sent", "acked", "delivered", "late",
)  # fmt: skip
SECOND_ARROW = pa.struct(
    [
        ("second", pa.int64()),
        *((name, pa.int64()) for name in SECOND_COUNTS),
        ("step", pa.int32()),
        ("target_rate_per_s", pa.int32()),
    ]
)
POINT_ARROW = pa.struct(
    [
        ("bucket", pa.int64()),
        ("t_ns", pa.int64()),
        ("events", pa.int64()),
        ("publish_ms", pa.float64()),
        ("e2e_ms", pa.float64()),
    ]
)
STEP_ARROW = pa.schema(
    [
        *DIGEST_ARROW,
        ("slice", pa.int64()),  # the slice's index in its step (analysis.slices)
        ("totals", TOTALS_ARROW),
        ("seconds", pa.list_(SECOND_ARROW)),
        ("points", pa.list_(POINT_ARROW)),
        ("foreign", pa.int64()),
        # A fan-out's: each subscriber's totals (analysis.fanout); null for one subscriber.
        ("subscribers", pa.list_(pa.struct([("number", pa.int32()), ("totals", TOTALS_ARROW)]))),
        ("strays", pa.int64()),  # a fan-out's deliveries to no subscriber's path (foreign row)
        ("unrecorded", pa.int64()),  # the run's own ids never sent (analysis.unrecorded)
    ]
)


@dataclass(frozen=True)
class StepContext:
    """What every step of a SUT shares, handed to the task rather than repeated in every row:
    its schedule start and point-bucket width, by SUT key; the directory the per-second digests
    are written to (analysis.digests.write_per_second); the leading window left out (`--trim`);
    each SUT's clock corrections by sender worker (analysis.tasks.on_sender_clock); and the
    subscribers of those that fan out (analysis.fanout)."""

    start_ns: Mapping[str, int]
    bucket_ns: Mapping[str, int]
    staging: str
    trim_ns: int = 0
    corrections: Mapping[str, Mapping[int, Correction]] = field(default_factory=dict)
    fanout: Mapping[str, Fanout] = field(default_factory=dict)  # by SUT key, where it fans out
    # The pattern of each SUT's own ids, where its run tags are known (analysis.unrecorded).
    own_ids: Mapping[str, str] = field(default_factory=dict)


def aggregate_step(
    table: pa.Table, *, context: StepContext, part: int = 0, top_k: int = TOP_K
) -> pa.Table:
    """A (sut, step) group, slice `part` of its step -> its digests (each keeping its `top_k`
    largest values), its e2e figures per second and its step row (STEP_ARROW); its per-second
    digests go to `context.staging` (one file per slice)."""
    sut = table.column("sut")[0].as_py()
    step = table.column("step")[0].as_py()
    start_ns = context.start_ns[sut]
    flags = outcomes(table)
    latency = latencies(table, flags["ok"])
    seconds = seconds_since(ints(table, "intended_ns"), start_ns)
    digests = digest_rows(sut, step, seconds, latency, top_k)
    per_second = pc.is_valid(digests.column("second"))
    write_per_second(digests.filter(per_second), context.staging, sut, step, part)
    # Back to Spark: the step's own digests, and the e2e median of each second (for the rule on
    # rising latency) without its digest.
    e2e = pc.equal(digests.column("metric"), "e2e")
    digests = digests.filter(pc.or_(pc.invert(per_second), e2e))
    subscribers = None
    if fanout := context.fanout.get(sut, ()):
        subscribers, theirs = fanout_step(table, fanout, sut, step, top_k)
        digests = pa.concat_tables([digests, theirs])
    for name in ("digest", "centroids"):
        kept = pc.if_else(
            pc.is_valid(digests.column("second")),
            pa.nulls(digests.num_rows, digests.schema.field(name).type),
            digests.column(name),
        )
        digests = digests.set_column(digests.schema.get_field_index(name), name, kept)
    row = _step_row(
        sut,
        step,
        part,
        totals=step_totals(table, flags),
        seconds=second_counts(table, flags, start_ns, latency["e2e_ms"]),
        points=point_buckets(table, latency, start_ns, context.bucket_ns[sut]),
        subscribers=subscribers,
    )
    extras = [n for n in STEP_ARROW.names if n not in DIGEST_ARROW.names]
    for name in extras:
        field = STEP_ARROW.field(name)
        filled = pa.array([part] * digests.num_rows, field.type) if name == "slice" else None
        digests = digests.append_column(field, filled or pa.nulls(digests.num_rows, field.type))
    return pa.concat_tables([digests, row])


def foreign_row(sut: str, unmet: NeverSent, strays: int = 0) -> pa.Table:
    """The row that carries the counts of ids received and never sent (foreign, and the run's
    own: analysis.unrecorded) and of a fan-out's deliveries to no subscriber's path: the
    driver adds up a SUT's."""
    row = _step_row(sut, None, None, foreign=unmet.foreign)
    for name, count in (("strays", strays), ("unrecorded", unmet.unrecorded)):
        row = row.set_column(row.schema.get_field_index(name), name, pa.array([count]))
    return row


def _step_row(
    sut: str,
    step: int | None,
    part: int | None,
    totals: StepTotals | None = None,
    seconds: list[dict[str, Any]] | None = None,
    points: pa.StructArray | None = None,
    foreign: int = 0,
    subscribers: list[dict[str, Any]] | None = None,
) -> pa.Table:
    values: dict[str, Any] = {name: [None] for name in STEP_ARROW.names}
    values.update(sut=[sut], step=[step], totals=[totals], seconds=[seconds], foreign=[foreign])
    values["subscribers"] = [subscribers]
    values["slice"] = [part]
    if points is not None:  # one list of them, built from its arrays (thousands of buckets)
        offsets = pa.array([0, len(points)], pa.int32())
        values["points"] = pa.ListArray.from_arrays(offsets, points).cast(
            STEP_ARROW.field("points").type
        )
    return pa.table(values, schema=STEP_ARROW)


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys ascending, each key's index among them). Keys are seconds or buckets,
    which span a narrow range: counted directly there, sorted only where they spread wide
    (a stamp hours off)."""
    if len(keys) == 0:
        return keys, keys
    low = int(keys.min())
    span = int(keys.max()) - low + 1
    if span > 4 * len(keys) + 1024:
        return np.unique(keys, return_inverse=True)
    present = np.bincount(keys - low, minlength=span) > 0
    slot = np.cumsum(present) - 1
    return np.flatnonzero(present) + low, slot[keys - low]


def _sum_by(keys: np.ndarray, **weights: np.ndarray) -> dict[int, dict[str, int]]:
    """Per distinct key: the sum of each weight (booleans count)."""
    distinct, index = _groups(keys)
    sums = {
        name: np.bincount(index, weights=w.astype(np.int64), minlength=len(distinct))
        for name, w in weights.items()
    }
    return {
        int(key): {name: int(column[i]) for name, column in sums.items()}
        for i, key in enumerate(distinct.tolist())
    }


def second_counts(
    table: pa.Table, flags: Outcomes, start_ns: int, e2e_ms: pa.Array
) -> list[dict[str, Any]]:
    """This step's part of the per-second series: rows for the seconds its events were due, sent
    or delivered in."""
    late = e2e_ms.to_numpy(zero_copy_only=False) > LATE_AFTER_MS  # null (NaN): not late
    intended = ints(table, "intended_ns")
    sent, was_sent = present(table, "sent_ns")
    received, delivered = present(table, "received_ns")
    ones = np.ones(table.num_rows, np.int64)
    due = seconds_since(intended, start_ns)
    by_intent = _sum_by(
        due,
        scheduled=ones,
        send_failures=flags["send_failure"],
        lost=flags["lost"],
        late=late.astype(np.int64),
    )
    distinct, index = _groups(due)
    highest = np.zeros(len(distinct), np.int64)
    np.maximum.at(highest, index, ints(table, "target_rate_per_s").astype(np.int64))
    targets = dict(zip(distinct.tolist(), highest.tolist(), strict=True))
    by_send = _sum_by(
        seconds_since(sent[was_sent], start_ns),
        sent=ones[was_sent],
        acked=flags["ok"][was_sent],
    )
    by_delivery = _sum_by(seconds_since(received[delivered], start_ns), delivered=ones[delivered])
    rows: dict[int, dict] = {}
    for part in (by_intent, by_send, by_delivery):
        for key, sums in part.items():
            rows.setdefault(key, dict.fromkeys(SECOND_COUNTS, 0)).update(sums)
    step = table.column("step")[0].as_py()
    for second, target in targets.items():
        rows[second].update(step=step, target_rate_per_s=target)
    return [{"second": second, **row} for second, row in sorted(rows.items())]


def point_buckets(
    table: pa.Table, latency: dict[str, pa.Array], start_ns: int, bucket_ns: int
) -> pa.StructArray:
    """Time buckets of `bucket_ns` by intended time: each keeps its first instant, its event
    count and the maximum of each latency, so spikes are never averaged away."""
    intended = ints(table, "intended_ns")
    order = np.argsort((intended - start_ns) // bucket_ns, kind="stable")  # nearly sorted
    buckets = ((intended - start_ns) // bucket_ns)[order]
    starts = np.flatnonzero(np.diff(buckets, prepend=buckets[:1] - 1)) if len(buckets) else buckets
    found = {
        "bucket": pa.array(buckets[starts]),
        "t_ns": pa.array(np.minimum.reduceat(intended[order], starts) if len(starts) else starts),
        "events": pa.array(np.diff(np.append(starts, len(buckets)))),
    }
    for name in ("publish_ms", "e2e_ms"):
        values = latency[name].to_numpy(zero_copy_only=False)[order]  # nulls are NaN
        highest = np.fmax.reduceat(values, starts) if len(starts) else values
        found[name] = pa.array(highest, from_pandas=True)  # NaN: no value in the bucket
    return pa.StructArray.from_arrays(list(found.values()), fields=list(POINT_ARROW))


def merge_seconds(parts: Iterable[dict], start_ns: int) -> list[dict]:
    """One SUT's per-second series from its steps' parts: counts summed, the step and target of
    the events due in that second, and every second from the first to the last, so a second in
    which nothing happened shows as zero instead of vanishing between its neighbours
    (docs/design.md §4: never hide oscillation)."""
    rows: dict[int, dict] = {}
    for part in parts:
        # metrics.parquet's columns, in its order: second, t_ns, step, target, the counts.
        row = rows.setdefault(
            part["second"],
            {"step": None, "target_rate_per_s": None, **dict.fromkeys(SECOND_COUNTS, 0)},
        )
        for name in SECOND_COUNTS:
            row[name] += part[name]
        for name in ("step", "target_rate_per_s"):
            if part[name] is not None:
                row[name] = part[name] if row[name] is None else max(row[name], part[name])
    if not rows:
        return []
    empty = {"step": None, "target_rate_per_s": None, **dict.fromkeys(SECOND_COUNTS, 0)}
    return [
        {"second": s, "t_ns": s * NS_PER_S + start_ns, **rows.get(s, empty)}
        for s in range(min(rows), max(rows) + 1)
    ]


# points.parquet: the buckets in time order, without their number.
POINTS_ARROW = pa.schema([f for f in POINT_ARROW if f.name != "bucket"])


def merge_points(parts: pa.Table) -> pa.Table:
    """One SUT's points from its steps' buckets: a bucket two steps share is one point."""
    if parts.num_rows == 0:
        return POINTS_ARROW.empty_table()
    merged = parts.group_by("bucket").aggregate(
        [("t_ns", "min"), ("events", "sum"), ("publish_ms", "max"), ("e2e_ms", "max")]
    )
    return pa.table(
        {
            "t_ns": merged.column("t_ns_min"),
            "events": merged.column("events_sum"),
            "publish_ms": merged.column("publish_ms_max"),
            "e2e_ms": merged.column("e2e_ms_max"),
        },
        schema=POINTS_ARROW,
    ).sort_by("t_ns")


def e2e_seconds(head: pa.Table, per_second: pa.ChunkedArray) -> list[dict[str, Any]]:
    """Each second's e2e figures from the tasks' rows (`per_second`: those of a second, as
    `aggregate_step` sends them back): its median for the rule on rising latency, its P99 and
    highest e2e for a fault's recovery band (analysis.faultsteps: of the seconds all delivered
    before the fault)."""
    columns = ["sut", "step", "second", "n", "p50_ms", "p99_ms", "max_ms"]
    return head.select(columns).filter(per_second).to_pylist()


def flat(column: pa.ChunkedArray) -> pa.Table:
    """A list<struct> column's items as one table."""
    items = pc.list_flatten(column)
    return pa.Table.from_struct_array(items) if len(items) else pa.table({})
