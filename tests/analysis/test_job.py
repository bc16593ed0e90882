"""The whole analysis on a crafted SUT directory whose every count is known."""

import csv
import json

import pyarrow.parquet as pq
import pytest

from analysis.job import AnalyzeOptions, analyze_sut, sut_dirs
from evbench.errors import EvbenchError, RecordFileError
from evbench.parquet import PartWriter
from evbench.records import INFLIGHT_CAP_ERROR, RECEIVED_FIELDS, SENT_FIELDS

S, MS = 1_000_000_000, 1_000_000
T0 = 1_750_000_000 * S
STEPS = [(200, 10), (400, 10)]  # (rate, seconds); 2 s gap between them


def craft(root):
    """Step 1 is clean. Step 2 loses every 20th acked event, fails every 50th, duplicates
    every 100th delivery; plus 7 foreign deliveries and a warmup that must not count."""
    sut = root / "run-x-p" / "direct"
    sent_w = PartWriter(sut / "sent", SENT_FIELDS)
    recv_w = PartWriter(sut / "received", RECEIVED_FIELDS)
    seq, expected = 0, dict(sent=0, failures=0, lost=0, dup=0, acked=0)
    for i in range(50):  # warmup, delivered
        eid = f"w-{i}"
        t = T0 - 5 * S + i * 20 * MS
        sent_w.append((eid, seq, 0, True, 50, t, t, t + MS, 202, None, 0, 8192))
        recv_w.append((eid, t + 2 * MS, "rx", 8192, eid, "w", "s"))
        seq += 1
    offset = 0
    for number, (rate, seconds) in enumerate(STEPS, start=1):
        for i in range(rate * seconds):
            eid = f"e-{seq}"
            intended = T0 + offset + i * S // rate
            sent_ns = intended + 100_000
            fail = number == 2 and i % 50 == 49
            lose = number == 2 and not fail and i % 20 == 0
            cap = number == 2 and i == 1  # one slot refused by the in-flight cap
            if cap:
                row = (
                    eid,
                    seq,
                    number,
                    False,
                    rate,
                    intended,
                    None,
                    None,
                    0,
                    INFLIGHT_CAP_ERROR,
                    0,
                    8192,
                )
                expected["failures"] += 1
            elif fail:
                row = (
                    eid,
                    seq,
                    number,
                    False,
                    rate,
                    intended,
                    sent_ns,
                    sent_ns + MS,
                    503,
                    "HTTP 503",
                    0,
                    8192,
                )
                expected["failures"] += 1
                expected["sent"] += 1
            else:
                row = (
                    eid,
                    seq,
                    number,
                    False,
                    rate,
                    intended,
                    sent_ns,
                    sent_ns + 2 * MS,
                    202,
                    None,
                    0,
                    8192,
                )
                expected["sent"] += 1
                expected["acked"] += 1
                if lose:
                    expected["lost"] += 1
                else:
                    recv_w.append((eid, intended + 5 * MS, "rx", 8192, eid, "t", "s"))
                    if i % 100 == 7:
                        recv_w.append((eid, intended + 900 * MS, "rx", 8192, eid, "t", "s"))
                        expected["dup"] += 1
            sent_w.append(row)
            seq += 1
            if i % 1000 == 999:  # several part files, as a real run writes
                sent_w.flush()
                recv_w.flush()
        offset += (seconds + 2) * S
    for i in range(7):
        recv_w.append((f"other-{i}", T0 + i * S, "rx", 10, f"other-{i}", "x", "y"))
    sent_w.flush()
    recv_w.flush()
    run = {
        "run_id": "run-x",
        "sut": "direct",
        "status": "completed",
        "pace": {"name": "p", "steps": [{"rate_per_s": r, "duration_s": d} for r, d in STEPS]},
        "schedule": {"start_ns": T0},
    }
    (sut / "run.json").write_text(json.dumps(run))
    return sut, expected


