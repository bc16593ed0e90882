"""run.json of a collected run, from senders' summary files and receivers' counters (pure)."""

from contract.documents import RunDoc, problems
from evbench.collect import collected_document
from loadgen.settings import SenderSettings, SendKnobs


def _summary(worker, workers, interrupted=False, host="pod-a"):
    settings = SenderSettings(
        target="http://broker/", pace="200:2", out="sent", knobs=SendKnobs(payload_bytes=1024),
        worker=worker, workers=workers,
    )  # fmt: skip
    step = {
        "step": 1, "warmup": False, "target_rate_per_s": 200, "duration_s": 2,
        "worker_target_rate_per_s": 200 / workers, "scheduled": 400 // workers,
        "sent": 400 // workers, "ok": 400 // workers, "failures": 0, "inflight_cap_refused": 0,
        "achieved_send_rate_per_s": 200.0, "lag_p50_ms": 0.1, "lag_p99_ms": 0.5,
        "lag_max_ms": 1.0, "wake_jitter_p99_ms": 0.1, "wake_jitter_max_ms": 0.2,
        "gc_ms": 1.0, "gc_collected": 0,
    }  # fmt: skip
    return {
        "start_ns": 1_700_000_000_000_000_000, "worker": worker, "workers": workers,
        "interrupted": interrupted, "stop_reason": "SIGINT" if interrupted else None,
        "steps": [step], "sent": step["sent"], "ok": step["ok"], "failures": 0,
        "inflight_cap_refused": 0, "unanswered_at_end": 0, "timed_out": 0, "precise_timer": True,
        "rows_written": step["sent"], "parts_written": 1, "flush_errors": 0, "run_tag": "t",
        "wall_s": 2.5, "host": host, "argv": settings.argv(),
    }  # fmt: skip


RX = {
    "received": 400, "malformed": 0, "invalid_ids": 0, "not_found": 0, "refused": {},
    "timed_out": 0, "idle_closed": 0, "refused_connections": 0, "internal_errors": 0,
    "received_bytes": 400 * 1024, "connections": 3, "open_connections": 0, "rows_written": 400,
    "parts_written": 1, "quarantined": 0, "write_errors": 0, "unwritten_rows": 0,
    "first_received_ns": 5, "last_received_ns": 9,
}  # fmt: skip


def test_one_sender():
    doc = collected_document(
        "c", "channel-imc", [_summary(0, 1)], [RX], ["http://s"], ["http://r:8080"]
    )
    assert problems(doc, RunDoc) == []
    assert (doc["status"], doc["payload_bytes"], doc["pace"]["spec"]) == (
        "completed",
        1024,
        "200:2",
    )
    assert doc["schedule"]["start_ns"] == 1_700_000_000_000_000_000
    assert doc["hosts"] == {"sender": "pod-a", "receiver": "r"}
    assert doc["clock"]["sender_receiver_same_host"] is False
    assert doc["receiver"]["stats"] == RX
    # run.json keeps the sender's done line, as a local run's: not where it ran or its argv
    summary = doc["sender"]["summary"]
    assert summary["event"] == "done" and not {"host", "argv"} & summary.keys()


def test_a_fleet_with_a_missing_worker_is_a_failed_run():
    rx1 = {**RX, "gc_pauses": 4, "gc_pause_max_ms": 3.0}
    rx2 = {**RX, "gc_pauses": 6, "gc_pause_max_ms": 7.5}
    senders = [_summary(0, 3), _summary(2, 3, host="pod-c")]
    doc = collected_document("c", "x", senders, [rx1, rx2], ["a", "c"], ["r1", "r2"])
    assert problems(doc, RunDoc) == []
    assert doc["status"] == "failed"
    assert doc["instrument_failures"] == [
        "sender fleet lost 1 of 3 workers (worker 1: its summary was not collected)"
    ]
    stats = doc["receiver"]["stats"]  # two receivers: counts add up, first/last are extremes
    assert (stats["received"], stats["first_received_ns"], stats["last_received_ns"]) == (800, 5, 9)
    assert (stats.get("gc_pauses"), stats.get("gc_pause_max_ms")) == (10, 7.5)  # the longest
    assert doc["hosts"]["sender"] == "pod-a, pod-c"


def test_an_interrupted_sender_makes_an_interrupted_run():
    doc = collected_document("c", "x", [_summary(0, 1, interrupted=True)], [RX], ["s"], ["r"])
    assert (doc["status"], doc["interrupted"]) == ("interrupted", True)
