import pytest

from contract.errors import EvbenchError
from contract.receiverlines import ReceiverStats
from evbench.health import (
    grace_verdict,
    receiver_failure,
    receiver_limits,
    receiver_trouble,
    sender_failure,
)
from evbench.options import RunOptions
from evbench.progress import progress_line, step_line
from evbench.runner import run_matrix
from loadgen.pace import parse_pace
from runtime.runs import new_sut_dir, next_run_id


@pytest.mark.parametrize(
    ("received", "expected", "since_change_s", "elapsed_s", "verdict"),
    [
        (100, 100, 0.5, 0.5, "all acked events received"),
        # as many deliveries as acked, but still arriving: duplicates may stand in for events
        # on their way (a dispatcher redelivering from its last commit)
        (100, 100, 0.0, 0.0, None),
        (130, 100, 0.2, 3.0, None),
        (
            130,
            100,
            0.5,
            3.0,
            "30 deliveries more than acked events (duplicates or foreign), "
            "then nothing new for 0.5 s",
        ),
        (130, 100, 0.0, 60.0, "cap of 60 s reached"),  # still arriving: maybe not all in
        (100, 100, 0.1, 60.0, "all acked events received"),
        (90, 100, 1.0, 1.0, None),  # still arriving: keep waiting
        (90, 100, 5.0, 7.0, "nothing new for 5 s"),
        (90, 100, 0.1, 60.0, "cap of 60 s reached"),  # a trickle cannot hold the run forever
        (0, 0, 0.5, 0.5, "all acked events received"),
    ],
)
def test_grace_verdict(received, expected, since_change_s, elapsed_s, verdict):
    assert grace_verdict(received, expected, since_change_s, elapsed_s, 5.0, 60.0) == verdict


def test_run_ids_count_up_per_pace_and_never_overwrite(tmp_path):
    assert next_run_id(tmp_path, "1k-2k") == "run-1"
    new_sut_dir(tmp_path, "run-1", "1k-2k", "direct")
    new_sut_dir(tmp_path, "run-7", "1k-2k", "direct")
    new_sut_dir(tmp_path, "run-9", "1k-long", "direct")
    assert next_run_id(tmp_path, "1k-2k") == "run-8"
    with pytest.raises(EvbenchError, match="already exists"):
        new_sut_dir(tmp_path, "run-1", "1k-2k", "direct")
    with pytest.raises(EvbenchError, match="run id"):
        new_sut_dir(tmp_path, "../up", "1k-2k", "direct")


def test_lines_show_target_achieved_lag_failures_received():
    step = {
        "step": 3,
        "target_rate_per_s": 1200,
        "achieved_send_rate_per_s": 1188.0,
        "lag_p99_ms": 0.95,
        "failures": 2,
        "inflight_cap_refused": 0,
    }
    line = step_line(step, 12, 35000)
    for part in (
        "step 3/12",
        "1200/s",
        "1188.0/s",
        "99.00 %",
        "0.95 ms",
        "failures     2",
        "received 35000",
    ):
        assert part in line
    progress = {
        "step": 0,
        "target_rate_per_s": 100,
        "window_sent": 99,
        "lag_p99_ms": None,
        "failures": 0,
        "inflight": 1,
    }
    assert "warmup" in progress_line(progress, 12, None)
    assert "received ?" in progress_line(progress, 12, None)
    assert "worker" not in progress_line(progress, 12, None)
    assert step_line({**step, "failed_workers": {"1": "x"}}, 12, 1).endswith("FAILED workers: 1")
    fleet = {**progress, "lag_p99_ms": 3.5, "workers_reporting": 2, "slowest_worker": 1}
    assert "lag p99   3.50 ms (worker 1, 2 reporting)" in progress_line(fleet, 12, None)
    failed = {**fleet, "workers_reporting": 1, "failed_workers": {"0": "missing"}}
    assert "(worker 1, 1 reporting) FAILED: 0" in progress_line(failed, 12, None)


# A receiver's final counters, every key its type requires (contract.receiverlines.ReceiverStats).
STATS = {
    **dict.fromkeys(ReceiverStats.__required_keys__, 0),
    "refused": {},
    "first_received_ns": None,
    "last_received_ns": None,
    "received": 10,
    "rows_written": 10,
}


