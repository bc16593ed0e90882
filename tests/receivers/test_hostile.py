"""The hostile-input suite: over 10,000 requests of ~30 hostile kinds, then valid events.

Afterwards the receiver must be up, its memory within what its limits allow, every valid event
sent after the storm recorded exactly once, and no traceback in its log.
"""

import asyncio
import threading
from collections import Counter

import httpx
import psutil
import pytest

from contract.records import RECEIVED_FIELDS
from receivers.limits import MIB, Limits
from runtime.parquet import read_parts
from suts.hostile import KINDS, SLOW_KINDS, binary_event, storm, table
from tests.conftest import wait_until
from tests.receivers.test_limits import _exchange

pytestmark = pytest.mark.e2e

ROUNDS = 140
SLOW_EACH = 30
CONCURRENCY = 16
LIMITS = Limits(header_timeout_s=1.0, body_timeout_s=1.0, idle_timeout_s=2.0)
# Every client holds at most one request: its headers (cut off at 64 KiB plus one 256 KiB read)
# or its body (1 MiB), and up to 64 KiB of queued answers. 16 clients at once pin ~23 MiB;
# 64 MiB over the idle baseline leaves room for the allocator and is 15x below what the storm
# took before the limits (1 GB for 60 clients).
ALLOWED_GROWTH_BYTES = 64 * MIB

# What each kind may be answered. "reset": the receiver closed a connection whose request it
# refused before reading it all, and the kernel reset it before the client read the answer.
EXPECTED = {
    "garbage bytes": {"400", "408", "431", "closed"},
    "fuzzed event": {"202", "400", "404", "408", "413", "414", "417", "431", "501", "closed"},
    "1 MB header": {"431", "reset"},
    "10,000 headers": {"431", "reset"},
    "2 MB chunked body": {"413", "reset"},
    "16 KB URL": {"414"},
    "declares a 100 MB body": {"413"},
    "Expect: 100-continue": {"100", "202"},
    "Expect: something else": {"417"},
    "HEAD /healthz": {"200"},
    "CONNECT": {"501"},
    "Upgrade: websocket": {"501"},
    "PUT to an unknown path": {"404"},
    "cut off mid-body": {"none"},  # the client gives up first; the receiver times it out later
    "slowloris: headers never end": {"408"},
    "body never ends": {"408"},
    "connects, says nothing": {"closed"},
}


def _sample_rss(pid: int, stop: threading.Event, peak: list[int]) -> None:
    process = psutil.Process(pid)
    while not stop.wait(0.02):
        peak[0] = max(peak[0], process.memory_info().rss)


def test_hostile_storm_leaves_the_receiver_up_bounded_and_recording(tmp_path):
    from evbench.instruments import start_receiver

    out = tmp_path / "received"
    child, url = start_receiver(out, tmp_path / "receiver.log", name="rx", limits=LIMITS)
    try:
        baseline_bytes = psutil.Process(child.pid).memory_info().rss
        peak = [baseline_bytes]
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_rss, args=(child.pid, stop, peak))
        sampler.start()
        try:
            tally = asyncio.run(storm(url, ROUNDS, CONCURRENCY, slow=SLOW_EACH))
        finally:
            stop.set()
            sampler.join()
        print("\n" + table(tally))
        print(f"receiver RSS: idle {baseline_bytes / MIB:.0f} MiB, peak {peak[0] / MIB:.0f} MiB")

        assert sum(tally.values()) >= 10_000
        answers: dict[str, set[str]] = {}
        for (kind, answer), _count in tally.items():
            answers.setdefault(kind, set()).add(answer)
        for kind in KINDS + SLOW_KINDS:
            expected = EXPECTED.get(kind.name, {"200"} if "pipelined" in kind.name else {"400"})
            assert answers[kind.name] <= expected, (kind.name, answers[kind.name])
        assert peak[0] - baseline_bytes < ALLOWED_GROWTH_BYTES

        # Up, answering, and recording: valid events after the storm, each recorded once.
        assert httpx.get(url + "/healthz").status_code == 200
        port = int(url.rsplit(":", 1)[1])
        for i in range(200):
            assert _exchange(port, binary_event(b"after-%d" % i)).startswith(b"HTTP/1.1 202")
        stats = httpx.get(url + "/stats").json()
        assert stats["internal_errors"] == 0 and stats["quarantined"] == 0
        wait_until(lambda: child.alive(), 1, "the receiver alive")
    finally:
        assert child.stop() == 0
    ids = Counter(read_parts(out, RECEIVED_FIELDS).column("event_id").to_pylist())
    after = {eid: n for eid, n in ids.items() if eid.startswith("after-")}
    assert after == {f"after-{i}": 1 for i in range(200)}
    assert "Traceback" not in (tmp_path / "receiver.log").read_text()
