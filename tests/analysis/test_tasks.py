"""The analysis' tasks on a tiny hand-written run where every figure is known, from record parts
through the compacted copies to the driver's aggregates, without Spark (analysis.tasks)."""

from pathlib import Path

import pyarrow as pa
import pytest

from analysis.compact import Copy, Layout, compact_received
from analysis.digests import TOP_K
from analysis.job import from_steps
from analysis.routing import NO_ROUTE, SeqRanges, id_seqs
from analysis.sentindex import index_sent
from analysis.slices import key_of
from analysis.steps import StepContext
from analysis.tasks import (
    TOP_MARGIN,
    StepTask,
    binned,
    by_id,
    by_slot,
    counted_events,
    on_sender_clock,
    plan,
    rule_events,
    run,
)
from analysis.unrecorded import NeverSent, own_ids
from contract.records import RECEIVED_FIELDS, SENT_FIELDS, ReceivedRow, SentRow
from runtime.clocks import Correction, OffsetEstimate
from runtime.parquet import PartWriter

S = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * S  # schedule start


def sent_row(
    eid, seq, step, intended_ms, sent_ms, ack_ms, status, warmup=False, rate=2, worker=0
) -> SentRow:
    def at(ms):
        return None if ms is None else T0 + ms * MS

    error = None if 200 <= status < 300 else "boom"
    stamps = (at(intended_ms), at(sent_ms), at(ack_ms))
    return SentRow(eid, seq, step, warmup, False, rate, *stamps, status, error, worker, 8192)


def received_row(eid, received_ms) -> ReceivedRow:
    return ReceivedRow(eid, T0 + received_ms * MS, "rx", 8192, eid, "t", "s")


# Seq -> the letter the test names it by; the id is "x-0-<seq>", which carries its seq.
NAMES = dict(enumerate("wabcdef"))
SENT = [
    sent_row("x-0-0", 0, 0, -2000, -2000, -1990, 202, warmup=True),
    sent_row("x-0-1", 1, 1, 0, 1, 11, 202),  # a: delivered once
    sent_row("x-0-2", 2, 1, 500, 502, 520, 202),  # b: delivered twice
    sent_row("x-0-3", 3, 1, 1000, 1001, 1005, 202),  # c: acked, never received: lost
    sent_row("x-0-4", 4, 1, 1500, 1500, 1530, 503),  # d: refused, delivered anyway
    sent_row("x-0-5", 5, 2, 3000, 3002, None, 0),  # e: transport error
    sent_row("x-0-6", 6, 2, 3500, None, None, 0),  # f: never sent
]
RECEIVED = [
    received_row("x-0-0", -1985),
    received_row("x-0-1", 20),
    received_row("x-0-2", 540),
    received_row("x-0-2", 2100),  # duplicate, later
    received_row("x-0-4", 1600),
    received_row("zz", 700),  # foreign
]


def _written(writer: PartWriter, rows: list) -> Path:
    """A part file of `rows` (never empty here)."""
    path = writer.write(rows)
    assert path is not None
    return Path(path)


def _records(directory, sent, received):
    """The rows as part files, a part per step (sent) and per three deliveries (received), as a
    run writes a part per second; then compacted as the job does."""
    sent_writer = PartWriter(directory / "sent", SENT_FIELDS)
    parts = [_written(sent_writer, [r for r in sent if r.step == step]) for step in (0, 1, 2)]
    copy = index_sent(parts, directory / "analysis" / "sent", T0)
    received_writer = PartWriter(directory / "received", RECEIVED_FIELDS, prefix="receiver")
    chunks = [received[i : i + 3] for i in range(0, len(received), 3)]
    received_parts = [_written(received_writer, chunk) for chunk in chunks]
    assert copy.ranges is not None
    return copy, compact_received(received_parts, directory / "analysis" / "received", copy.ranges)


def _copies(tmp_path, sent=SENT, received=RECEIVED, suts=("x",)):
    return {sut: _records(tmp_path / sut, sent, received) for sut in suts}


