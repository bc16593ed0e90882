"""Faults inside a paced step on real processes: the lab's own components killed and paused by
`evbench run --fault`, and the user's commands run by the injector at their instant."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from contract.documents import RunDoc, problems
from contract.records import METRIC_SAMPLE_FIELDS, RECEIVED_FIELDS, SENT_FIELDS
from contract.senderlines import PlannedStepDoc
from contract.summarydocs import SummaryDoc
from evbench.faults import FaultInjector
from evbench.faultspec import parse_fault, parse_fault_exec
from runtime.parquet import read_parts
from runtime.procs import die_with_parent
from suts.lab import LabSettings, make_sut
from tests.browser import console_errors, evaluate
from tests.conftest import WITHOUT_HOST_RULE, wait_until

pytestmark = pytest.mark.e2e

NS_PER_S = 1_000_000_000
STEPS: list[PlannedStepDoc] = [
    {"number": 1, "rate_per_s": 10, "duration_s": 5, "warmup": False, "start_offset_ns": 0,
     "first_seq": 0},
]  # fmt: skip


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_users_commands_run_at_their_instant_and_one_that_hangs_is_killed(tmp_path):
    pid_file = tmp_path / "child.pid"
    faults = [
        parse_fault_exec("1@0.2s:echo said; echo warned >&2; exit 3"),
        # a command that starts a child of its own and hangs: the group is killed at the bound
        parse_fault_exec(f"1@0.2s:sleep 60 & echo $! > {pid_file}; sleep 60"),
        parse_fault_exec(f"1@60s:touch {tmp_path / 'never'}"),  # due after the run: never run
    ]
    lines: list[str] = []
    injector = FaultInjector(faults, lines.append, exec_timeout_s=1.0)
    start_ns = time.time_ns()
    injector.arm(start_ns, STEPS, None)
    docs = injector.docs
    wait_until(lambda: docs[0]["back_ns"] and docs[1]["back_ns"], 15, "both commands to end")
    injector.stop()
    said, hung, never = docs
    assert said["exit_code"] == 3 and said["error"] == "exited 3"
    assert "said" in said["output"] and "warned" in said["output"]
    assert said["at_ns"] >= start_ns + 200_000_000 == said["due_ns"]
    assert hung["exit_code"] is None and "still running after 1 s: killed" in hung["error"]
    assert hung["back_ns"] - hung["at_ns"] >= 1 * NS_PER_S
    grandchild = int(pid_file.read_text())
    wait_until(lambda: not _alive(grandchild), 5, "the command's own child to be gone")
    assert never["at_ns"] is None and never["back_ns"] is None and not (tmp_path / "never").exists()
    assert any("exited 3" in line for line in lines)


@pytest.mark.browser
def test_a_dispatcher_killed_and_paused_mid_step_is_brought_back(tmp_path):
    # channel-imc: ingress, queue and dispatcher are one process (the channel), so while it is
    # down the sender's requests fail; it comes back where it listened and delivers again.
    done = subprocess.run(
        [sys.executable, "-m", "evbench", "run", "--sut", "channel-imc", "--pace", "200:5,200:15",
         "--fault", "1@2s:pause:channel:1500ms", "--fault", "2@2s:kill:dispatcher:1s",
         "--runs-dir", str(tmp_path), "--run-id", "f"],
        capture_output=True, text=True, timeout=180, preexec_fn=die_with_parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sut_dir = tmp_path / "f-200x5-200x15" / "channel-imc"
    run = json.loads((sut_dir / "run.json").read_text())
    assert problems(run, RunDoc) == []
    assert run["status"] == "completed" and not run.get("sut_deaths"), run.get("sut_deaths")
    paused, killed = run["faults"]
    start_ns = run["schedule"]["start_ns"]
    for fault in (paused, killed):
        assert fault["error"] is None, fault
        assert 0 <= fault["at_ns"] - fault["due_ns"] < 0.5 * NS_PER_S, fault
    assert paused["due_ns"] == start_ns + 2 * NS_PER_S and len(paused["pids"]) == 1
    assert paused["back_ns"] - paused["at_ns"] >= 1.5 * NS_PER_S
    assert killed["due_ns"] >= paused["due_ns"] + 5 * NS_PER_S  # 2 s into the second step
    old, new = killed["pids"]
    assert old == paused["pids"][0] and new != old  # a new process, where the old one listened
    assert killed["back_ns"] - killed["at_ns"] >= 1 * NS_PER_S
    sent = read_parts(sut_dir / "sent", SENT_FIELDS)
    down = pc.and_(
        pc.greater_equal(sent["intended_ns"], killed["at_ns"]),
        pc.less(sent["intended_ns"], killed["back_ns"]),
    )
    failed_while_down = pc.sum(pc.and_(down, pc.not_equal(sent["status"], 202))).as_py()
    assert failed_while_down > 0  # the ingress was down with it
    received = read_parts(sut_dir / "received", RECEIVED_FIELDS)
    after = pc.sum(pc.greater(received["received_ns"], killed["back_ns"])).as_py()
    assert after > 0  # the new process delivers
    assert "fault: channel killed" in done.stderr and "fault: channel paused" in done.stderr
    # The analysis judges the step by its fault, not as the system's capacity.
    summary = json.loads((sut_dir / "analysis" / "summary.json").read_text())
    assert problems(summary, SummaryDoc) == []
    steps = {s["step"]: s for s in summary["steps"]}
    assert steps[2]["verdict"] == "faulted", steps[2]
    assert steps[2]["reasons"][0].startswith("kill dispatcher 2 s into step 2, back after")
    assert summary["breaking_point_per_s"] is None
    # the pause held the events due in its first half second for over a second: late, as the
    # records say (each delivered event's arrival against when it was due)
    first_ns = start_ns + (paused["at_ns"] - start_ns) // NS_PER_S * NS_PER_S  # its second
    in_window = pc.and_(pc.greater_equal(sent["intended_ns"], first_ns),
                        pc.less(sent["intended_ns"], start_ns + 5 * NS_PER_S))  # fmt: skip
    due = sent.filter(in_window).select(["event_id", "intended_ns"])
    arrived = due.join(received.select(["event_id", "received_ns"]), "event_id")
    e2e_ns = pc.subtract(arrived["received_ns"], arrived["intended_ns"])
    late = pc.sum(pc.greater(e2e_ns, NS_PER_S)).as_py()
    assert late > 50 and summary["faults"][0]["window_late"] == late, summary["faults"][0]
    ledger = summary["faults"][1]
    assert ledger["step_send_failures"] >= ledger["window_send_failures"] >= failed_while_down
    # back in rate and latency within seconds of coming back (three healthy seconds in a row)
    back_after_s = (killed["back_ns"] - killed["at_ns"]) / NS_PER_S
    assert ledger["recovered_after_s"] is not None, ledger  # 12 s of the step were left
    assert back_after_s - 1 <= ledger["recovered_after_s"] <= back_after_s + 5, ledger
    assert summary["verdict"].startswith("pause channel 2 s into step 1"), summary["verdict"]
    # The report, drawn by Chromium: both faults on the main graph's and the resources' axes.
    marks = (
        "['six-series', 'resources'].map(id => document.getElementById(id).layout.shapes"
        ".filter(s => s.line && s.line.dash === 'dot').map(s => s.x0))"
    )
    drawn_at, console = evaluate(sut_dir / "analysis" / "report.html", tmp_path, marks, (1200, 900))
    assert console_errors(console) == []
    expected = [f["at_s"] for f in summary["faults"]]
    assert drawn_at == [expected, expected], drawn_at


_HOP = """
import sys, time
from tests.e2e.hops import HttpHop
hop = HttpHop(sys.argv[1])
print(hop.url, flush=True)
time.sleep(600)
"""


def test_a_users_system_is_faulted_with_the_users_own_command(tmp_path):
    # The user's system is a hop of the test's own, in a process of its own (nothing of the
    # lab's drivers); `--fault-exec` kills it with the user's command 2 s into the step.
    port = _free_port()
    hop = subprocess.Popen(
        [sys.executable, "-c", _HOP, f"http://127.0.0.1:{port}/"], stdout=subprocess.PIPE,
        text=True, cwd=Path(__file__).resolve().parents[2], preexec_fn=die_with_parent,
    )  # fmt: skip
    try:
        url = hop.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        done = subprocess.run(
            [sys.executable, "-m", "evbench", "run", "--sut", "external", "--ingress", url,
             "--receiver-port", str(port), "--pace", "200:4", "--payload-bytes", "512",
             "--fault-exec", f"1@2s:kill -9 {hop.pid}", "--grace", "1", "--no-analyze",
             "--runs-dir", str(tmp_path), "--run-id", "x"],
            capture_output=True, text=True, timeout=180, preexec_fn=die_with_parent,
        )  # fmt: skip
        killed_by_the_command = hop.poll()
    finally:
        hop.kill()
        hop.wait(10)
    assert killed_by_the_command == -9  # the user's command did it, not this test
    assert done.returncode == 0, done.stderr
    run = json.loads((tmp_path / "x-200x4" / "external" / "run.json").read_text())
    assert problems(run, RunDoc) == []
    (fault,) = run["faults"]
    assert fault["action"] == "exec" and fault["exit_code"] == 0 and fault["error"] is None
    assert fault["due_ns"] == run["schedule"]["start_ns"] + 2 * NS_PER_S
    sent = read_parts(tmp_path / "x-200x4" / "external" / "sent", SENT_FIELDS)
    before = pc.less(sent["intended_ns"], fault["at_ns"])
    ok = pc.equal(sent["status"], 202)
    assert pc.sum(pc.and_(before, ok)).as_py() > 300  # it took events until the kill
    after = pc.greater(sent["intended_ns"], fault["back_ns"])
    assert pc.sum(pc.and_(after, ok)).as_py() == 0  # and none after


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_stopping_resumes_a_paused_process_and_cancels_the_faults_not_yet_due(tmp_path):
    sut = make_sut("channel-imc", LabSettings(), tmp_path / "logs", "t")
    sut.start("http://127.0.0.1:9/")  # nothing is sent: no subscriber needed
    try:
        faults = [parse_fault("1@0s:pause:channel:60s"), parse_fault("1@30s:kill:channel")]
        injector = FaultInjector(faults, lambda line: None)
        injector.arm(time.time_ns(), STEPS, sut)
        paused, later = injector.docs
        pid = wait_until(lambda: paused["at_ns"] and paused["pids"][0], 10, "the pause")
        assert _state(pid) == "T" and "channel" in sut.faulted
        injector.stop()  # the run ends long before the pause would
        assert _state(pid) != "T" and "channel" not in sut.faulted and sut.dead() == []
        assert paused["back_ns"] is not None and later["at_ns"] is None and later["pids"] == []
    finally:
        sut.stop()


def _state(pid: int) -> str:
    """The process's state letter in /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


