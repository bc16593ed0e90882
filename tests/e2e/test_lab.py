"""Every SUT of the lab as real processes on loopback (and a fresh Tansu broker for Kafka)."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
import pytest

from analysis.job import AnalyzeOptions, analyze
from contract.records import (
    CONSUMER_LAG_FIELDS,
    PROCESS_SAMPLE_FIELDS,
    RECEIVED_FIELDS,
    SENT_FIELDS,
)
from evbench.options import RunOptions, RunOutcome
from evbench.runner import run, run_matrix
from loadgen.pace import resolve_pace
from loadgen.settings import SendKnobs
from runtime.parquet import read_parts
from runtime.procs import Child
from suts.lab import KAFKA_SUTS, LOCAL_SUTS, LabSettings, Sut, driver_for
from tests.conftest import wait_until
from tests.suts.test_metrics import parse

pytestmark = pytest.mark.e2e

PACE = "50:3"


def _opts(tmp_path: Path, pace: str = PACE, decoy_every: int = 0, **kwargs) -> RunOptions:
    lab = kwargs.pop("lab", LabSettings(partitions=8))
    return RunOptions(
        pace=resolve_pace(pace),
        runs_dir=tmp_path / "runs",
        send=SendKnobs(step_gap_s=0.5, decoy_every=decoy_every),
        grace_s=3.0,
        lab=lab,
        lag_interval_s=1.0,
        **kwargs,
    )


def _records(outcome: RunOutcome) -> tuple[list[dict], list[dict]]:
    root = outcome.sut_dir.root
    sent = read_parts(root / "sent", SENT_FIELDS).to_pylist()
    received = read_parts(root / "received", RECEIVED_FIELDS).to_pylist()
    return sent, received


def _scraped_at_stop(scraped: dict[str, str], events: int) -> Callable[..., Sut]:
    """make_sut's systems, each component's /metrics read as the run stops it: after the wait
    for stragglers, so every event has gone through."""

    def make(name: str, settings: LabSettings, logs: Path, run_id: str, host: str) -> Sut:
        class ScrapedAtStop(driver_for(name)):
            def stop(self) -> dict[str, dict[str, int]]:
                if not self._stopped:
                    for role, url in self.metrics_endpoints().items():
                        scraped[role] = _settled(url, events)
                return super().stop()

        return ScrapedAtStop(settings, logs, run_id, host)

    return make


def _settled(url: str, events: int, deadline_s: float = 5.0) -> str:
    """The component's /metrics once its deliveries reach `events` (or the deadline passes):
    a hop counts a delivery when the receiver's answer is back, which can trail the
    receiver's own count, and so the run's wait for stragglers, by a moment."""
    deadline = time.monotonic() + deadline_s
    while True:
        text = httpx.get(url, timeout=5).text
        counted = [value for _, value in _samples(text).get("evbench_lab_deliveries_total", [])]
        if all(value >= events for value in counted) or time.monotonic() > deadline:
            return text
        time.sleep(0.1)


Samples = dict[str, list[tuple[dict[str, str], float]]]  # name -> (labels, value) of each


def _samples(text: str) -> Samples:
    by_name: Samples = {}
    for (name, labels), value in parse(text)[1].items():
        by_name.setdefault(name, []).append((dict(labels), value))
    return by_name


def _only(got: Samples, name: str) -> float:
    ((_, value),) = got[name]  # one sample: the component's own
    return value


def _check_lab_metrics(scraped: dict[str, str], events: int, partitions: int) -> None:
    """What each component's /metrics says went through it: every event, once."""
    for role, text in scraped.items():
        got = _samples(text)
        for gc_family in ("python_gc_collections_total", "python_gc_duration_seconds_total"):
            assert {labels["generation"] for labels, _ in got[gc_family]} == {"0", "1", "2"}
        (hop,) = {labels["hop"] for seen in got.values() for labels, _ in seen if "hop" in labels}
        if hop == "kafka-ingress":  # produces to the topic, delivers to no one
            assert _only(got, "evbench_lab_accepted_total") == events, role
            continue
        assert _only(got, "evbench_lab_deliveries_total") == events, role
        assert _only(got, "evbench_lab_delivery_failures_total") == 0, role
        if hop == "imc-channel":
            assert _only(got, "evbench_lab_queue_depth_events") == 0
            assert _only(got, "evbench_lab_in_flight_events") == 0  # every one delivered
        if hop == "kafka-dispatcher":
            consumed = got["eventing_kafka_consumed_msg_count"]
            assert len(consumed) == partitions  # each assigned one, 0 or not
            assert sum(count for _, count in consumed) == events


