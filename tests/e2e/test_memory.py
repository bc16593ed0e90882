"""`evbench memory` as a user runs it: a short scenario on a real broker, a real consumer."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter

import pytest

from contract.records import CONSUMER_LAG_FIELDS, MEMORY_SAMPLE_FIELDS, RECEIVED_FIELDS
from runtime.parquet import read_parts
from tests.browser import console_errors, drawn, render

pytestmark = pytest.mark.e2e

# (confluent-lowmem is confluent's process with other settings: tests/evbench/test_memory_pure.)
CONSUMERS = ("source", "dispatcher", "confluent", "aiokafka", "kafka-python")


def _memory(tmp_path, *args: str) -> list[str]:
    # 12 s: a group is assigned after 3-4 s on Tansu, 400 events drain in about a second, and the
    # plateau needs 2 s after the drain, so a machine twice as slow still has margin.
    return [
        sys.executable, "-m", "evbench", "memory", "--partitions", "2", "--fill-events", "400",
        "--consume", "12", "--runs-dir", str(tmp_path), "--run-id", "m", *args,
    ]  # fmt: skip


def _ran(tmp_path, *args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_memory(tmp_path, *args), capture_output=True, text=True,
                          timeout=timeout_s)  # fmt: skip


@pytest.mark.browser
@pytest.mark.spark  # the run ends by analysing
def test_a_short_scenario_records_series_figures_and_lag(tmp_path):
    done = _ran(tmp_path, "--consumers", ",".join(CONSUMERS))
    assert done.returncode == 0, done.stderr[-3000:]
    for name in (f"{c}-p2" for c in CONSUMERS):
        scenario = tmp_path / "m-memory" / name
        result = json.loads((scenario / "scenario.json").read_text())
        assert result["produced"] == 400 == result["consumed"], name
        assert result["never_consumed"] == [] and result["first_message_s"] > 0, name
        figures = result["figures"]
        # idle before the first message, more while draining, a plateau once settled
        assert 0 < figures["idle_bytes"] < figures["peak_bytes"], name
        assert figures["plateau_bytes"] > 0 and figures["returned_to_idle"] is not None, name
        assert result["predicted_buffer_bytes"] > 0 and result["predicted_formula"], name
        samples = read_parts(scenario / "samples" / "memory", MEMORY_SAMPLE_FIELDS).to_pylist()
        assert len(samples) >= 5 and all(s["rss_bytes"] > 0 for s in samples), name
        assert samples[-1]["consumed"] == 400, name
        lag = read_parts(scenario / "samples" / "consumer-lag", CONSUMER_LAG_FIELDS).to_pylist()
        assert sorted(r["partition"] for r in lag) == [0, 1], name
        assert all(r["lag"] == 0 for r in lag), name  # drained and committed
    assert re.search(r"\d+ s  rss +[\d.]+ MiB .* consumed \d+/400", done.stderr)  # progress
    assert "GROUP" in done.stderr and "LOG-END-OFFSET" in done.stderr  # the describe table
    assert "back to idle" in done.stderr  # the peak table
    # analysed like every run: the series through Spark, then the report
    summary = json.loads((tmp_path / "m-memory" / "memory-summary.json").read_text())
    assert [row["scenario"] for row in summary["scenarios"]] == [f"{c}-p2" for c in CONSUMERS]
    assert all(row["figures"]["peak_bytes"] > 0 for row in summary["scenarios"])
    dom, console = render(tmp_path / "m-memory" / "report.html", tmp_path)
    assert console_errors(console) == []
    assert drawn(dom, "memory-over-time")
    assert "LOG-END-OFFSET" in dom and "back to idle" in dom


def test_a_killed_consumer_leaves_its_lag_reported(tmp_path):
    run = subprocess.Popen(
        _memory(tmp_path, "--consumers", "confluent", "--no-analyze"),
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(180, run.kill)  # a hang fails the test instead of the suite
    watchdog.start()
    try:
        lines = []
        for line in run.stderr:
            lines.append(line)
            if started := re.search(r"consumer confluent started, pid (\d+)", line):
                os.kill(int(started.group(1)), signal.SIGKILL)  # before it has joined its group
                break
        lines += run.stderr.readlines()
        code = run.wait()
    finally:
        watchdog.cancel()
        run.kill()
    assert code == 0, "".join(lines)[-3000:]
    result = json.loads((tmp_path / "m-memory" / "confluent-p2" / "scenario.json").read_text())
    assert result["exit"] == "died during the run" and result["exit_code"] == -signal.SIGKILL
    assert [r["partition"] for r in result["lag"]] == [0, 1]
    assert sum(r["end"] for r in result["lag"]) == result["produced"] == 400
    assert sum(r["lag"] for r in result["lag"]) == 400  # it committed nothing
    assert result["never_consumed"] == [0, 1]
    assert any("the consumer died during the run" in line for line in lines)
    assert any("GROUP" in line and "LOG-END-OFFSET" in line for line in lines)


def test_a_scenario_interrupted_while_its_consumer_drains_is_listed_as_cut_short(tmp_path):
    # Two scenarios; Ctrl-C once the first one's consumer runs: that one is cut short and said
    # so in memory.json (not dropped), the second is never run, and the exit is 130.
    run = subprocess.Popen(
        _memory(tmp_path, "--consumers", "confluent,aiokafka", "--no-analyze"),
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(180, run.kill)  # a hang fails the test instead of the suite
    watchdog.start()
    try:
        lines = []
        for line in run.stderr:
            lines.append(line)
            if "consumer confluent started" in line:
                run.send_signal(signal.SIGINT)
                break
        lines += run.stderr.readlines()
        code = run.wait()
    finally:
        watchdog.cancel()
        run.kill()
    assert code == 130, "".join(lines)[-3000:]
    memory = json.loads((tmp_path / "m-memory" / "memory.json").read_text())
    assert memory["interrupted"] and memory["scenarios"] == [], memory
    (cut,) = memory["cut_short"]
    assert cut["scenario"] == "confluent-p2" and 0 < cut["after_s"] < 60, cut
    assert "interrupted" in cut["reason"], cut
    assert any("confluent-p2 cut short after" in line for line in lines), lines[-5:]
    assert not (tmp_path / "m-memory" / "aiokafka-p2" / "scenario.json").exists()


def test_a_consumer_under_a_too_small_memory_limit_is_reported_with_its_starved_partitions(
    tmp_path,
):
    # 40 MiB of data segment holds the interpreter and the client but not librdkafka's broker
    # threads (their stacks count): the consumer lives on, says why, and reads nothing.
    done = _ran(tmp_path, "--consumers", "confluent", "--memory-limit-mib", "40", "--no-analyze")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "m-memory" / "confluent-p2" / "scenario.json").read_text())
    assert result["memory_limit_bytes"] == 40 * 2**20
    assert result["never_consumed"] == [0, 1] and result["consumed"] == 0
    assert result["logged_errors"], "the consumer's own account of the shortage"
    assert "partitions never consumed: 0, 1" in done.stderr
    assert "consumer logged:" in done.stderr


@pytest.mark.spark  # the run ends by analysing
def test_the_dispatchers_subscriptions_each_drain_the_backlog_beside_seed_003s_rule(tmp_path):
    done = _ran(tmp_path, "--consumers", "dispatcher", "--subscriptions", "1,3")
    assert done.returncode == 0, done.stderr[-3000:]
    results = {
        n: json.loads((tmp_path / "m-memory" / f"dispatcher-p2.fanout-{n}" / "scenario.json")
                      .read_text())
        for n in (1, 3)
    }  # fmt: skip
    for n, result in results.items():
        # Drained when every subscription's group had every event: 3 x 400 deliveries.
        assert result["subscriptions"] == n and result["consumed"] == 400 * n, result
        assert result["drained_s"] is not None, result
        # Seed 003's rule for the 2019 dispatcher: partitions x subscriptions x 256 x event.
        assert result["seed_rule_bytes"] == 2 * n * 256 * 8192, result
    one, three = results[1], results[3]
    assert three["predicted_buffer_bytes"] == 3 * one["predicted_buffer_bytes"]
    assert three["predicted_formula"].startswith("3 subscriptions x (")
    assert "seed 003 MiB" in done.stderr  # the table puts the rule beside the peak
    # Each subscription delivered every event to its own path at the receiver.
    received = tmp_path / "m-memory" / "dispatcher-p2.fanout-3" / "received"
    paths = Counter(r["subscriber"] for r in read_parts(received, RECEIVED_FIELDS).to_pylist())
    assert paths == {f"/subscriber-{n}": 400 for n in (1, 2, 3)}, paths
    # Analysed by scenario: each folder's series read, none empty.
    summary = json.loads((tmp_path / "m-memory" / "memory-summary.json").read_text())
    rows = {row["scenario"]: row for row in summary["scenarios"]}
    assert set(rows) == {"dispatcher-p2.fanout-1", "dispatcher-p2.fanout-3"}
    assert all(row["figures"]["peak_bytes"] > 0 for row in rows.values())


def test_subscriptions_are_the_dispatchers_alone(tmp_path):
    done = _ran(tmp_path, "--consumers", "dispatcher,source", "--subscriptions", "2", timeout_s=60)
    assert done.returncode == 2, done.stderr
    assert "only the dispatcher has subscriptions" in done.stderr
    assert "not source: give --consumers dispatcher" in done.stderr
    assert not (tmp_path / "m-memory").exists()  # refused before anything was made