_PAUSER = """
import sys, time
from pathlib import Path
from evbench.faults import FaultInjector
from evbench.faultspec import parse_fault
from suts.lab import LabSettings, make_sut
from tests.e2e.test_faults import STEPS
sut = make_sut("channel-imc", LabSettings(), Path(sys.argv[1]), "t")
sut.start("http://127.0.0.1:9/")
injector = FaultInjector([parse_fault("1@0s:pause:channel:60s")], lambda line: None)
injector.arm(time.time_ns(), STEPS, sut)
while not injector.docs[0]["pids"]:
    time.sleep(0.05)
print(injector.docs[0]["pids"][0], flush=True)
time.sleep(600)
"""


def test_a_paused_component_dies_with_an_orchestrator_killed_outright(tmp_path):
    # SIGKILL leaves evbench no teardown to resume what it paused: the component's death signal
    # must end it, stopped as it is (a SIGTERM would wait, pending, on a stopped process).
    orchestrator = subprocess.Popen(
        [sys.executable, "-c", _PAUSER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2], preexec_fn=die_with_parent,
    )  # fmt: skip
    pid = None
    try:
        pid = int(orchestrator.stdout.readline())
        wait_until(lambda: _state(pid) == "T", 10, "the pause")
        orchestrator.kill()
        orchestrator.wait(10)
        wait_until(lambda: _gone(pid), 10, "the paused channel's end")
    finally:
        orchestrator.kill()
        orchestrator.wait(10)
        if pid is not None and not _gone(pid):  # the test failed: never leave it stopped
            os.kill(pid, signal.SIGKILL)