@pytest.mark.parametrize("sut", LOCAL_SUTS)
def test_every_event_arrives_exactly_once(tmp_path, sut):
    lines: list[str] = []
    scraped: dict[str, str] = {}
    make = _scraped_at_stop(scraped, events=150)
    outcome = run(_opts(tmp_path, sut=sut), lines.append, live=False, make=make)
    assert outcome.status == "completed", "\n".join(lines)
    sent, received = _records(outcome)
    assert len(sent) == 150 and all(r["status"] in (200, 202) for r in sent)
    ids = [r["event_id"] for r in received]
    assert sorted(ids) == sorted(r["event_id"] for r in sent)  # each once, nothing foreign
    # every process of the SUT was sampled, and Kafka SUTs sampled their consumer lag
    samples = read_parts(outcome.sut_dir.samples, PROCESS_SAMPLE_FIELDS).to_pylist()
    assert set(outcome.sut["components"]) | {"sender", "receiver"} <= {
        s["process"] for s in samples
    }
    if sut in KAFKA_SUTS:
        assert outcome.sut["readiness"]["dispatcher"]["partitions"] == 8
        lag = read_parts(outcome.sut_dir.samples / "consumer-lag", CONSUMER_LAG_FIELDS)
        assert set(lag.column("partition").to_pylist()) == set(range(8))
        assert "kafka" in {s["process"] for s in samples}
    if sut == "source-kafka":  # the adapter rewrote ce-id; the id came from the payload
        assert all(r["ce_id"].startswith("partition:") for r in received)
    # each component's own /metrics counted them too (direct has none)
    assert set(scraped) == set(outcome.sut["components"])
    _check_lab_metrics(scraped, events=150, partitions=8)


@pytest.fixture(scope="module")
def broken_runs(tmp_path_factory, spark):
    """Broker SUTs fed decoys, and a Kafka channel whose dispatcher is killed mid-run, analysed
    together as one run."""
    tmp = tmp_path_factory.mktemp("lab")
    opts = _opts(tmp, pace="100:2", decoy_every=5, run_id="filters")
    outcomes = run_matrix(opts, print, live=False, suts=("broker-imc", "broker-kafka"))

    lines: list[str] = []
    killed: list[int] = []
    opts = _opts(tmp, pace="100:6", sut="channel-kafka", run_id="filters")

    def kill_dispatcher_once_delivering() -> None:
        received = tmp / "runs" / "filters-100x6" / "channel-kafka" / "received"
        wait_until(lambda: any(received.glob("*.parquet")), 60, "first deliveries")
        pid = _pid_of_dispatcher()
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_dispatcher_once_delivering, daemon=True)
    killer.start()
    outcomes.append(run(opts, lines.append, live=False))
    killer.join(timeout=60)
    assert killed, "the dispatcher was never killed"
    summaries = analyze(spark, [o.sut_dir.root for o in outcomes], AnalyzeOptions())
    return {s["sut"]: (o, s) for o, s in zip(outcomes, summaries, strict=True)}, lines


def _pid_of_dispatcher() -> int:
    """The live process table: run.json, with the pids, is written only at the end."""
    for child in psutil.Process().children():
        if "kafka-dispatcher" in child.cmdline():
            return child.pid
    raise AssertionError("no kafka-dispatcher process found")


@pytest.mark.parametrize("sut", ["broker-imc", "broker-kafka"])
def test_trigger_filter_drops_decoys_and_they_are_not_lost(broken_runs, sut):
    runs, _ = broken_runs
    outcome, summary = runs[sut]
    counts = summary["counts"]
    assert counts["decoys"] == 40  # every 5th of 200
    assert counts["filtered"] == 40 and counts["leaked"] == 0
    assert counts["lost"] == 0 and counts["received"] == 160
    assert (
        outcome.sut["final_stats"]["filter" if sut == "broker-imc" else "dispatcher"]["filtered"]
        == 40
    )
    assert all(s["verdict"] != "breaks" for s in summary["steps"])


