"""The receiver's GET /metrics, as a real process: Prometheus' parser reads in it what was
posted, and the same counts as /stats."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from evbench.instruments import start_receiver
from loadgen.payload import PayloadBuilder
from receivers.limits import Limits
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e

HEADERS = {"ce-specversion": "1.0", "ce-type": "t", "ce-source": "tests"}
MAX_BODY_BYTES = 4096


def _metrics(client: httpx.Client, url: str) -> dict[tuple[str, tuple], float]:
    response = client.get(url + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _post(client: httpx.Client, url: str, ce_id: str, evbenchid: str | None, body: bytes) -> int:
    headers = {**HEADERS, "ce-id": ce_id}
    if evbenchid is not None:
        headers["ce-evbenchid"] = evbenchid
    return client.post(url, content=body, headers=headers).status_code


def test_metrics_count_what_was_posted_as_stats_does(tmp_path):
    child, url = start_receiver(
        tmp_path / "received",
        tmp_path / "receiver.log",
        limits=Limits(max_body_bytes=MAX_BODY_BYTES),
    )
    payloads = PayloadBuilder(1024, longest_id=16, seed=1)
    try:
        with httpx.Client(timeout=5) as client:
            before = _metrics(client, url)
            assert before[("evbench_receiver_events_received_total", ())] == 0
            assert ("evbench_receiver_last_received_timestamp_seconds", ()) not in before
            events = [(f"c-{i}", f"e-{i}", payloads.build(f"e-{i}")) for i in range(5)]
            statuses = [_post(client, url, *event) for event in events]
            # the same event delivered twice: a delivery is counted, telling it a duplicate
            # is the analysis' work (it has every id)
            statuses.append(_post(client, url, "c-0", "e-0", payloads.build("e-0")))
            # an event with no evbench id at all (a foreign one, for the analysis)
            statuses.append(_post(client, url, "other-1", None, b"plain text"))
            assert statuses == [202] * 7
            assert _post(client, url, "bad", None, b"x" * (MAX_BODY_BYTES + 1)) == 413
            malformed = client.post(url, content=b"{}", headers={"ce-id": "no-type"})
            assert malformed.status_code == 400
            wait_until(
                lambda: _metrics(client, url)[("evbench_receiver_rows_written_total", ())] == 7,
                10,
                "the records flushed",
            )
            metrics = _metrics(client, url)
            stats = client.get(url + "/stats").json()
            head = client.head(url + "/metrics")
    finally:
        child.stop()
    assert head.status_code == 200 and head.content == b""

    def value(name: str, **labels: str) -> float:
        return metrics[("evbench_receiver_" + name, tuple(sorted(labels.items())))]

    assert value("events_received_total") == 7 == stats["received"]
    assert value("received_bytes_total") == 6 * 1024 + len(b"plain text") == stats["received_bytes"]
    assert value("requests_malformed_total") == 1 == stats["malformed"]
    assert value("requests_refused_total", status="413") == 1 == stats["refused"]["413"]
    assert value("rows_written_total") == 7 == stats["rows_written"]
    assert value("rows_pending") == 0
    assert value("requests_not_found_total") == 0  # /metrics is served, not a 404
    assert value("connections_accepted_total") == stats["connections"]
    last_s = stats["last_received_ns"] / 1e9
    assert value("last_received_timestamp_seconds") == pytest.approx(last_s, abs=1e-6)
    # the receiver's own collections (read before /stats, so never more than it says)
    assert 0 <= value("gc_pauses_total") <= stats["gc_pauses"]
    assert 0 <= value("gc_pause_max_seconds") <= stats["gc_pause_max_ms"] / 1000