def _context(tmp_path, starts=None, **kwargs) -> StepContext:
    starts = starts or {"x": T0}
    return StepContext(starts, dict.fromkeys(starts, S), str(tmp_path), **kwargs)


def _analysed(copies, context):
    """Every task run as the job runs them, and their aggregates on the driver."""
    planned = plan(copies)
    rows = pa.concat_tables(run(task, context) for task in planned)
    return from_steps(
        rows, context.start_ns, {(t.sut, s): t.top_k for t in planned for s in t.steps}
    )


def _events(copies, context) -> dict:
    """The per-event columns of the 2019 export, by the letter of each event."""
    table = pa.concat_tables(rule_events(task, context) for task in plan(copies))
    return {(r["sut"], NAMES[r["seq"]]): r for r in table.to_pylist()}


@pytest.fixture
def copies(tmp_path):
    return _copies(tmp_path / "records")


def test_plan_makes_a_task_per_step_and_one_for_deliveries_naming_none(copies):
    tasks = plan(copies)
    assert sorted(t.steps for t in tasks) == [(), (0,), (1,), (2,)]
    assert [t.rows for t in tasks] == sorted((t.rows for t in tasks), reverse=True)
    sizes = {t.steps: t.rows for t in tasks}
    assert sizes == {(0,): 2, (1,): 4 + 4, (2,): 2, (): 1}  # (1,) received a, b twice, d


def test_every_slice_keeps_the_top_values_its_steps_p9999_needs(tmp_path):
    """A step of 12 M events and one of 4 M, in slices of 1 M: each slice keeps its step's
    ceil(n x 1e-4) + TOP_MARGIN values (at least TOP_K), not the run's: every slice's list goes
    to the driver, and the run's count in each would grow with the square of its length."""
    slices = [key_of(1, i) for i in range(12)] + [key_of(2, i) for i in range(4)]
    ranges = SeqRanges.from_json(
        [[key, i * 10**6, (i + 1) * 10**6 - 1] for i, key in enumerate(slices)]
    )
    sent = Copy((Layout(tmp_path / "s", tuple(slices), (10**6,) * 16),), ranges)
    received = Copy((Layout(tmp_path / "r", tuple(slices), (10**6,) * 16),))
    tasks = plan({"s0": (sent, received)})
    assert {(t.steps, t.top_k) for t in tasks} == {((1,), 1_200 + TOP_MARGIN), ((2,), TOP_K)}


def test_outcomes(copies, tmp_path):
    rows = {name: r for (_, name), r in _events(copies, _context(tmp_path)).items()}
    assert sorted(rows) == ["a", "b", "c", "d", "e", "f"]  # warmup dropped
    assert [k for k, r in sorted(rows.items()) if r["lost"]] == ["c"]
    assert [k for k, r in sorted(rows.items()) if r["send_failure"]] == ["d", "e", "f"]
    assert rows["b"]["deliveries"] == 2 and rows["b"]["duplicates"] == 1
    assert rows["b"]["received_ns"] == T0 + 540 * MS  # first delivery wins
    assert rows["d"]["delivered"] and not rows["d"]["lost"]  # a failure is never "lost"


def test_latencies(copies, tmp_path):
    rows = {name: r for (_, name), r in _events(copies, _context(tmp_path)).items()}
    a, b, d, e, f = (rows[k] for k in "abdef")
    assert (a["publish_ms"], a["publish_corrected_ms"]) == (10.0, 11.0)
    assert (a["e2e_ms"], a["e2e_uncorrected_ms"], a["sender_lag_ms"]) == (20.0, 19.0, 1.0)
    assert (b["e2e_ms"], b["sender_lag_ms"]) == (40.0, 2.0)
    assert d["publish_ms"] is None and d["e2e_ms"] == 100.0  # refused: no publish latency
    assert e["publish_ms"] is None and e["e2e_ms"] is None and e["sender_lag_ms"] == 2.0
    assert f["sender_lag_ms"] is None


