"""The fleet master's tally: workers' lines in, the fleet's lines (of the types one sender
prints) out. Pure."""

import pytest

from contract.documents import problems
from contract.senderlines import SenderDone, SenderProgress, SenderStart, StepEnd, parse_sender_line
from loadgen.fleet.tally import Tally, merged_done

RATE = 1000


def start(index, max_inflight=100):
    return {
        "event": "start",
        "pid": 100 + index,
        "start_ns": 5_000,
        "run_tag": "abc",
        "pace": "p",
        "spec": "1000:2",
        "max_inflight": max_inflight,
        "steps": [
            {
                "number": 1,
                "rate_per_s": RATE,
                "duration_s": 2,
                "warmup": False,
                "start_offset_ns": 0,
                "first_seq": 0,
            }
        ],
    }


def step(index, sent, achieved, lag_p99, workers=2, number=1):
    return {
        "step": number,
        "warmup": False,
        "target_rate_per_s": RATE,
        "duration_s": 2,
        "worker_target_rate_per_s": RATE / workers,
        "scheduled": sent,
        "sent": sent,
        "ok": sent - 1,
        "failures": 1,
        "inflight_cap_refused": 0,
        "achieved_send_rate_per_s": achieved,
        "lag_p50_ms": lag_p99 / 10,
        "lag_p99_ms": lag_p99,
        "lag_max_ms": lag_p99 * 2,
        "wake_jitter_p99_ms": 0.1,
        "wake_jitter_max_ms": 0.2,
        "gc_ms": 1.0 + index,
        "gc_collected": 3,
    }


def step_end(index, sent, achieved, lag_p99, **kw):
    return {
        "event": "step_end",
        **step(index, sent, achieved, lag_p99, **kw),
        "connections_open": 4,
        "connect_ms_p99": 0.5 + index,
        "inflight_at_step_end": 2,
    }


def done(index, steps, interrupted=False):
    return {
        "event": "done",
        "start_ns": 5_000,
        "worker": index,
        "workers": 2,
        "interrupted": interrupted,
        "stop_reason": "SIGINT" if interrupted else None,
        "steps": steps,
        "sent": sum(s["sent"] for s in steps),
        "ok": sum(s["ok"] for s in steps),
        "failures": sum(s["failures"] for s in steps),
        "inflight_cap_refused": 0,
        "unanswered_at_end": 0,
        "timed_out": 0,
        "precise_timer": True,
        "connections_open": 4,
        "rows_written": sum(s["sent"] for s in steps),
        "parts_written": 1,
        "flush_errors": 0,
        "run_tag": "abc",
        "wall_s": 3.0 + index,
    }


def feed(tally, lines):
    out = []
    for index, doc in lines:
        line = parse_sender_line(doc)
        assert line is not None
        out += tally.line(index, line)
    return out


def test_two_workers_make_one_senders_lines():
    tally = Tally(workers=2, pid=7)
    out = feed(tally, [(0, start(0))])
    assert out == []  # the fleet starts when every worker has
    (fleet_start,) = feed(tally, [(1, start(1))])
    assert problems(fleet_start, SenderStart) == []
    assert (fleet_start["pid"], fleet_start["max_inflight"], fleet_start["workers"]) == (7, 200, 2)

    step_start = {
        "event": "step_start",
        "step": 1,
        "warmup": False,
        "target_rate_per_s": RATE,
        "duration_s": 2,
        "start_ns": 5_000,
    }
    assert feed(tally, [(0, step_start), (1, step_start)]) == [step_start]  # once

    assert feed(tally, [(0, step_end(0, 1000, 990.0, 0.4))]) == []
    (end,) = feed(tally, [(1, step_end(1, 1000, 970.0, 0.9))])
    assert problems(end, StepEnd) == []
    assert (end["sent"], end["ok"], end["failures"]) == (2000, 1998, 2)
    assert end["achieved_send_rate_per_s"] == pytest.approx(980.0)  # the mean of the shares
    assert (end["lag_p99_ms"], end["lag_max_ms"]) == (0.9, 1.8)  # the slowest worker's
    assert (end["connections_open"], end["connect_ms_p99"]) == (8, 1.5)
    assert end["workers_reported"] == 2 and end["failed_workers"] == {}

    steps0, steps1 = [step(0, 1000, 990.0, 0.4)], [step(1, 1000, 970.0, 0.9)]
    assert feed(tally, [(0, done(0, steps0))]) == []
    (fleet_done,) = feed(tally, [(1, done(1, steps1))])
    assert problems(fleet_done, SenderDone) == []
    assert (fleet_done["sent"], fleet_done["rows_written"], fleet_done["wall_s"]) == (
        2000,
        2000,
        4.0,
    )
    assert fleet_done["interrupted"] is False and fleet_done["stop_reason"] is None
    assert [s["sent"] for s in fleet_done["steps"]] == [2000]
    assert tally.finished


