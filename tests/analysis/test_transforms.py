"""Transforms on a tiny hand-written run where every figure is known."""

import numpy as np
import pytest

from analysis.job import from_steps
from analysis.load import with_run_columns
from analysis.schemas import spark_schema
from analysis.steprule import latencies, outcomes
from analysis.steps import StepContext
from analysis.transforms import (
    counted,
    first_deliveries,
    foreign_deliveries,
    join_deliveries,
    measured,
    on_sender_clock,
    sent_events,
    step_inputs,
    step_stats,
    trimmed,
    with_rule_columns,
)
from contract.clocks import Correction, OffsetEstimate
from contract.records import RECEIVED_FIELDS, SENT_FIELDS

S = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * S  # schedule start


def sent_row(
    eid, seq, step, intended_ms, sent_ms, ack_ms, status, warmup=False, rate=2, decoy=False
):
    def at(ms):
        return None if ms is None else T0 + ms * MS

    error = None if 200 <= status < 300 else "boom"
    return (
        eid,
        seq,
        step,
        warmup,
        decoy,
        rate,
        at(intended_ms),
        at(sent_ms),
        at(ack_ms),
        status,
        error,
        0,
        8192,
    )


SENT = [
    sent_row("w", 0, 0, -2000, -2000, -1990, 202, warmup=True),
    sent_row("a", 1, 1, 0, 1, 11, 202),  # delivered once
    sent_row("b", 2, 1, 500, 502, 520, 202),  # delivered twice
    sent_row("c", 3, 1, 1000, 1001, 1005, 202),  # acked, never received: lost
    sent_row("d", 4, 1, 1500, 1500, 1530, 503),  # refused, delivered anyway
    sent_row("e", 5, 2, 3000, 3002, None, 0),  # transport error
    sent_row("f", 6, 2, 3500, None, None, 0),  # never sent (in-flight cap)
]
RECEIVED = [
    ("w", T0 - 1985 * MS, "rx", 8192, "w", "t", "s"),
    ("a", T0 + 20 * MS, "rx", 8192, "a", "t", "s"),
    ("b", T0 + 540 * MS, "rx", 8192, "b", "t", "s"),
    ("b", T0 + 2100 * MS, "rx", 8192, "b", "t", "s"),  # duplicate, later
    ("d", T0 + 1600 * MS, "rx", 8192, "d", "t", "s"),
    ("zz", T0 + 700 * MS, "rx", 10, "zz", "t", "s"),  # foreign
]


@pytest.fixture(scope="module")
def frames(spark):
    sent = with_run_columns(spark.createDataFrame(SENT, spark_schema(SENT_FIELDS)), "x", T0)
    received = with_run_columns(
        spark.createDataFrame(RECEIVED, spark_schema(RECEIVED_FIELDS)), "x", T0
    )
    joined = join_deliveries(sent, first_deliveries(received))
    events = with_rule_columns(measured(sent_events(joined)), ("sut", "event_id"))
    return sent, joined, events


def _by_id(df):
    return {row["event_id"]: row.asDict() for row in df.collect()}


def test_outcomes(frames):
    _, _, events = frames
    rows = _by_id(events)
    assert sorted(rows) == ["a", "b", "c", "d", "e", "f"]  # warmup dropped
    assert [k for k, r in sorted(rows.items()) if r["lost"]] == ["c"]
    assert [k for k, r in sorted(rows.items()) if r["send_failure"]] == ["d", "e", "f"]
    assert rows["b"]["deliveries"] == 2 and rows["b"]["duplicates"] == 1
    assert rows["b"]["received_ns"] == T0 + 540 * MS  # first delivery wins
    assert rows["d"]["delivered"] and not rows["d"]["lost"]  # a failure is never "lost"