def _gone(pid: int) -> bool:
    try:
        return _state(pid) == "Z"  # dead, not yet reaped by its new parent
    except FileNotFoundError:
        return True


def test_a_search_with_a_fault_in_every_probe_holds_where_the_system_recovers(tmp_path):
    from evbench.options import SearchOptions
    from evbench.search import search
    from evbench.searchplan import Resolution, SearchPlan
    from loadgen.settings import SendKnobs

    # One probe (the search's wording of its answer is searchdoc's, tested pure), the channel
    # (channel-imc's ingress and dispatcher in one) killed 1 s in and brought back at once:
    # back within about 1.5 s.
    opts = SearchOptions(
        sut="channel-imc",
        plan=SearchPlan(300, 300, Resolution(per_s=1), probe_s=8, confirm_s=8, max_probes=1),
        runs_dir=tmp_path, run_id="s", send=SendKnobs(payload_bytes=512), settle_s=1.0,
        grace_s=1.0, faults=(parse_fault("every@1s:kill:channel"),), thresholds=WITHOUT_HOST_RULE,
    )  # fmt: skip
    lines: list[str] = []
    searched = search(opts, lines.append, make=make_sut)
    assert searched.status == "completed", lines
    run = json.loads(searched.sut_dir.run_json.read_text())
    assert problems(run, RunDoc) == []
    assert [f["step"] for f in run["faults"]] == [1]
    probes = run["search"]["probes"]
    for fault, probe in zip(run["faults"], probes, strict=True):
        assert fault["due_ns"] == probe["start_ns"] + NS_PER_S  # 1 s into its own probe
        assert fault["error"] is None and len(fault["pids"]) == 2, fault  # killed, then back
        assert fault["back_ns"] > fault["at_ns"]
    # Send failures while the channel was down: a break by the step rule, a hold by recovery.
    assert [p["verdict"] for p in probes] == ["holds"], lines
    for number, probe in enumerate(probes, 1):
        assert probe["reasons"][0].startswith(f"kill channel 1 s into step {number}, back")
        assert "recovered" in probe["reasons"][0] and "not recovered" not in probe["reasons"][0]
        assert probe["reasons"][1] == "by the step rule alone: breaks"
    assert searched.result is not None and searched.result.highest_hold_per_s == 300