def test_killed_dispatcher_is_judged_a_crash_not_a_capacity_limit(broken_runs):
    runs, lines = broken_runs
    outcome, summary = runs["channel-kafka"]
    assert outcome.status == "completed"
    assert outcome.sut["died"] == ["dispatcher"]
    # When it died, said as the run goes and kept in run.json for the analysis.
    assert any("dispatcher died at" in line and "going on" in line for line in lines)
    (death,) = outcome.sut_deaths
    assert death["role"] == "dispatcher" and death["exit_code"] == -9
    counts = summary["counts"]
    assert counts["send_failures"] == 0  # the ingress kept accepting into the topic
    assert counts["lost"] > 0 and counts["received"] + counts["lost"] == counts["acked"]
    # The step it died in is judged by the crash: never "breaks", never an instrument failure,
    # and the run names no breaking point from it.
    step = summary["steps"][0]
    assert summary["instrument_failures"] == []
    assert step["verdict"] == "system-died", step
    assert step["reasons"][0].startswith("dispatcher died at ")
    assert summary["breaking_point_per_s"] is None
    (said,) = summary["sut_deaths"]
    assert said["role"] == "dispatcher" and said["step"] == 1
    assert said["lost_after"] == counts["lost"]
    assert summary["verdict"].startswith("dispatcher died at "), summary["verdict"]
    assert f"in step 1 (100/s): {counts['lost']} lost from then on" in summary["verdict"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_refused_ingress_is_a_wiring_mistake_not_a_crash(tmp_path):
    # Every event refused, none acked: named as wiring once 100 have failed (two seconds at
    # 50/s), the sender stopped with its records kept, and the run failed, not "completed"
    # with a system that "breaks" (tests/e2e/test_wiring.py: the command, a 404, a 502).
    closed = f"http://127.0.0.1:{_free_port()}/"
    lab = LabSettings(ingress=closed)
    outcome = run(_opts(tmp_path, sut="external", lab=lab, pace="50:10"), print, live=False)
    assert outcome.status == "failed"
    assert any(f.startswith("wiring: ") and closed in f for f in outcome.instrument_failures)
    sent, received = _records(outcome)
    assert 100 <= len(sent) < 500 and received == []
    assert all(r["status"] == 0 and "refused" in r["error"].lower() for r in sent)
    assert outcome.sender["failures"] == len(sent)


def test_external_system_forwarding_to_the_receiver(tmp_path):
    """Any HTTP system subscribed to the receiver: here one of the lab's channels, started by
    hand the way a user's cluster would be running before `evbench run`."""
    receiver_port = _free_port()
    system = Child(
        "system",
        [
            sys.executable,
            "-m",
            "suts",
            "imc-channel",
            "--subscriber",
            f"http://127.0.0.1:{receiver_port}/",
            "--retries",
            "20",
        ],
        tmp_path / "system.log",
    )
    try:
        port = system.wait_for("listening", 30)["port"]
        lab = LabSettings(ingress=f"http://127.0.0.1:{port}/")
        lines: list[str] = []
        opts = _opts(tmp_path, sut="external", lab=lab, receiver_port=receiver_port)
        outcome = run(opts, lines.append, live=False)
    finally:
        system.stop()
    assert any(f"127.0.0.1:{receiver_port}/" in line for line in lines)  # told where to point
    sent, received = _records(outcome)
    assert sorted(r["event_id"] for r in received) == sorted(r["event_id"] for r in sent)
    assert len(sent) == 150


def test_matrix_records_a_system_that_would_not_start_and_goes_on(tmp_path):
    """`external` without --ingress cannot start: recorded as failed, and the next system runs."""
    from analysis.job import never_started

    lines: list[str] = []
    outcomes = run_matrix(_opts(tmp_path, pace="50:1"), lines.append, False, ("external", "direct"))
    assert [o.status for o in outcomes] == ["failed", "completed"]
    assert any("--ingress" in line and "going on" in line for line in lines)
    assert never_started(outcomes[0].sut_dir.root)
    assert not never_started(outcomes[1].sut_dir.root)