def test_foreign_counts_only_ids_never_sent(copies, tmp_path):
    counted = {t.steps: counted_events(t, _context(tmp_path))[1] for t in plan(copies)}
    # the warmup delivery matched its sent event in step 0's task: it is not foreign
    none, zz = NeverSent(), NeverSent(foreign=1)
    assert counted == {(0,): none, (1,): none, (2,): none, (): zz}


def test_the_runs_own_ids_never_sent_are_unrecorded_sends_not_foreign(tmp_path):
    """Deliveries of events whose sent rows died with the sender carry the run's own ids (issue
    51, item 9.5): past the last recorded slot (no slice), inside a slice's range (a flush lost
    mid-run), another worker's; another run's ids and ids of no sender's shape stay foreign."""
    extra = [("x-0-9", 800), ("x-0-9", 810), ("x-1-2", 820), ("x-0-77", 830)]
    extra += [("other-0-1", 840), ("x-0-x", 850)]
    received = [*RECEIVED, *(received_row(eid, ms) for eid, ms in extra)]
    copies = _copies(tmp_path, SENT, received)
    found = _analysed(copies, _context(tmp_path / "staging", own_ids={"x": own_ids(["x"])}))
    # x-0-9 (delivered twice, counted once), x-1-2, x-0-77 are the run's; zz, other-0-1,
    # x-0-x are not
    assert (found.foreign_counts, found.unrecorded_counts) == ({"x": 3}, {"x": 3})
    assert sum(t["delivered"] for t in found.totals["x"]) == 3  # a, b, d: as before
    unknown = _analysed(copies, _context(tmp_path / "unknown"))  # no tag known: all foreign
    assert (unknown.foreign_counts, unknown.unrecorded_counts) == ({"x": 6}, {"x": 0})


@pytest.mark.parametrize("meet", [by_id, by_slot])
def test_either_meeting_tells_the_runs_own_ids_from_foreign_ones(meet):
    received = [("r-0-5", 1), ("r-0-9", 2), ("r-0-9", 3), ("r-1-6", 4), ("q-0-6", 5), ("zz", 6)]
    sent, table = _met(["r-0-5", "r-0-6", "r-0-8"], [5, 6, 8], received)
    found = meet(sent, table, own_ids(["r"]))
    assert found is not None and found[1] == NeverSent(foreign=2, unrecorded=2)
    assert meet(sent, table)[1] == NeverSent(foreign=4)  # type: ignore[index]


def test_a_foreign_id_delivered_twice_counts_once(tmp_path):
    copies = _copies(tmp_path, received=[*RECEIVED, received_row("zz", 900)])
    assert _analysed(copies, _context(tmp_path)).foreign_counts == {"x": 1}


def test_an_id_carrying_a_steps_seq_under_another_prefix_is_foreign(tmp_path):
    copies = _copies(tmp_path, received=[*RECEIVED, received_row("other-0-1", 30)])
    found = _analysed(copies, _context(tmp_path))
    assert found.foreign_counts == {"x": 2}  # zz and other-0-1
    step1 = found.totals["x"][0]
    assert (step1["step"], step1["delivered"], step1["duplicates"]) == (1, 3, 1)


def test_per_second_series(copies, tmp_path):
    rows = {r["second"]: r for r in _analysed(copies, _context(tmp_path)).metrics["x"]}
    assert sorted(rows) == [0, 1, 2, 3]
    counts = ("scheduled", "sent", "acked", "delivered")
    assert tuple(rows[0][n] for n in counts) == (2, 2, 2, 2)
    assert (rows[1]["scheduled"], rows[1]["lost"], rows[1]["send_failures"]) == (2, 1, 1)
    assert rows[1]["delivered"] == 1  # d arrived at 1.6 s; b's duplicate is not a delivery
    assert rows[2]["scheduled"] == 0 and rows[2]["delivered"] == 0  # quiet second, kept
    assert rows[2]["step"] is None  # nothing was due in it
    assert (rows[3]["scheduled"], rows[3]["sent"], rows[3]["send_failures"]) == (2, 1, 2)
    assert (rows[3]["step"], rows[3]["target_rate_per_s"]) == (2, 2)
    assert rows[3]["t_ns"] == T0 + 3 * S


