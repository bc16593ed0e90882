"""The sender's /metrics (--sender-metrics-port), scraped during real runs against a real
receiver and read with Prometheus' parser: one sender, and a Locust fleet's master."""

from __future__ import annotations

import signal
import time
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from contract.records import SENT_FIELDS
from loadgen.histogram import BOUNDS_NS
from loadgen.settings import SenderSettings, SendKnobs
from runtime.parquet import read_parts
from runtime.procs import Child

pytestmark = pytest.mark.e2e

P = "evbench_sender_"
HISTOGRAMS = ("lag_seconds", "publish_latency_seconds")


def _scrape(client: httpx.Client, url: str) -> dict[str, Any] | None:
    """Every sample by name (a histogram's buckets as a list in `le` order); None once the
    sender has gone."""
    try:
        text = client.get(url).text
    except httpx.TransportError:
        return None
    figures: dict[str, Any] = {f"{P}{name}_bucket": [] for name in HISTOGRAMS}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                figures[sample.name].append((float(sample.labels["le"]), sample.value))
            else:
                figures[sample.name] = sample.value
    return figures


def _buckets(figures: dict[str, Any], name: str) -> list[float]:
    """A histogram's cumulative bucket counts, checked for Prometheus' shape on the way."""
    pairs = figures[f"{P}{name}_bucket"]
    bounds = [le for le, _ in pairs]
    assert bounds == sorted(bounds) and bounds[-1] == float("inf")
    counts = [count for _, count in pairs]
    assert counts == sorted(counts), f"{name}: buckets not cumulative: {counts}"
    assert counts[-1] == figures[f"{P}{name}_count"]
    return counts


def _check(figures: dict[str, Any]) -> None:
    """What holds at any instant: nothing is in a histogram before it is counted."""
    lag, publish = (_buckets(figures, name)[-1] for name in HISTOGRAMS)
    sent, acked = figures[P + "events_sent_total"], figures[P + "events_acked_total"]
    assert publish <= acked <= sent and lag <= sent


def _settled(figures: dict[str, Any]) -> bool:
    """Between steps: every event answered, every record flushed into the histograms."""
    sent = figures[P + "events_sent_total"]
    return bool(
        sent
        and figures[P + "events_in_flight"] == 0
        and figures[P + "lag_seconds_count"] == sent
        and figures[P + "publish_latency_seconds_count"] == figures[P + "events_acked_total"]
    )


def _between(figures: dict[str, Any], after_step: int) -> bool:
    """After step `after_step`, before the next: its number still shown, no target rate."""
    return bool(
        figures[P + "step"] == after_step and figures[P + "target_rate_events_per_second"] == 0
    )


def _expected(rows: list[dict], start: str, end: str) -> list[int]:
    """The cumulative buckets the records make, counted here one row at a time."""
    values = [max(0, r[end] - r[start]) for r in rows if r[end] is not None]
    return [sum(v <= bound for v in values) for bound in BOUNDS_NS] + [len(values)]


def _follow(child: Child, url: str) -> tuple[list[dict[str, Any]], list[dict]]:
    """Scrape every 50 ms until the sender is gone; its scrapes and its lines."""
    scrapes = []
    with httpx.Client(timeout=2) as client:
        while (figures := _scrape(client, url)) is not None:
            _check(figures)
            scrapes.append(figures)
            time.sleep(0.05)
    lines = []
    while (line := child.next_line(30)) is not None:
        lines.append(line)
    return scrapes, lines


def test_a_senders_metrics_follow_its_run_and_add_up_to_its_records(tmp_path, receiver):
    settings = SenderSettings(
        target=receiver.url + "/",
        pace="300:1,300:1",
        out=tmp_path / "sent",
        knobs=SendKnobs(step_gap_s=0.8, metrics_port=0),
        start_delay_s=0.2,
        flush_interval_s=0.2,
        metrics_lines=True,  # its last one, after every record is flushed, for the done line
    )
    child = settings.start(tmp_path / "sender.log")
    try:
        listening = child.wait_for("metrics_listening", 30)
        assert listening["host"] == "127.0.0.1" and listening["port"] > 0
        scrapes, lines = _follow(child, listening["url"])
        assert child.wait(10) == 0
    finally:
        child.stop()
    rows = read_parts(tmp_path / "sent", SENT_FIELDS).to_pylist()
    assert max(s[P + "target_rate_events_per_second"] for s in scrapes) == 300
    # Between the steps (step 1 done, no target yet: a sender caught up within a step is
    # settled too), the scrape is exactly the first step's records.
    settled = next(s for s in scrapes if _settled(s) and _between(s, after_step=1))
    first = [r for r in rows if r["step"] == 1]
    assert settled[P + "events_sent_total"] == len(first) == 300
    assert settled[P + "target_rate_events_per_second"] == 0
    assert _buckets(settled, "lag_seconds") == _expected(first, "intended_ns", "sent_ns")
    assert _buckets(settled, "publish_latency_seconds") == _expected(first, "sent_ns", "ack_ns")
    lag_sum_s = sum(r["sent_ns"] - r["intended_ns"] for r in first) / 1e9
    assert settled[P + "lag_seconds_sum"] == pytest.approx(lag_sum_s, abs=1e-6)
    # The last figures, after the last flush, are the done line's and all of the records'.
    done = lines[-1]
    last = [line for line in lines if line["event"] == "metrics"][-1]
    assert done["event"] == "done" and (done["sent"], done["ok"]) == (600, 600)
    assert (last["sent"], last["ok"], last["failures"], last["inflight"]) == (600, 600, 0, 0)
    assert _cumulative(last["lag"]["counts"]) == _expected(rows, "intended_ns", "sent_ns")
    latency = _cumulative(last["publish_latency"]["counts"])
    assert latency == _expected(rows, "sent_ns", "ack_ns")


def _cumulative(counts: list[int]) -> list[int]:
    return [sum(counts[: i + 1]) for i in range(len(counts))]


def test_a_fleets_master_serves_its_workers_figures_summed(tmp_path, receiver):
    settings = SenderSettings(
        target=receiver.url + "/",
        pace="200:1",
        out=tmp_path / "sent",
        knobs=SendKnobs(metrics_port=0),
        start_delay_s=0.2,
        flush_interval_s=0.2,
    )
    master, workers = settings.start_fleet(2, tmp_path / "logs")
    try:
        listening = master.wait_for("metrics_listening", 30)
        done = master.wait_for("done", 60)
        # The master writes Locust's reports before it quits: time for one more scrape.
        with httpx.Client(timeout=2) as client:
            final = _scrape(client, listening["url"])
        # Its reports are not under test: no need to wait the seconds they take.
        master.signal(signal.SIGKILL)
    finally:
        for child in [master, *workers]:
            child.stop()
    assert final is not None and done["sent"] == 200
    assert final[P + "events_sent_total"] == 200 == final[P + "events_acked_total"]
    assert final[P + "events_in_flight"] == 0
    rows = read_parts(tmp_path / "sent", SENT_FIELDS).to_pylist()
    assert {r["worker"] for r in rows} == {0, 1}
    assert _buckets(final, "lag_seconds") == _expected(rows, "intended_ns", "sent_ns")
    assert _buckets(final, "publish_latency_seconds") == _expected(rows, "sent_ns", "ack_ns")