def test_a_failed_worker_is_marked_and_never_waited_for():
    tally = Tally(workers=2, pid=7)
    feed(tally, [(0, start(0)), (1, start(1)), (0, step_end(0, 1000, 1000.0, 0.3))])
    warning, end = tally.fail(1, "its pacer exited with -9")
    assert warning == {"event": "warning", "message": "worker 1 failed: its pacer exited with -9"}
    # the step ends with one worker's half of the pace: the rate shows the loss
    assert end["event"] == "step_end" and end["sent"] == 1000
    assert end["achieved_send_rate_per_s"] == pytest.approx(500.0)
    assert end["failed_workers"] == {"1": "its pacer exited with -9"}
    (fleet_done,) = feed(tally, [(0, done(0, [step(0, 1000, 1000.0, 0.3)]))])
    assert fleet_done["interrupted"] is True
    assert "worker(s) failed: 1: its pacer exited with -9" in fleet_done["stop_reason"]
    assert feed(tally, [(1, done(1, []))]) == []  # late lines of a failed worker change nothing
    assert tally.fail(1, "again") == []


def test_every_worker_failing_still_ends_the_fleet():
    tally = Tally(workers=2, pid=7)
    tally.fail(0, "missing")
    _, fleet_done = tally.fail(1, "missing")
    assert problems(fleet_done, SenderDone) == []
    assert fleet_done["start_ns"] is None  # nothing was ever announced
    assert fleet_done["interrupted"] and fleet_done["sent"] == 0 and tally.finished


def test_progress_sums_windows_and_names_the_slowest_worker():
    tally = Tally(workers=2, pid=7)
    assert tally.progress_line() is None
    for index, lag in ((0, 0.2), (1, 3.5)):
        tally.line(
            index,
            {
                "event": "progress",
                "step": 1,
                "target_rate_per_s": RATE,
                "window_sent": 1000 - 100 * index,
                "lag_p99_ms": lag,
                "sent": 500,
                "ok": 500,
                "failures": 0,
                "inflight": 3,
                "inflight_cap_refused": 0,
                "rows_written": 400,
            },
        )
    line = tally.progress_line()
    assert problems(line, SenderProgress) == []
    assert (line["window_sent"], line["lag_p99_ms"], line["slowest_worker"]) == (950, 3.5, 1)
    assert (line["sent"], line["inflight"], line["rows_written"]) == (1000, 6, 800)


def test_worker_warnings_are_named():
    tally = Tally(workers=2, pid=7)
    assert tally.line(1, {"event": "warning", "message": "disk full"}) == [
        {"event": "warning", "message": "worker 1: disk full"}
    ]


def test_workers_done_lines_alone_merge_into_the_fleets():
    clock = {"url": "u", "before": None, "after": None, "errors": ["before: refused"]}
    # as `_sender-w0.json` holds it: the done line, plus the host and argv for collect
    done0 = {**done(0, [step(0, 1000, 990.0, 0.4)]), "clock": clock, "host": "a", "argv": ["x"]}
    merged = merged_done([done0, done(1, [step(1, 1000, 970.0, 0.9)])])
    assert problems(merged, SenderDone) == []
    assert (merged["sent"], merged["failed_workers"], merged["clocks"]) == (
        2000,
        {},
        {"0": clock},
    )
    (only,) = merged["steps"]
    assert only["achieved_send_rate_per_s"] == pytest.approx(980.0) and only["lag_p99_ms"] == 0.9
    assert "host" not in merged and "argv" not in merged
    lost = merged_done([done(1, [step(1, 1000, 970.0, 0.9)])])  # worker 0's was not collected
    assert lost["failed_workers"] == {"0": "its summary was not collected"} and lost["interrupted"]