def test_step_digests_points_and_foreign(copies, tmp_path):
    staging = tmp_path / "staging"
    found = _analysed(copies, _context(staging))
    assert found.foreign_counts == {"x": 1}  # zz
    e2e = found.step_sketch[("x", "e2e", 1)]
    assert sorted(e2e[1]) == [20.0, 40.0, 100.0]  # a, b, d: every delivered event of step 1
    assert ("x", "e2e", 2) not in found.step_sketch  # nothing of step 2 arrived
    assert [p["second"] for p in found.e2e_points["x"]] == [0, 1]
    points = found.points["x"].to_pylist()  # one-second buckets: maxima per bucket
    assert [(p["events"], p["e2e_ms"]) for p in points] == [(2, 40.0), (2, 100.0), (2, None)]
    # the per-second digests were written where the tasks ran: none for the warmup step
    assert sorted(p.name for p in (staging / "digests" / "sut=x").iterdir()) == [
        "step-000001-000000.parquet",
        "step-000002-000000.parquet",
    ]


def test_step_totals(copies, tmp_path):
    rows = {r["step"]: r for r in _analysed(copies, _context(tmp_path)).totals["x"]}
    assert sorted(rows) == [1, 2]  # the warmup step is no step of the figures
    one, two = rows[1], rows[2]
    assert (one["scheduled"], one["acked"], one["lost"], one["duplicates"]) == (4, 3, 1, 1)
    assert (two["scheduled"], two["sent"], two["send_failures"]) == (2, 1, 2)
    assert (one["start_ns"], one["last_sent_ns"]) == (T0, T0 + 1500 * MS)
    assert two["first_received_ns"] is None and one["negative_e2e"] == 0


def test_the_exports_per_event_columns_add_up_to_the_step_totals(copies, tmp_path):
    # The export and the summary read one rule: its flags, summed, are the step's totals.
    context = _context(tmp_path)
    events = list(_events(copies, context).values())
    totals = {r["step"]: r for r in _analysed(copies, context).totals["x"]}
    for flag, total in (("lost", "lost"), ("delivered", "delivered"), ("ok", "acked")):
        by_step = {step: 0 for step in totals}
        for event in events:
            by_step[1 if event["seq"] <= 4 else 2] += event[flag]
        assert by_step == {s: t[total] for s, t in totals.items()}, flag
    assert sum(e["duplicates"] for e in events) == totals[1]["duplicates"] == 1


@pytest.mark.parametrize(
    ("trim_ns", "kept"),
    [(0, "abcdef"), (S, "cdef"), (S + 1, "def"), (4 * S, "")],
)
def test_trim_drops_the_leading_window(copies, tmp_path, trim_ns, kept):
    events = _events(copies, _context(tmp_path, trim_ns=trim_ns))
    assert "".join(sorted(name for _, name in events)) == kept


def test_trim_takes_events_out_of_the_totals(copies, tmp_path):
    found = _analysed(copies, _context(tmp_path, trim_ns=S))
    one = found.totals["x"][0]
    assert (one["scheduled"], one["lost"], one["duplicates"], one["start_ns"]) == (
        2,
        1,
        0,
        T0 + 1000 * MS,
    )


def test_a_system_whose_ids_carry_no_seq_gives_the_same_figures(copies, tmp_path):
    # Sent ids "w", "a", ... carry no slot: nothing routes, the system is one whole task.
    plain = {f"x-0-{seq}": name for seq, name in NAMES.items()}
    sent = [r._replace(event_id=plain[r.event_id]) for r in SENT]
    received = [r._replace(event_id=plain.get(r.event_id, r.event_id)) for r in RECEIVED]
    whole = _copies(tmp_path / "plain", sent, received)
    assert [t.steps for t in plan(whole)] == [(0, 1, 2)]
    routed = _analysed(copies, _context(tmp_path / "routed"))
    found = _analysed(whole, _context(tmp_path / "whole"))
    for name in ("metrics", "totals", "e2e_points", "foreign_counts"):
        assert getattr(found, name) == getattr(routed, name), name
    assert found.points["x"].equals(routed.points["x"])
    tops = {key: sorted(top) for key, (_, top) in routed.step_sketch.items()}
    assert {key: sorted(top) for key, (_, top) in found.step_sketch.items()} == tops