def test_a_kafka_channel_whose_dispatcher_is_killed_loses_nothing_it_acked(tmp_path):
    # At-least-once: the ingress acks an event once it is in the topic, and the dispatcher,
    # started again, resumes from the group's last commit. So nothing acked is lost, and what
    # comes twice is at most what was delivered since that commit (one --commit-interval of
    # the pace, 1 s; twice that for margin).
    rate, commit_s = 200, 1.0
    done = subprocess.run(
        [sys.executable, "-m", "evbench", "run", "--sut", "channel-kafka", "--pace", f"{rate}:4",
         "--partitions", "2", "--payload-bytes", "512", "--commit-interval", f"{commit_s:g}",
         "--fault", "1@2s:kill:dispatcher", "--grace", "3", "--no-analyze",
         "--runs-dir", str(tmp_path), "--run-id", "k"],
        capture_output=True, text=True, timeout=240, preexec_fn=die_with_parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    sut_dir = tmp_path / f"k-{rate}x4" / "channel-kafka"
    run = json.loads((sut_dir / "run.json").read_text())
    (fault,) = run["faults"]
    assert fault["error"] is None and fault["back_ns"] is not None, fault
    sent = read_parts(sut_dir / "sent", SENT_FIELDS)
    acked = set(sent.filter(pc.equal(sent["status"], 202))["event_id"].to_pylist())
    received = read_parts(sut_dir / "received", RECEIVED_FIELDS)["event_id"].to_pylist()
    assert len(acked) == rate * 4  # the ingress is not the dispatcher: every send acked
    assert acked - set(received) == set()  # none lost
    duplicates = len(received) - len(set(received))
    assert duplicates <= 2 * commit_s * rate, duplicates


def _run_with_fault(tmp_path, sut: str, pace: str, *more: str) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "evbench", "run", "--sut", sut, "--pace", pace,
         "--payload-bytes", "512", "--grace", "2", "--no-analyze", "--runs-dir", str(tmp_path),
         "--run-id", "p", *more],
        capture_output=True, text=True, timeout=180, preexec_fn=die_with_parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (sut_dir,) = tmp_path.glob(f"p-*/{sut}")
    return sut_dir