def test_latencies(frames):
    _, _, events = frames
    rows = _by_id(events)
    a, b, d, e, f = rows["a"], rows["b"], rows["d"], rows["e"], rows["f"]
    assert (a["publish_ms"], a["publish_corrected_ms"]) == (10.0, 11.0)
    assert (a["e2e_ms"], a["e2e_uncorrected_ms"], a["sender_lag_ms"]) == (20.0, 19.0, 1.0)
    assert (b["e2e_ms"], b["sender_lag_ms"]) == (40.0, 2.0)
    assert d["publish_ms"] is None and d["e2e_ms"] == 100.0  # refused: no publish latency
    assert e["publish_ms"] is None and e["e2e_ms"] is None and e["sender_lag_ms"] == 2.0
    assert f["sender_lag_ms"] is None


def test_foreign_counts_only_ids_never_sent(frames):
    _, joined, _ = frames
    # the warmup delivery "w" matched its sent row: it is not foreign
    rows = foreign_deliveries(joined).collect()
    assert [(r["event_id"], r["deliveries"]) for r in rows] == [("zz", 1)]


def _stepped(joined, tmp_path, start_ns=None, trim_s=0.0):
    """The step stage over joined rows, as the job runs it, and its aggregates on the driver."""
    starts = start_ns or {"x": T0}
    context = StepContext(starts, dict.fromkeys(starts, S), str(tmp_path))
    rows = on_sender_clock(counted(joined, trim_s), {})
    return from_steps(step_stats(step_inputs(rows), context).toArrow(), starts)


def test_per_second_series(frames, tmp_path):
    _, joined, _ = frames
    rows = {r["second"]: r for r in _stepped(joined, tmp_path).metrics["x"]}
    assert sorted(rows) == [0, 1, 2, 3]
    assert (rows[0]["scheduled"], rows[0]["sent"], rows[0]["acked"], rows[0]["delivered"]) == (
        2,
        2,
        2,
        2,
    )
    assert (rows[1]["scheduled"], rows[1]["lost"], rows[1]["send_failures"]) == (2, 1, 1)
    assert rows[1]["delivered"] == 1  # d arrived at 1.6 s; b's duplicate is not a delivery
    assert rows[2]["scheduled"] == 0 and rows[2]["delivered"] == 0  # quiet second, kept
    assert rows[2]["step"] is None  # nothing was due in it
    assert (rows[3]["scheduled"], rows[3]["sent"], rows[3]["send_failures"]) == (2, 1, 2)
    assert (rows[3]["step"], rows[3]["target_rate_per_s"]) == (2, 2)
    assert rows[3]["t_ns"] == T0 + 3 * S


def test_step_stage_digests_points_and_foreign(frames, tmp_path):
    _, joined, _ = frames
    found = _stepped(joined, tmp_path)
    assert found.foreign_counts == {"x": 1}  # zz
    e2e = found.step_sketch[("x", "e2e", 1)]
    assert sorted(e2e[1]) == [20.0, 40.0, 100.0]  # a, b, d: every delivered event of step 1
    assert ("x", "e2e", 2) not in found.step_sketch  # nothing of step 2 arrived
    assert [p["second"] for p in found.e2e_points["x"]] == [0, 1]
    points = found.points["x"].to_pylist()  # one-second buckets: maxima per bucket
    assert [(p["events"], p["e2e_ms"]) for p in points] == [(2, 40.0), (2, 100.0), (2, None)]
    # the per-second digests were written where the stage ran
    assert sorted(p.name for p in (tmp_path / "digests" / "sut=x").iterdir()) == [
        "step-000001.parquet",
        "step-000002.parquet",
    ]


def test_the_exports_per_event_columns_are_the_step_rules(frames):
    # The step stage and the 2019 export both apply analysis.steprule (the export through
    # mapInArrow): the same outcomes and latencies, event for event.
    _, joined, events = frames
    rows = counted(joined, 0).where("is_sent").orderBy("event_id").cache()
    table = step_inputs(rows).toArrow()
    flags, latency = outcomes(table), latencies(table, outcomes(table)["ok"])
    by_id = _by_id(events)
    ids = [r["event_id"] for r in rows.select("event_id").collect()]
    for i, eid in enumerate(ids):
        sql = by_id[eid]
        for name, values in flags.items():
            assert values[i] == sql[name], (eid, name)
        for name, values in latency.items():
            assert values[i].as_py() == sql[name], (eid, name)
    assert np.asarray(flags["lost"]).sum() == 1