def test_suts_sharing_ids_stay_apart(tmp_path):
    # The same ids in two SUTs of one run never meet: y received nothing, so its three acked
    # events are lost, and its seconds count from its own start, a second before x's.
    copies = {
        **_copies(tmp_path, suts=("x",)),
        **_copies(tmp_path, received=[], suts=("y",)),
    }
    context = _context(tmp_path / "staging", {"x": T0, "y": T0 - S})
    lost = {"x": 0, "y": 0}
    for (sut, _), event in _events(copies, context).items():
        lost[sut] += event["lost"]
    assert lost == {"x": 1, "y": 3}
    found = _analysed(copies, context)
    firsts = {sut: min(r["second"] for r in rows) for sut, rows in found.metrics.items()}
    assert firsts == {"x": 0, "y": 1}
    assert {sut: sum(t["lost"] for t in rows) for sut, rows in found.totals.items()} == lost
    assert found.foreign_counts == {"x": 1, "y": 0}


def _offset(at_ns: int, offset_ns: int) -> OffsetEstimate:
    return OffsetEstimate(at_ns, offset_ns, bound_ns=10_000, exchanges=32, kept=8, min_delay_ns=1)


def _stamps(rows) -> pa.Table:
    """(worker, intended_ns, received_ns) rows."""
    workers, intended, received = zip(*rows, strict=True)
    return pa.table(
        {
            "worker": pa.array(workers, pa.int32()),
            "intended_ns": pa.array(intended, pa.int64()),
            "received_ns": pa.array(received, pa.int64()),
        }
    )


