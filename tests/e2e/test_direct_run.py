"""`evbench run --sut direct` as a user runs it: a real process tree on loopback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.job import AnalyzeOptions, analyze, analyze_sut
from contract.documents import RunDoc, problems
from contract.records import PROCESS_SAMPLE_FIELDS, RECEIVED_FIELDS, SENT_FIELDS
from contract.summarydocs import SummaryDoc
from loadgen.pace import parse_pace
from loadgen.schedule import plan_steps, schedule
from runtime.parquet import part_files, read_parts
from runtime.procs import die_with_parent
from tests.browser import console_errors, drawn, render
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e

PACE = "200:2,400:2"
MS = 1_000_000
GAP_S = 0.5


def _evbench(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "evbench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=die_with_parent,  # an interrupted pytest must not leave runs behind
        **kwargs,
    )


@pytest.mark.browser
def test_two_step_run_every_event_once_on_each_side_on_schedule(tmp_path):
    proc = _evbench(
        "run",
        "--sut",
        "direct",
        "--pace",
        PACE,
        "--step-gap",
        str(GAP_S),
        "--runs-dir",
        str(tmp_path),
        "--run-id",
        "t1",
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    sut_dir = tmp_path / "t1-200x2-400x2" / "direct"
    run = json.loads((sut_dir / "run.json").read_text())
    assert problems(run, RunDoc) == []
    assert run["status"] == "completed" and run["sut"] == "direct"
    assert run["pace"]["spec"] == PACE

    sent = read_parts(sut_dir / "sent", SENT_FIELDS).to_pylist()
    received = read_parts(sut_dir / "received", RECEIVED_FIELDS).to_pylist()
    sent_ids = [r["event_id"] for r in sent]
    received_ids = [r["event_id"] for r in received]
    assert len(sent_ids) == len(set(sent_ids)) == 200 * 2 + 400 * 2
    assert len(received_ids) == len(set(received_ids))
    assert set(received_ids) == set(sent_ids)
    assert {r["status"] for r in sent} == {202}
    assert all(r["intended_ns"] <= r["sent_ns"] <= r["ack_ns"] for r in sent)

    # intended times are exactly the pure schedule, offset by the recorded start
    start_ns = run["schedule"]["start_ns"]
    planned = plan_steps(parse_pace(PACE).steps, GAP_S)
    expected = {(s.seq, s.step, start_ns + s.offset_ns) for s in schedule(planned)}
    assert {(r["seq"], r["step"], r["intended_ns"]) for r in sent} == expected

    # and each delivery came after its send
    sent_at = {r["event_id"]: r["sent_ns"] for r in sent}
    assert all(r["received_ns"] >= sent_at[r["event_id"]] for r in received)

    assert "step 1/2" in err and "step 2/2" in err and "completed" in err
    samples = read_parts(sut_dir / "samples", PROCESS_SAMPLE_FIELDS).to_pylist()
    assert {"sender", "receiver"} <= {s["process"] for s in samples}
    assert run["receiver"]["stats"]["received"] == 1200
    assert run["grace"]["reason"] == "all acked events received"

    # evbench run ends by analysing what it ran
    summary = json.loads((sut_dir / "analysis" / "summary.json").read_text())
    assert problems(summary, SummaryDoc) == []
    assert summary["counts"] == {
        "sent": 1200,
        "scheduled": 1200,
        "send_failures": 0,
        "acked": 1200,
        "received": 1200,
        "lost": 0,
        "duplicates": 0,
        "foreign": 0,
        "unrecorded_sends": 0,
        "decoys": 0,
        "filtered": 0,
        "leaked": 0,
        "failures_by_cause": {},
    }
    assert summary["latency_ms"]["e2e"]["n"] == 1200
    assert [s["target_rate_per_s"] for s in summary["steps"]] == [200, 400]
    # The suite's other worker shares the host: a step the sender could not keep may say so as
    # a host saturated by others; never a break.
    judged = ("holds", "sender-limited", "host-saturated")
    assert all(s["verdict"] in judged for s in summary["steps"])
    assert "direct:" in err and "report.html" in err
    assert (sut_dir / "analysis" / "report.html").is_file()
    assert (sut_dir.parent / "index.html").is_file()
    dom, console = render(sut_dir / "analysis" / "report.html", tmp_path)
    assert console_errors(console) == []
    assert all(drawn(dom, div) for div in ("six-series", "latency-points", "sender-health"))


def test_a_skewed_receiver_clock_is_measured_and_corrected(tmp_path, spark):
    # The receiver's clock runs 250 ms behind: uncorrected, every event arrives before it was due.
    shift_ms = -250
    proc = _evbench(
        "run",
        "--sut",
        "direct",
        "--pace",
        "200:2",
        "--receiver-clock-shift",
        str(shift_ms),
        "--runs-dir",
        str(tmp_path),
        "--run-id",
        "skew",
        "--no-analyze",
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    sut_dir = tmp_path / "skew-200x2" / "direct"
    run = json.loads((sut_dir / "run.json").read_text())
    assert problems(run, RunDoc) == []
    clock = run["clock"]
    assert clock["receiver_shift_ns"] == shift_ms * MS
    sender_clock = clock["senders"]["0"]
    assert sender_clock["errors"] == []
    for end in (sender_clock["before"], sender_clock["after"]):
        assert abs(end["offset_ns"] - shift_ms * MS) <= end["bound_ns"]

    corrected = analyze_sut(spark, sut_dir, AnalyzeOptions())
    raw = analyze_sut(spark, sut_dir, AnalyzeOptions(clock_correction="off"))
    assert problems(corrected, SummaryDoc) == []
    assert (corrected["clock"]["applied"], raw["clock"]["applied"]) == (True, False)
    assert raw["clock"]["negative_e2e"] == 400  # counted, not hidden
    assert corrected["clock"]["negative_e2e"] == 0
    # Each event moves by the shift, give or take the correction's bound.
    bound_ms = corrected["clock"]["workers"]["0"]["bound_ns"] / MS
    for figure, slack_ms in (("max", 0.0), ("p50", 0.05)):  # p50 from a digest: near, not exact
        moved = corrected["latency_ms"]["e2e"][figure] - raw["latency_ms"]["e2e"][figure]
        assert abs(moved + shift_ms) <= bound_ms + slack_ms, (figure, moved, bound_ms)


def test_sigint_mid_step_keeps_records_and_marks_the_run(tmp_path, spark):
    proc = _evbench(
        "run",
        "--sut",
        "direct",
        "--pace",
        "300:60",
        "--runs-dir",
        str(tmp_path),
        "--run-id",
        "int",
        "--no-analyze",
    )
    sut_dir = tmp_path / "int-300x60" / "direct"
    wait_until(lambda: len(part_files(sut_dir / "sent")) >= 2, 60, "sent records on disk")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "records" in err
    run = json.loads((sut_dir / "run.json").read_text())
    assert run["status"] == "interrupted" and run["interrupted"] is True
    sent = read_parts(sut_dir / "sent", SENT_FIELDS).to_pylist()
    acked = {r["event_id"] for r in sent if r["status"] == 202}
    assert 0 < len(acked) == run["sender"]["summary"]["ok"] < 18000
    # run.json accounts for every record on disk (issue 33, item 6)
    assert run["records"]["sent_rows"] == len(sent)
    received = {
        r["event_id"] for r in read_parts(sut_dir / "received", RECEIVED_FIELDS).to_pylist()
    }
    assert received == acked
    # The cut step is judged on the time it ran: over its whole 60 s it would read as
    # delivering a few percent of its pace, "breaks at 300/s" (issue 33, item 2).
    (summary,) = analyze(spark, [sut_dir], AnalyzeOptions())
    (step,) = summary["steps"]
    assert step["verdict"] != "breaks", step
    assert 0 < step["ran_s"] < 60 and step["delivered_rate_per_s"] > 250, step
    assert any(r.startswith("cut short after ") for r in step["reasons"]), step
    assert summary["breaking_point_per_s"] is None


def test_ctrl_c_during_start_up_is_an_interruption_said_in_run_json(tmp_path):
    """Before the first slot there is no sender to stop: the run unwinds, and run.json says
    interrupted and why, not failed (issue 33, item 6)."""
    proc = _evbench(
        "run", "--sut", "channel-kafka", "--pace", "100:5", "--runs-dir", str(tmp_path),
        "--run-id", "early", "--no-analyze",
    )  # fmt: skip
    sut_dir = tmp_path / "early-100x5" / "channel-kafka"
    wait_until(lambda: (sut_dir / "logs" / "tansu.log").exists(), 60, "the broker starting")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    run = json.loads((sut_dir / "run.json").read_text())
    assert run["status"] == "interrupted" and run["interrupted"] is True, run
    assert run["reason"] == "interrupted during start-up, before the first slot"


def test_bad_pace_is_refused_before_anything_starts(tmp_path):
    proc = _evbench("run", "--pace", "100:10,abc", "--runs-dir", str(tmp_path))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "'abc'" in err and "step 2" in err
    assert not any(Path(tmp_path).iterdir())


def test_existing_run_is_never_overwritten(tmp_path):
    (tmp_path / "same-200x2-400x2" / "direct").mkdir(parents=True)
    proc = _evbench("run", "--pace", PACE, "--runs-dir", str(tmp_path), "--run-id", "same")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "already exists" in err


def _child(proc: subprocess.Popen, module: str):
    import psutil

    return next(
        c for c in psutil.Process(proc.pid).children() if f"-m {module}" in " ".join(c.cmdline())
    )


def _long_direct_run(tmp_path: Path, run_id: str, *extra: str) -> tuple[subprocess.Popen, Path]:
    """A 30 s direct run to kill an instrument in; the process and its SUT directory."""
    proc = _evbench(
        "run", "--sut", "direct", "--pace", "200:30", "--runs-dir", str(tmp_path),
        "--run-id", run_id, "--grace", "0.5", *extra,
    )  # fmt: skip
    return proc, tmp_path / f"{run_id}-200x30" / "direct"


def test_receiver_killed_mid_run_is_an_instrument_failure_not_a_break(tmp_path):
    proc, sut_dir = _long_direct_run(tmp_path, "kill", "--drain-timeout", "1")
    wait_until(lambda: len(part_files(sut_dir / "received")) >= 2, 60, "received records on disk")
    _child(proc, "receivers").kill()  # by pid
    # The runner stops the sender by itself: every later event would be lost to a dead receiver.
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "instrument failed: receiver died during the run (killed by SIGKILL)" in err
    run = json.loads((sut_dir / "run.json").read_text())
    assert run["status"] == "failed"
    assert run["instrument_failures"] == ["receiver died during the run (killed by SIGKILL)"]
    assert run["sender"]["summary"]["interrupted"]  # stopped early, not after 30 s
    received = read_parts(sut_dir / "received", RECEIVED_FIELDS).to_pylist()
    sent = read_parts(sut_dir / "sent", SENT_FIELDS).to_pylist()
    assert len(received) >= 200  # at least the parts seen on disk before the kill
    assert {r["event_id"] for r in received} <= {r["event_id"] for r in sent}
    # Its last line counts the deliveries on disk, not "received 0" from a receiver that died
    # before its report (issue 51, item 9.4).
    assert run["records"]["received_rows"] == len(received)
    said = f"received {len(received)} (from its records: the receiver left no final report)"
    assert said in err and "received 0," not in err, err
    # Analysed, and the verdict is the instrument's, never a breaking point of the SUT.
    summary = json.loads((sut_dir / "analysis" / "summary.json").read_text())
    assert summary["verdict"].startswith("instrument failed: receiver died")
    assert summary["breaking_point_per_s"] is None
    assert "direct: instrument failed: receiver died" in err
    assert "breaks at" not in err
    assert "Instrument failed" in (sut_dir / "analysis" / "report.html").read_text()
    assert "Instrument failed" in (sut_dir.parent / "index.html").read_text()


def test_sender_killed_mid_run_is_analysed_up_to_where_its_records_end(tmp_path):
    proc, sut_dir = _long_direct_run(tmp_path, "ks", "--no-analyze")
    wait_until(lambda: len(part_files(sut_dir / "sent")) >= 2, 60, "sent records on disk")
    # run.json holds the schedule start from before the first slot, not only at the end
    early = json.loads((sut_dir / "run.json").read_text())
    assert early["status"] == "running" and early["schedule"]["start_ns"]
    _child(proc, "loadgen").kill()  # by pid
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "instrument failed: sender ended without finishing (killed by SIGKILL)" in err
    run = json.loads((sut_dir / "run.json").read_text())
    assert run["status"] == "failed"
    assert run["schedule"]["start_ns"] == early["schedule"]["start_ns"]
    # Its last line says what the files hold, not "sent 0" (issue 33, item 6).
    on_disk = len(read_parts(sut_dir / "sent", SENT_FIELDS))
    assert run["records"]["sent_rows"] == on_disk > 0
    assert f"the sender left no summary; its records hold {on_disk} sent events" in err, err

    analysis = subprocess.run(
        [sys.executable, "-m", "evbench", "analyze", str(sut_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert analysis.returncode == 1, analysis.stderr  # an instrument failed
    assert "never started" not in analysis.stderr
    assert "direct: instrument failed: sender ended without finishing" in analysis.stderr
    summary = json.loads((sut_dir / "analysis" / "summary.json").read_text())
    assert summary["breaking_point_per_s"] is None
    # the figures are those of the records on disk, up to where they end
    sent = read_parts(sut_dir / "sent", SENT_FIELDS).to_pylist()
    received = {
        r["event_id"] for r in read_parts(sut_dir / "received", RECEIVED_FIELDS).to_pylist()
    }
    sent_ids = {r["event_id"] for r in sent}
    assert 200 <= len(sent) < 6000
    assert summary["counts"]["scheduled"] == len(sent)
    assert summary["counts"]["received"] == len(received & sent_ids)
    # deliveries of events whose sent rows died unflushed with the sender: this run's own
    # sends, unrecorded, never foreign (issue 51, item 9.5)
    assert summary["counts"]["unrecorded_sends"] == len(received - sent_ids)
    assert summary["counts"]["foreign"] == 0
    assert "Instrument failed" in (sut_dir / "analysis" / "report.html").read_text()
