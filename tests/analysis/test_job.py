"""The whole analysis on a crafted SUT directory whose every count is known."""

import csv
import json
import shutil

import pyarrow.parquet as pq
import pytest

from analysis.job import AnalyzeOptions, analyze, analyze_sut, sut_dirs
from contract.errors import EvbenchError, RecordFileError
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from evbench.knative import import_knative
from runtime.parquet import read_parts
from tests.analysis.crafted import T0, craft


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
    # Failures never arrive, nor do decoys the filter dropped (which are not lost either).
    assert counts["received"] == expected["acked"] - expected["lost"] - expected["filtered"]
    assert (counts["filtered"], counts["leaked"]) == (expected["filtered"], expected["leaked"])
    assert expected["filtered"] > 0 and expected["leaked"] == 1


def test_latencies_and_steps(analysed):
    _, expected, summary = analysed
    e2e = summary["latency_ms"]["e2e"]
    assert e2e["p50"] == pytest.approx(5.0) and e2e["n"] == (
        expected["acked"] - expected["lost"] - expected["filtered"]
    )
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
    # Step 1 lost its first 5 s of 10 to the trim: its 1,000 deliveries came over the 5 s
    # left, its pace, not 100/s over its whole duration (issue 51, item 9.1).
    one, two = summary["steps"]
    assert one["delivered_rate_per_s"] == pytest.approx(200) and one["verdict"] == "holds", one
    assert "ran_s" not in one and one["duration_s"] == 10
    assert two["delivered_rate_per_s"] < 400  # untouched: its losses over its whole 10 s


def test_a_record_file_copied_under_another_name_is_counted_once_and_said(
    spark, tmp_path, analysed
):
    """A part copied within its directory (say, by hand, to keep it) holds the same rows: read
    twice, step 1's sent would grow by its 1,000 and its deliveries would count as duplicates
    (issue 51, item 9.3). Each file says what it holds: the copy is left out and named."""
    _, _, whole = analysed
    sut, _ = craft(tmp_path)
    sent = sorted((sut / "sent").glob("*.parquet"))[1]
    received = sorted((sut / "received").glob("*.parquet"))[1]
    copies = [sut / "sent" / "kept-aside.parquet", sut / "received" / "part-000099.parquet"]
    shutil.copyfile(sent, copies[0])
    shutil.copyfile(received, copies[1])
    said: list[str] = []
    (summary,) = analyze(spark, [sut], AnalyzeOptions(), said.append)
    assert summary["counts"] == whole["counts"]
    assert [s["scheduled"] for s in summary["steps"]] == [2000, 4000]
    assert summary["ignored_files"] == [
        f"{copies[0]}: the same parts as {sent.name} (a copy): ignored",
        f"{copies[1]}: the same parts as {received.name} (a copy): ignored",
    ]
    assert [line for line in said if "ignored" in line] == [
        f"direct: {text}" for text in summary["ignored_files"]
    ]
    assert "ignored_files" not in whole


def test_truncated_file_is_named(spark, tmp_path):
    sut, _ = craft(tmp_path)
    victim = sorted((sut / "received").glob("*.parquet"))[1]
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(RecordFileError, match=victim.name):
        analyze_sut(spark, sut, AnalyzeOptions())


def test_run_directory_lists_its_suts_and_rejects_others(tmp_path):
    sut, _ = craft(tmp_path)
    assert sut_dirs(sut.parent) == [sut] and sut_dirs(sut) == [sut]
    with pytest.raises(EvbenchError, match="no such directory"):
        sut_dirs(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EvbenchError, match="neither"):
        sut_dirs(tmp_path / "empty")


def test_export_knative_two_column_files(spark, tmp_path):
    sut, expected = craft(tmp_path)
    summary = analyze_sut(spark, sut, AnalyzeOptions(export_knative=True))
    out = sut / "analysis" / "knative"

    def rows(name):
        lines = (out / name).read_text().splitlines()
        return [(float(x), float(y)) for x, y in (line.split(",") for line in lines)]

    publish = rows("points-publish-latency.csv")
    assert len(publish) == expected["acked"]
    assert [x for x, _ in publish] == sorted(x for x, _ in publish)
    assert {round(y, 6) for _, y in publish} == {2.0}
    assert publish[0][0] == pytest.approx(T0 / 1e6 + 0.1, abs=1e-3)  # ms since the epoch
    delivery = rows("points-delivery-latency.csv")
    assert len(delivery) == summary["counts"]["received"]
    sends = rows("send-throughput.csv")
    assert len(sends) == summary["counts"]["sent"]
    assert sends[0][1] == 1 and max(y for _, y in sends) == 400  # trailing 1 s at 400/s
    assert len(rows("send-failure-throughput.csv")) == expected["failures"]
    assert len(rows("delivery-failure-throughput.csv")) == expected["lost"]
    line = rows("p99-99-delivery-latency.csv")
    assert line and [x for x, _ in line] == sorted(x for x, _ in line)
    assert {"p99-publish-latency.csv", "p99-9-delivery-latency.csv"} <= {
        p.name for p in out.iterdir()
    }
    # the export reads back through the 2019 importer: same events, same outcomes
    back = import_knative(out, tmp_path / "again", "rt", "direct", [200, 400])
    sent = read_parts(back / "sent", SENT_FIELDS).to_pylist()
    assert len(sent) == expected["acked"] + expected["failures"]
    assert len(read_parts(back / "received", RECEIVED_FIELDS)) == summary["counts"]["received"]


def test_failures_are_counted_by_cause_alike_in_every_place(analysed):
    # Step 2's failures are every 50th event's 503 and one slot the in-flight cap refused
    # (crafted.py): one count per cause, the same in the run's counts and its step's row, and
    # the step's reason gives the row's number with them (runtime.failcause).
    _, expected, summary = analysed
    causes = {"HTTP 503": expected["failures"] - 1, "in-flight cap": 1}
    assert summary["counts"]["failures_by_cause"] == causes
    one, two = summary["steps"]
    assert one["failures_by_cause"] == {} and two["failures_by_cause"] == causes
    assert sum(two["failures_by_cause"].values()) == two["send_failures"]
    assert two["verdict"] == "breaks", two["reasons"]
    n503 = causes["HTTP 503"]
    assert f"{n503 + 1} send failures of 4000 (HTTP 503 {n503}, in-flight cap 1)" in two["reasons"]