@pytest.mark.parametrize(
    ("died", "code", "stats", "expected"),
    [
        (False, 0, STATS, None),  # stopped by SIGTERM, flushed, reported: healthy
        (True, -9, {}, "receiver died during the run (killed by SIGKILL)"),
        (False, 1, STATS, "receiver failed at stop (exit 1)"),  # e.g. could not write records
        (False, -9, {}, "receiver failed at stop (killed by SIGKILL)"),  # ignored SIGTERM
        (False, 0, {}, "receiver ended without its final report"),
        # Its own limits turned deliveries away: those events are not the system's losses.
        (
            False,
            0,
            {**STATS, "refused": {"413": 3, "501": 1}},
            "receiver turned deliveries away by its own limits or faults: 3 answered 413",
        ),
        (False, 0, {**STATS, "refused": {"501": 2}, "malformed": 5}, None),  # not events
        (False, 0, {**STATS, "quarantined": 1}, "receiver turned deliveries away"),
        (False, 0, {**STATS, "internal_errors": 2}, "receiver turned deliveries away"),
    ],
)
def test_receiver_failure(died, code, stats, expected):
    found = receiver_failure(died, code, stats)
    assert found == expected if expected is None else found.startswith(expected)


@pytest.mark.parametrize(
    ("code", "summary", "expected"),
    [
        (0, {}, None),
        (130, {}, None),  # interrupted: stopped scheduling and flushed, as asked
        (-9, None, "sender ended without finishing (killed by SIGKILL)"),
        (1, None, "sender ended without finishing (exit 1)"),
        (2, {}, "sender failed (exit 2)"),
        (
            1,
            {"workers": 3, "failed_workers": {"2": "missing", "0": "its sender exited (-9)"}},
            "sender fleet lost 2 of 3 workers (worker 0: its sender exited (-9); worker 2: "
            "missing)",
        ),
        # rows it could not write (a full disk): an instrument failure whatever its exit
        (
            1,
            {"unwritten_rows": 812, "records_error": "[Errno 27] File too large"},
            "sender could not write 812 of its sent records ([Errno 27] File too large)",
        ),
        (0, {"unwritten_rows": 5}, "sender could not write 5 of its sent records (a write failed)"),
        (0, {"unwritten_rows": 0, "flush_errors": 3}, None),  # retried until written: whole
    ],
)
def test_sender_failure(code, summary, expected):
    assert sender_failure(code, summary) == expected


@pytest.mark.parametrize(("payload_bytes", "body_limit"), [(8192, 2**20), (2_000_000, 4_000_000)])
def test_the_receiver_takes_the_runs_own_events(payload_bytes, body_limit):
    assert receiver_limits(payload_bytes).max_body_bytes == body_limit


def test_a_matrix_never_writes_into_an_earlier_run(tmp_path):
    pace = parse_pace("100:1", name="p")
    earlier = new_sut_dir(tmp_path, "x", "p", "channel-imc")
    earlier.run_json.write_text("{}")
    lines = []
    opts = RunOptions(pace=pace, runs_dir=tmp_path, run_id="x")
    with pytest.raises(EvbenchError, match="channel-imc already exists"):
        run_matrix(opts, lines.append, False, suts=("direct", "channel-imc"))
    # refused before anything started: no directory for the first system, nothing printed
    assert not (tmp_path / "x-p" / "direct").exists() and lines == []


@pytest.mark.parametrize(
    ("alive", "counted", "written", "stats", "expected"),
    [
        (False, 10, [10], STATS, "the receiver died"),
        # written up to the count within the wait (a wait long enough for any machine)
        (True, 10, [4, 7, 10], STATS, None),
        (True, 10, [4], STATS, "did not write its records within"),
        (True, 10, [10], {**STATS, "refused": {"413": 3}}, "3 answered 413"),
        (True, 10, [None], STATS, "did not write its records within"),  # no /stats
    ],
)
def test_receiver_trouble_waits_for_the_files_then_judges(alive, counted, written, stats, expected):
    # The receiver writes what it counted on its next flush: a probe is judged once the files
    # hold it all, and not at all when deliveries were turned away.
    answers = iter(written)
    last = {"rows": None}

    def now():
        rows = next(answers, last["rows"])
        last["rows"] = rows
        if rows is None:
            return None
        return {**stats, "rows_written": rows, "quarantined": 0}

    # The cases that give up wait 0.3 s; the one that succeeds may wait up to 30 s.
    found = receiver_trouble(alive, lambda: counted, now, timeout_s=30 if expected is None else 0.3)
    assert (found is None) if expected is None else (expected in found), found
