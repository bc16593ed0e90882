"""Fan-out accounting (analysis.fanout, analysis.fanout_summary): each event expected once at
every subscriber that takes it; the system judged on each event's completion, every subscriber
on its own deliveries. A hand-written table first, then a crafted run through Spark."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.fanout import (
    deliveries_at,
    doubled_subscribers,
    fanned,
    received_at,
    subscriber_view,
)
from analysis.job import AnalyzeOptions, analyze
from analysis.steprule import outcomes
from analysis.tasks import id_rows, slot_rows
from analysis.unrecorded import NeverSent
from contract.records import RECEIVED_FIELDS, SENT_FIELDS, ReceivedRow, SentRow
from runtime.parquet import PartWriter, arrow_schema

S, MS = 1_000_000_000, 1_000_000
T0 = 1_760_000_000 * S
FANOUT = (("/s1", True), ("/s2", True), ("/s3", False))


def _sent(seq: int, decoy: bool = False, step: int = 1, rate: int = 100) -> SentRow:
    t = T0 + seq * 10 * MS
    return SentRow(f"x-0-{seq}", seq, step, False, decoy, rate, t, t, t + MS, 202, None, 0, 64)


def _got(seq: int, at_ms: int, path: str | None) -> ReceivedRow:
    eid = f"x-0-{seq}" if seq >= 0 else "zz"
    return ReceivedRow(eid, T0 + at_ms * MS, "rx", 64, eid, "t", "s", path)


SENT = [_sent(0), _sent(1), _sent(2), _sent(3, decoy=True)]
RECEIVED = [
    _got(0, 10, "/s1"), _got(0, 30, "/s2"), _got(0, 4, "/elsewhere"),  # complete at 30
    _got(1, 5, "/s1"), _got(1, 7, "/s1"), _got(1, 6, "/s2"), _got(1, 8, "/s3"),  # at 6, a dup
    _got(2, 9, "/s1"),  # never at /s2: lost
    _got(3, 11, "/s3"),  # a decoy, leaked where it arrived
    _got(-1, 12, "/s1"),  # foreign
]  # fmt: skip
# Per event: completion (ms or None), deliveries, and (first ms or None, count) per subscriber.
EXPECTED = {
    0: (30, 1, [(10, 1), (30, 1), (None, 0)]),
    1: (6, 2, [(5, 2), (6, 1), (8, 1)]),
    2: (None, 1, [(9, 1), (None, 0), (None, 0)]),
    3: (11, 1, [(None, 0), (None, 0), (11, 1)]),
}


def _tables() -> tuple[pa.Table, pa.Table]:
    sent = pa.Table.from_pylist([r._asdict() for r in SENT], arrow_schema(SENT_FIELDS))
    received = pa.Table.from_pylist([r._asdict() for r in RECEIVED], arrow_schema(RECEIVED_FIELDS))
    seqs = [int(r.event_id.rsplit("-", 1)[1]) if r.event_id != "zz" else -1 for r in RECEIVED]
    return sent, received.append_column("id_seq", pa.array(seqs, pa.int64()))


def _ms(value: int | None) -> int | None:
    return None if value is None else (value - T0) // MS


@pytest.mark.parametrize("meet", ["slots", "ids"])
def test_each_event_is_complete_when_every_subscriber_that_takes_it_has_it(meet):
    sent, received = _tables()
    rows = slot_rows(sent, received) if meet == "slots" else id_rows(sent, received)
    events, foreign, strays = fanned(sent, received, rows, FANOUT)
    assert (foreign, strays) == (NeverSent(foreign=1), 1)  # zz; x-0-0 at /elsewhere
    for seq, (complete_ms, deliveries, theirs) in EXPECTED.items():
        row = events.slice(seq, 1).to_pylist()[0]
        assert (_ms(row["received_ns"]), row["deliveries"]) == (complete_ms, deliveries), seq
        for number, (first_ms, count) in enumerate(theirs, start=1):
            got = (_ms(row[received_at(number)]), row[deliveries_at(number)])
            assert got == (first_ms, count), (seq, number)
    found = outcomes(events)
    assert found["lost"].tolist() == [False, False, True, False]
    assert found["duplicates"].tolist() == [0, 1, 0, 0]
    assert found["leaked"].tolist() == [False, False, False, True]


@pytest.mark.parametrize(
    "number, takes, lost, leaked, filtered",
    [
        (1, True, [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]),
        (2, True, [0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 1]),
        # Takes none: every event a decoy there, none lost, each delivery a leak.
        (3, False, [0, 0, 0, 0], [0, 1, 0, 1], [1, 0, 1, 0]),
    ],
)
def test_each_subscriber_is_judged_on_its_own_deliveries(number, takes, lost, leaked, filtered):
    sent, received = _tables()
    events, _, _ = fanned(sent, received, slot_rows(sent, received), FANOUT)
    found = outcomes(subscriber_view(events, number, takes))
    assert found["lost"].astype(int).tolist() == lost
    assert found["leaked"].astype(int).tolist() == leaked
    assert found["filtered"].astype(int).tolist() == filtered


# A crafted run through Spark: two steps at 200/s and 400/s, 10 s each, three subscribers, the
# third taking nothing. In step 2 subscriber 2 loses every 10th event; subscriber 3 once leaks.
STEPS = [(200, 10), (400, 10)]


def _craft(root: Path, second: str = "/subscriber-2") -> Path:
    sut = root / "fan-x-p" / "channel-imc"
    sent_w, recv_w = (
        PartWriter(sut / "sent", SENT_FIELDS),
        PartWriter(sut / "received", RECEIVED_FIELDS),
    )
    seq, offset = 0, 0
    for number, (rate, seconds) in enumerate(STEPS, start=1):
        for i in range(rate * seconds):
            t = T0 + offset + i * S // rate
            eid = f"x-0-{seq}"
            sent_w.append(
                SentRow(eid, seq, number, False, False, rate, t, t, t + MS, 202, None, 0, 64)
            )
            recv_w.append(ReceivedRow(eid, t + 3 * MS, "rx", 64, eid, "t", "s", "/subscriber-1"))
            if not (number == 2 and i % 10 == 0):
                recv_w.append(ReceivedRow(eid, t + 5 * MS, "rx", 64, eid, "t", "s", second))
            if number == 2 and i == 7:
                recv_w.append(
                    ReceivedRow(eid, t + 4 * MS, "rx", 64, eid, "t", "s", "/subscriber-3")
                )
            seq += 1
        offset += (seconds + 1) * S
    sent_w.flush()
    recv_w.flush()
    paths = ["/subscriber-1", "/subscriber-2", "/subscriber-3"]
    subscribers = [
        {"path": p, "url": f"http://r{p}", "matches": n < 3} for n, p in enumerate(paths, start=1)
    ]
    run = {
        "run_id": "fan-x",
        "sut": "channel-imc",
        "status": "completed",
        "pace": {"name": "p", "steps": [{"rate_per_s": r, "duration_s": d} for r, d in STEPS]},
        "schedule": {"start_ns": T0},
        "sut_settings": {"topology": "t", "subscribers": subscribers},
    }
    (sut / "run.json").write_text(json.dumps(run))
    return sut


def test_a_run_that_fans_out_is_judged_by_every_subscriber(spark, tmp_path):
    (doc,) = analyze(spark, [_craft(tmp_path)], AnalyzeOptions())
    lost = STEPS[1][0] * STEPS[1][1] // 10
    events = sum(r * d for r, d in STEPS)
    assert doc["counts"]["lost"] == lost and doc["counts"]["duplicates"] == 0
    assert [s["verdict"] for s in doc["steps"]] == ["holds", "breaks"]
    # The system's e2e is to the slowest subscriber: 5 ms (subscriber 2), never subscriber 1's 3.
    assert doc["steps"][0]["p99_e2e_ms"] == pytest.approx(5.0, abs=0.01)
    one, two, three = doc["subscribers"]
    assert [s["path"] for s in (one, two, three)] == [
        "/subscriber-1",
        "/subscriber-2",
        "/subscriber-3",
    ]
    assert one["counts"] == {
        "delivered": events,
        "lost": 0,
        "duplicates": 0,
        "filtered": 0,
        "leaked": 0,
    }
    assert [s["verdict"] for s in one["steps"]] == ["holds", "holds"]
    assert one["e2e_ms"]["p99"] == pytest.approx(3.0, abs=0.01) and one["e2e_ms"]["n"] == events
    assert two["counts"]["lost"] == lost and two["counts"]["delivered"] == events - lost
    assert [s["verdict"] for s in two["steps"]] == ["holds", "breaks"]
    assert any("lost" in reason for reason in two["steps"][1]["reasons"])
    # The third takes nothing: every event filtered there, the one it got a leak, none lost.
    assert three["matches"] is False
    assert [s["verdict"] for s in three["steps"]] == ["holds", "holds"]  # owed nothing
    assert three["counts"] == {
        "delivered": 0,
        "lost": 0,
        "duplicates": 0,
        "filtered": events - 1,
        "leaked": 1,
    }


def test_a_run_of_one_subscriber_recorded_before_fan_out_reads_as_before(spark, tmp_path):
    """Received parts without the `subscriber` column (a run recorded before fan-out) give the
    summary the same parts with the column give."""
    sut = _craft(tmp_path)
    run = json.loads((sut / "run.json").read_text())
    del run["sut_settings"]["subscribers"]  # one subscriber: every delivery counts for it
    (sut / "run.json").write_text(json.dumps(run))
    (with_column,) = analyze(spark, [sut], AnalyzeOptions())
    for part in (sut / "received").glob("*.parquet"):
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["subscriber"]), part)
    (without,) = analyze(spark, [sut], AnalyzeOptions())
    assert without == with_column
    # Fan-out's deliveries at a system of one are duplicates, as they always were.
    assert without["counts"]["duplicates"] > 0 and "subscribers" not in without
    assert np.isfinite(without["latency_ms"]["e2e"]["p99"])


def test_a_subscription_wired_to_the_wrong_path_is_named_not_judged(spark, tmp_path):
    """Subscriber 2's subscription points at a path the run never gave out: its deliveries
    arrive, to no subscriber. A wiring mistake, said as one; no breaking point from it."""
    (doc,) = analyze(spark, [_craft(tmp_path, second="/subscriber-9")], AnalyzeOptions())
    (failure,) = doc["instrument_failures"]
    assert failure.startswith("nothing came to /subscriber-2 although 5600 deliveries came to")
    assert doc["breaking_point_per_s"] is None
    assert doc["subscribers"][1]["counts"]["delivered"] == 0


def _got(delivered: int, duplicates: int) -> list[dict[str, int]]:
    return [{"delivered": delivered, "duplicates": duplicates}]


TWO = (("/subscriber-1", True), ("/subscriber-2", True))


@pytest.mark.parametrize(
    ("fanout", "totals", "doubled"),
    [
        (TWO, {1: _got(500, 500), 2: _got(0, 0)}, (("/subscriber-1", 2.0),)),
        # nearly: one subscription lost an event in twenty (1.95), or in ten (1.9)
        (TWO, {1: _got(1000, 950), 2: _got(0, 0)}, (("/subscriber-1", 1.95),)),
        (TWO, {1: _got(1000, 900)}, (("/subscriber-1", 1.9),)),
        (TWO, {1: _got(1000, 899)}, ()),
        (TWO, {1: _got(300, 600)}, (("/subscriber-1", 3.0),)),  # three subscriptions on one
        # summed over the steps
        (TWO, {1: _got(100, 100) + _got(100, 100), 2: _got(0, 0)}, (("/subscriber-1", 2.0),)),
        (TWO, {1: _got(500, 20), 2: _got(500, 0)}, ()),  # a retry now and then
        (TWO, {}, ()),  # nothing delivered anywhere
        # a subscriber that takes none of the run's events is left out
        ((("/subscriber-1", False),), {1: _got(500, 500)}, ()),
    ],
    ids=[
        "twice",
        "nearly twice",
        "the bound",
        "below it",
        "three times",
        "over steps",
        "retries",
        "nothing",
        "takes nothing",
    ],
)
def test_a_subscriber_that_got_each_event_twice_is_doubled(fanout, totals, doubled):
    assert doubled_subscribers(fanout, totals) == doubled


def test_two_subscriptions_on_one_path_are_named_as_wiring_not_judged(spark, tmp_path):
    """Subscriber 2's subscription delivers to subscriber 1's path: subscriber 1 gets each
    event twice (but every 10th in step 2), subscriber 2 nothing. Not 6000 lost and 5600
    duplicates of the system's: a wiring mistake, said as one; no breaking point from it."""
    (doc,) = analyze(spark, [_craft(tmp_path, second="/subscriber-1")], AnalyzeOptions())
    (failure,) = doc["instrument_failures"]
    assert failure.startswith(
        "nothing came to /subscriber-2 while /subscriber-1 got each event 1.93 times: "
        "subscriptions wired to one subscriber's path"
    ), failure
    assert doc["breaking_point_per_s"] is None
    assert [s["verdict"] for s in doc["steps"]] == ["instrument-failed"] * 2, doc["steps"]