@pytest.fixture(scope="module")
def analysed(spark, tmp_path_factory):
    sut, expected = craft(tmp_path_factory.mktemp("job"))
    summary = analyze_sut(spark, sut, AnalyzeOptions())
    return sut, expected, summary


def test_counts_are_exact(analysed):
    _, expected, summary = analysed
    counts = summary["counts"]
    assert counts["scheduled"] == 200 * 10 + 400 * 10
    assert counts["sent"] == expected["sent"]
    assert counts["send_failures"] == expected["failures"]
    assert counts["acked"] == expected["acked"]
    assert counts["lost"] == expected["lost"]
    assert counts["duplicates"] == expected["dup"]
    assert counts["foreign"] == 7
    assert counts["received"] == expected["acked"] - expected["lost"]  # failures never arrive


def test_latencies_and_steps(analysed):
    _, expected, summary = analysed
    e2e = summary["latency_ms"]["e2e"]
    assert e2e["p50"] == pytest.approx(5.0) and e2e["n"] == expected["acked"] - expected["lost"]
    assert e2e["p9999_is_max"]  # n < 10^4: reported as the maximum
    assert e2e["p9999"] == e2e["max"] == pytest.approx(5.0)
    assert summary["latency_ms"]["publish"]["p50"] == pytest.approx(2.0)  # ack - sent
    assert summary["latency_ms"]["publish_corrected"]["p50"] == pytest.approx(2.1)  # ack - intended
    assert summary["latency_ms"]["publish"]["n"] == expected["acked"]
    one, two = summary["steps"]
    assert one["verdict"] == "holds" and one["achieved_send_rate_per_s"] == pytest.approx(
        200, rel=1e-3
    )
    assert two["verdict"] == "breaks" and any("lost" in r for r in two["reasons"])
    assert two["inflight_cap_refused"] == 1
    assert summary["breaking_point_per_s"] == 400
    assert summary["max_sustainable_rate_per_s"] == 200
    assert summary["thresholds"]["max_lost_ratio"] == 0.001


def test_outputs_on_disk(analysed):
    sut, _, summary = analysed
    out = sut / "analysis"
    assert json.loads((out / "summary.json").read_text()) == json.loads(json.dumps(summary))
    rows = list(csv.DictReader((out / "steps.csv").open()))
    assert [r["verdict"] for r in rows] == ["holds", "breaks"]
    metrics = pq.read_table(out / "metrics.parquet").to_pylist()
    assert sum(m["scheduled"] for m in metrics) == 6000
    assert sum(m["lost"] for m in metrics) == summary["counts"]["lost"]
    seconds = [m["second"] for m in metrics]
    assert seconds == list(range(seconds[0], seconds[-1] + 1))  # the gap between steps is zeros
    digests = pq.read_table(out / "digests.parquet")
    assert set(digests.column("metric").to_pylist()) >= {"publish", "e2e", "sender_lag"}
    line = [
        r for r in pq.read_table(out / "cumulative.parquet").to_pylist() if r["metric"] == "e2e"
    ]
    assert line[-1]["n"] == summary["latency_ms"]["e2e"]["n"]


def test_trim_drops_the_start_and_says_so(spark, tmp_path):
    sut, _ = craft(tmp_path)
    summary = analyze_sut(spark, sut, AnalyzeOptions(trim_s=5))
    assert summary["counts"]["scheduled"] == 200 * 5 + 400 * 10
    assert "first 5 s" in summary["trimmed"]


def test_truncated_file_is_named(spark, tmp_path):
    sut, _ = craft(tmp_path)
    victim = sorted((sut / "received").glob("*.parquet"))[1]
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(RecordFileError, match=victim.name):
        analyze_sut(spark, sut, AnalyzeOptions())


def test_run_directory_lists_its_suts_and_rejects_others(tmp_path):
    sut, _ = craft(tmp_path)
    assert sut_dirs(sut.parent) == [sut] and sut_dirs(sut) == [sut]
    with pytest.raises(EvbenchError, match="neither"):
        sut_dirs(tmp_path / "nothing")