def test_step_totals(frames, tmp_path):
    _, joined, _ = frames
    rows = {r["step"]: r for r in _stepped(joined, tmp_path).totals["x"]}
    assert (rows[1]["scheduled"], rows[1]["acked"], rows[1]["lost"], rows[1]["duplicates"]) == (
        4,
        3,
        1,
        1,
    )
    assert (rows[2]["scheduled"], rows[2]["sent"], rows[2]["send_failures"]) == (2, 1, 2)
    assert (rows[1]["start_ns"], rows[1]["last_sent_ns"]) == (T0, T0 + 1500 * MS)
    assert rows[2]["first_received_ns"] is None and rows[1]["negative_e2e"] == 0


def test_trim_drops_the_leading_window(frames):
    sent, _, _ = frames
    kept = [r["event_id"] for r in trimmed(measured(sent), 1.0).collect()]
    assert sorted(kept) == ["c", "d", "e", "f"]
    assert trimmed(sent, 0).count() == len(SENT)


def test_suts_sharing_ids_stay_apart(spark, tmp_path):
    # the same event ids in two SUTs of one run must never meet in the join
    sent = spark.createDataFrame(SENT, spark_schema(SENT_FIELDS))
    received = spark.createDataFrame(RECEIVED, spark_schema(RECEIVED_FIELDS))
    both_sent = with_run_columns(sent, "x", T0).unionByName(with_run_columns(sent, "y", T0 + S))
    only_x = with_run_columns(received, "x", T0)
    joined = join_deliveries(both_sent, first_deliveries(only_x))
    events = with_rule_columns(measured(sent_events(joined)), ("sut",))
    lost = {
        r["sut"]: r["n"]
        for r in events.where("lost")
        .groupBy("sut")
        .count()
        .withColumnRenamed("count", "n")
        .collect()
    }
    assert lost == {"x": 1, "y": 3}  # y received nothing: its three acked events are lost
    found = _stepped(joined, tmp_path, {"x": T0, "y": T0 + S})
    firsts = {sut: min(r["second"] for r in rows) for sut, rows in found.metrics.items()}
    assert firsts == {"x": 0, "y": -1}  # seconds count from each SUT's own start
    assert {sut: sum(t["lost"] for t in rows) for sut, rows in found.totals.items()} == lost


def test_received_stamps_move_onto_each_workers_clock(spark):
    # Two workers: worker 0's receiver offset drifts from +1 ms to +3 ms over 1 s; worker 1's
    # is a constant -0.5 ms; a foreign delivery (no worker) and an undelivered event stay.
    drifting = Correction(_offset(T0, 1 * MS), _offset(T0 + S, 3 * MS))
    constant = Correction(_offset(T0, -MS // 2))
    rows = [
        ("s0", 0, T0, T0 + 1 * MS + 5 * MS),  # 5 ms late, offset +1 ms
        ("s0", 0, T0 + S // 2, T0 + S // 2 + 2 * MS + 7 * MS),  # halfway: +2 ms
        ("s0", 1, T0, T0 - MS // 2 + 4 * MS),
        ("s0", 1, T0, None),
        ("s1", 0, T0, T0 + 9 * MS),  # another SUT's worker 0: not corrected
    ]
    events = spark.createDataFrame(
        rows, "sut string, worker int, intended_ns long, received_ns long"
    )
    got = on_sender_clock(events, {("s0", 0): drifting, ("s0", 1): constant})
    latency = [
        None if r["received_ns"] is None else (r["received_ns"] - r["intended_ns"]) / MS
        for r in got.orderBy("sut", "worker", "intended_ns", "received_ns").collect()
    ]
    assert latency == [5.0, 7.0, None, 4.0, 9.0]
    assert on_sender_clock(events, {}) is events  # nothing measured: nothing touched


def _offset(at_ns: int, offset_ns: int) -> OffsetEstimate:
    return OffsetEstimate(at_ns, offset_ns, bound_ns=10_000, exchanges=32, kept=8, min_delay_ns=1)