def _acked_and_received(sut_dir: Path):
    sent = read_parts(sut_dir / "sent", SENT_FIELDS)
    received = set(read_parts(sut_dir / "received", RECEIVED_FIELDS)["event_id"].to_pylist())
    return sent, set(sent.filter(pc.equal(sent["status"], 202))["event_id"].to_pylist()), received


def test_an_in_memory_channel_killed_loses_what_its_metrics_said_it_held(tmp_path):
    # broker-imc's trigger filter, the channel's subscriber, is stopped from 0.5 s: the
    # channel's one delivery at a time waits on it, and its queue grows at the pace until the
    # channel is killed 2 s in. Nothing is persisted: the events lost are those it held, as
    # its own /metrics said at the last scrape before the kill, within what can have come
    # since (the rate x the time from that scrape, at least one interval). (The one it was
    # delivering reaches the filter's socket and is delivered once the filter resumes.)
    rate, interval_s = 2000, 0.25
    sut_dir = _run_with_fault(
        tmp_path, "broker-imc", f"{rate}:3", "--dispatcher-concurrency", "1",
        "--scrape-interval", f"{interval_s:g}", "--fault", "1@0.5s:pause:filter:2s",
        "--fault", "1@2s:kill:channel",
    )  # fmt: skip
    paused, fault = json.loads((sut_dir / "run.json").read_text())["faults"]
    assert paused["error"] is None and fault["error"] is None, (paused, fault)
    _, acked, received = _acked_and_received(sut_dir)
    lost = len(acked - received)
    scraped = read_parts(sut_dir / "samples" / "metrics", METRIC_SAMPLE_FIELDS)
    held = scraped.filter(pc.and_(
        pc.and_(pc.less(scraped["t_ns"], fault["at_ns"]), pc.equal(scraped["endpoint"], "channel")),
        pc.is_in(scraped["metric"], pa.array(["evbench_lab_queue_depth_events",
                                              "evbench_lab_in_flight_events"])),
    )).to_pylist()  # fmt: skip
    last_ns = max(row["t_ns"] for row in held)
    said = sum(row["value"] for row in held if row["t_ns"] == last_ns)
    assert said > 500, said  # a queue to lose, not a rounding error
    since_s = max(interval_s, (fault["at_ns"] - last_ns) / NS_PER_S)
    assert abs(lost - said) <= rate * since_s, (lost, said, since_s)


def test_a_broker_ingress_killed_fails_sends_and_loses_nothing_it_acked(tmp_path):
    # broker-imc's ingress answers with the channel's answer: while it is down the sender's
    # requests fail, and what it had acked was already in the channel.
    sut_dir = _run_with_fault(
        tmp_path, "broker-imc", "300:4", "--fault", "1@1s:kill:ingress"
    )  # fmt: skip
    (fault,) = json.loads((sut_dir / "run.json").read_text())["faults"]
    sent, acked, received = _acked_and_received(sut_dir)
    down = pc.and_(
        pc.greater_equal(sent["intended_ns"], fault["at_ns"]),
        pc.less(sent["intended_ns"], fault["back_ns"]),
    )
    assert pc.sum(pc.and_(down, pc.not_equal(sent["status"], 202))).as_py() > 0
    # acked: all but what was due while it was down (and half a second of slack around it)
    down_s = (fault["back_ns"] - fault["at_ns"]) / NS_PER_S
    assert acked - received == set() and len(acked) >= 300 * (4 - down_s - 0.5)