def test_received_stamps_move_onto_each_workers_clock():
    # Worker 0's receiver offset drifts from +1 ms to +3 ms over 1 s; worker 1's is a constant
    # -0.5 ms; worker 2 was not measured; an undelivered event stays undelivered.
    drifting = Correction(_offset(T0, 1 * MS), _offset(T0 + S, 3 * MS))
    constant = Correction(_offset(T0, -MS // 2))
    events = _stamps(
        [
            (0, T0, T0 + 1 * MS + 5 * MS),  # 5 ms late, offset +1 ms
            (0, T0 + S // 2, T0 + S // 2 + 2 * MS + 7 * MS),  # halfway: +2 ms
            (1, T0, T0 - MS // 2 + 4 * MS),
            (1, T0, None),
            (2, T0, T0 + 9 * MS),  # no correction measured: kept
        ]
    )
    got = on_sender_clock(events, {0: drifting, 1: constant}).to_pylist()
    intended = events.column("intended_ns").to_pylist()
    latency = [None if r is None else (r - i) / MS for r, i in zip(got, intended, strict=True)]
    assert latency == [5.0, 7.0, 4.0, None, 9.0]
    untouched = on_sender_clock(events, {})  # nothing measured: nothing moved
    assert untouched.equals(events.column("received_ns"))


@pytest.mark.parametrize(
    ("offset_at_end", "moved_by"),
    [(1, 1), (-1, -1), (3, 2), (-3, -2), (2, 1)],  # halfway: 0.5 -> 1, 1.5 -> 2, 1 -> 1
)
def test_the_offset_is_rounded_half_away_from_zero_to_whole_ns(offset_at_end, moved_by):
    # The offset drifts from 0 to `offset_at_end` ns over 2 ns; at 1 ns it is half of it. An odd
    # epoch stamp survives exactly (no double at epoch nanoseconds on the way).
    drift = Correction(_offset(T0, 0), _offset(T0 + 2, offset_at_end))
    received = T0 + 123_456_789
    got = on_sender_clock(_stamps([(0, T0 + 1, received)]), {0: drift})
    assert got.to_pylist() == [received - moved_by]


def test_tasks_apply_only_their_own_systems_corrections(copies, tmp_path):
    late = {0: Correction(_offset(T0, 5 * MS))}
    for corrections, e2e_a in (({"y": late}, 20.0), ({"x": late}, 15.0)):
        rows = _events(copies, _context(tmp_path, corrections=corrections))
        assert rows[("x", "a")]["e2e_ms"] == e2e_a


def _task(rows: int) -> StepTask:
    return StepTask("x", (rows,), (), (), rows)


@pytest.mark.parametrize(
    ("rows", "slots", "loads"),
    [
        ([], 2, [0]),
        ([7], 4, [7]),
        ([5, 4, 3, 3, 3], 1, [10, 8]),
        ([1, 2, 3, 4, 5, 6, 7, 8], 2, [9, 9, 9, 9]),
        ([9, 1, 1, 1], 2, [9, 1, 1, 1]),
        ([10, 10, 1, 1], 1, [11, 11]),
        ([3] * 10, 3, [6, 6, 6, 6, 3, 3]),
    ],
)
def test_binned_puts_every_task_in_one_bin_heaviest_first(rows, slots, loads):
    tasks = [_task(n) for n in rows]
    bins = binned(tasks, slots)
    held = [id(t) for b in bins for t in b]
    assert sorted(held) == sorted(id(t) for t in tasks) and len(set(held)) == len(tasks)
    assert len(bins) <= max(1, slots * 2)
    got = [sum(t.rows for t in b) for b in bins]
    assert got == sorted(got, reverse=True)
    assert sorted(got, reverse=True) == sorted(loads, reverse=True)


def test_a_task_of_no_step_reads_only_deliveries_naming_none(copies):
    nowhere = next(t for t in plan(copies) if not t.steps)
    _, received = copies["x"]
    assert nowhere.sent == ()
    chunks = {str(chunk.path): chunk for chunk in received.chunks}
    read = {chunks[path].keys[i] for path, groups in nowhere.received for i in groups}
    assert read == {NO_ROUTE}


def _met(sent_ids, seqs, received):
    sent = pa.table({"event_id": sent_ids, "seq": pa.array(seqs, pa.int64())})
    ids = [eid for eid, _ in received]
    table = pa.table(
        {
            "event_id": pa.array(ids, pa.string()),
            "received_ns": pa.array([ns for _, ns in received], pa.int64()),
            "id_seq": pa.array(id_seqs(pa.array(ids, pa.string())), pa.int64()),
        }
    )
    return sent, table


@pytest.mark.parametrize(
    "received",
    [
        [],
        [("r-0-5", 30), ("r-0-5", 10), ("r-0-6", 7)],  # a duplicate: its first is the least
        [("q-0-5", 1), ("q-0-5", 2), ("r-0-9", 3), ("zz", 4)],  # prefix, past the slice, none
        [("r-0-7", 1), ("r-0-3", 2), ("r-0-8", 5), ("r-0-4", 9)],  # below the slice's range
    ],
)
def test_meeting_by_slot_equals_the_join_of_ids(received):
    sent, table = _met(["r-0-5", "r-0-6", "r-0-8"], [5, 6, 8], received)
    found = by_slot(sent, table)
    assert found is not None
    expected = by_id(sent, table)
    order = ["event_id", "seq", "received_ns", "deliveries"]
    assert found[0].select(order).sort_by("seq").to_pylist() == (
        expected[0].select(order).sort_by("seq").to_pylist()
    )
    assert found[1] == expected[1]


def test_two_sent_events_on_one_slot_are_met_by_the_join():
    sent, table = _met(["r-0-5", "s-0-5"], [5, 5], [("r-0-5", 1)])
    assert by_slot(sent, table) is None
