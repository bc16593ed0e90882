"""Fan-out in the lab: a channel with N subscriptions and a broker with N triggers deliver each
event once per subscriber, each at a path of its own that the receiver records; a trigger that
does not match filters every event out. Real processes on loopback."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from analysis.job import AnalyzeOptions, analyze
from contract.errors import EvbenchError
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from evbench.options import RunOptions
from evbench.runner import run
from loadgen.pace import resolve_pace
from loadgen.settings import SendKnobs
from runtime.parquet import read_parts
from runtime.procs import Child
from suts.lab import SUTS, LabSettings, driver_for
from suts.settings import subscriber_paths

pytestmark = pytest.mark.e2e


def _opts(tmp_path: Path, sut: str, lab: LabSettings, **kwargs) -> RunOptions:
    return RunOptions(
        pace=resolve_pace("50:2"),
        runs_dir=tmp_path / "runs",
        send=SendKnobs(step_gap_s=0.5, decoy_every=kwargs.pop("decoy_every", 0)),
        grace_s=3.0,
        lab=lab,
        sut=sut,
        **kwargs,
    )


def _deliveries(sut_dir: Path) -> tuple[list[dict], Counter[tuple[str, str]]]:
    sent = read_parts(sut_dir / "sent", SENT_FIELDS).to_pylist()
    received = read_parts(sut_dir / "received", RECEIVED_FIELDS).to_pylist()
    return sent, Counter((r["event_id"], r["subscriber"]) for r in received)


def test_a_channel_delivers_every_event_once_to_each_of_its_subscribers(tmp_path, spark):
    lines: list[str] = []
    outcome = run(_opts(tmp_path, "channel-imc", LabSettings(fanout=3)), lines.append, live=False)
    assert outcome.status == "completed", "\n".join(lines)
    sent, deliveries = _deliveries(outcome.sut_dir.root)
    paths = subscriber_paths(3)
    assert paths == ("/subscriber-1", "/subscriber-2", "/subscriber-3")
    expected = {(r["event_id"], path) for r in sent for path in paths}
    assert len(sent) == 100 and set(deliveries) == expected
    assert set(deliveries.values()) == {1}  # once each: no retry doubled one
    described = outcome.sut["subscribers"]
    assert [d["path"] for d in described] == list(paths) and all(d["matches"] for d in described)
    assert all(d["url"].endswith(d["path"]) for d in described)
    # Analysed per subscriber: fan-out's deliveries are no duplicates, each got every event.
    (summary,) = analyze(spark, [outcome.sut_dir.root], AnalyzeOptions())
    counts = summary["counts"]
    assert (counts["lost"], counts["duplicates"], counts["received"]) == (0, 0, 100), counts
    assert [s["counts"]["delivered"] for s in summary["subscribers"]] == [100, 100, 100]
    assert [s["path"] for s in summary["subscribers"]] == list(paths)


@pytest.mark.parametrize("sut", ["broker-imc", "broker-kafka"])
def test_a_broker_trigger_that_does_not_match_filters_every_event(tmp_path, spark, sut):
    lab = LabSettings(fanout=3, matching=2, partitions=4)
    lines: list[str] = []
    outcome = run(_opts(tmp_path, sut, lab, decoy_every=5), lines.append, live=False)
    assert outcome.status == "completed", "\n".join(lines)
    sent, deliveries = _deliveries(outcome.sut_dir.root)
    taking = ("/subscriber-1", "/subscriber-2")
    measured = [r["event_id"] for r in sent if not r["decoy"]]
    decoys = len(sent) - len(measured)
    assert decoys == 20
    # Each event at each trigger that takes it, once; decoys and the third trigger: nothing.
    assert set(deliveries) == {(event, path) for event in measured for path in taking}
    assert set(deliveries.values()) == {1}
    # The filter dropped the decoys at the two triggers that take events, and every event at
    # the third.
    role = "filter" if sut == "broker-imc" else "dispatcher"
    assert outcome.sut["final_stats"][role]["filtered"] == 2 * decoys + len(sent)
    assert [d["matches"] for d in outcome.sut["subscribers"]] == [True, True, False]
    (summary,) = analyze(spark, [outcome.sut_dir.root], AnalyzeOptions())
    counts = summary["counts"]
    assert (counts["lost"], counts["duplicates"], counts["filtered"]) == (0, 0, decoys), counts
    one, two, three = summary["subscribers"]
    assert (
        one["counts"]
        == two["counts"]
        == {"delivered": len(measured), "lost": 0, "duplicates": 0, "filtered": decoys, "leaked": 0}
    )
    # The trigger that takes nothing: every event filtered there, none lost.
    assert three["counts"] == {
        "delivered": 0,
        "lost": 0,
        "duplicates": 0,
        "filtered": len(sent),
        "leaked": 0,
    }


def test_the_users_system_is_told_each_subscriber_url(tmp_path):
    """External: the receiver takes every path; the user is given one URL per subscription.
    Here the user's system is one of the lab's channels started by hand with two of them."""
    receiver_port = _free_port()
    urls = [f"http://127.0.0.1:{receiver_port}{path}" for path in subscriber_paths(2)]
    argv = [sys.executable, "-m", "suts", "imc-channel", "--retries", "20"]
    system = Child(
        "system", [*argv, *(a for u in urls for a in ("--subscriber", u))], tmp_path / "s.log"
    )
    try:
        port = system.wait_for("listening", 30)["port"]
        lab = LabSettings(ingress=f"http://127.0.0.1:{port}/", fanout=2)
        lines: list[str] = []
        opts = _opts(tmp_path, "external", lab, receiver_port=receiver_port)
        outcome = run(opts, lines.append, live=False)
    finally:
        system.stop()
    told = "\n".join(lines)
    assert all(url in told for url in urls), told
    sent, deliveries = _deliveries(outcome.sut_dir.root)
    assert set(deliveries) == {(r["event_id"], p) for r in sent for p in subscriber_paths(2)}


def test_two_subscriptions_wired_to_one_path_are_named_as_wiring_not_losses(tmp_path, spark):
    """The user's system with both subscriptions pointed at subscriber 1's URL: it gets every
    event twice and subscriber 2 nothing. Read as the system's, that is every event lost and
    duplicated; it is a wiring mistake, said as an instrument failure with what to check."""
    receiver_port = _free_port()
    url = f"http://127.0.0.1:{receiver_port}{subscriber_paths(2)[0]}"
    argv = [sys.executable, "-m", "suts", "imc-channel", "--retries", "20"]
    system = Child("system", [*argv, "--subscriber", url, "--subscriber", url], tmp_path / "s.log")
    try:
        port = system.wait_for("listening", 30)["port"]
        lab = LabSettings(ingress=f"http://127.0.0.1:{port}/", fanout=2)
        opts = _opts(tmp_path, "external", lab, receiver_port=receiver_port)
        outcome = run(opts, [].append, live=False)
    finally:
        system.stop()
    (summary,) = analyze(spark, [outcome.sut_dir.root], AnalyzeOptions())
    one, two = summary["subscribers"]
    assert one["counts"]["delivered"] == 100 == one["counts"]["duplicates"], one["counts"]
    assert two["counts"]["delivered"] == 0, two["counts"]
    (failure,) = summary["instrument_failures"]
    assert "nothing came to /subscriber-2 while /subscriber-1 got each event 2 times" in failure
    assert "wired to one subscriber's path" in failure and "sut_settings.subscribers" in failure
    assert summary["breaking_point_per_s"] is None
    assert all(step["verdict"] != "breaks" for step in summary["steps"]), summary["steps"]


@pytest.mark.parametrize(
    "sut, lab, refused",
    [
        ("direct", LabSettings(fanout=2), "--subscribers 2: direct delivers each event to one"),
        ("source-kafka", LabSettings(fanout=3), "source-kafka delivers each event to one"),
        ("channel-kafka", LabSettings(fanout=3), None),
        ("broker-kafka", LabSettings(fanout=3, matching=2), None),
        ("channel-imc", LabSettings(fanout=3, matching=1), "--matching is for a broker's"),
        ("broker-imc", LabSettings(fanout=2, matching=3), "--matching 3 is more than the 2"),
        ("broker-imc", LabSettings(fanout=2, matching=0), None),
        ("broker-imc", LabSettings(), None),
        ("external", LabSettings(fanout=5), None),
    ],
)
def test_what_a_system_cannot_fan_out_is_said_before_it_starts(sut, lab, refused):
    problem = driver_for(sut).settings_problem(lab)
    assert problem is None if refused is None else refused in problem, problem


def test_every_system_says_whether_it_fans_out():
    # The lab's systems that fan out; a new one must choose (None is a choice, said).
    fanning = {name for name in SUTS if driver_for(name).fanout is not None}
    assert fanning == {"channel-imc", "broker-imc", "channel-kafka", "broker-kafka", "external"}
    with pytest.raises(EvbenchError, match="delivers each event to one"):
        driver_for("direct")(LabSettings(fanout=2), Path("."), "r").start("http://x/")


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
