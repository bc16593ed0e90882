"""Importing 2019 Knative results: parsers on hand-written files, then a real import."""

import json
import subprocess
import sys

import pytest

from contract.documents import RunDoc, problems
from contract.errors import EvbenchError
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from evbench.knative import (
    Samples,
    import_knative,
    parse_mako_csv,
    parse_processed_dir,
    rebuild_events,
    segments,
)
from runtime.parquet import read_parts

T = 1573740000000.0  # ms since the epoch, November 2019

MAKO = f"""# benchmark: eventing-perf
# {{"tags": ["channel-imc"]}}
# inputValue,errorMessage,pl,pe,st,dl,de,dt,pet,det
{T},,0.010,,,,,,,
{T},,,,,0.025,,,,
{T + 1},,0.012,,,,,,,
{T + 2},,0.011,,,,,,,
{T + 2},,,,,0.030,,,,
{T + 3},Publish failure,,,,,,,,
{T + 3},,,,,,,,1,
{T + 1},,,,1,,,,,
,,,1,,,,,,
# CSV end
"""


def test_mako_csv_samples():
    samples = parse_mako_csv(MAKO)
    assert samples.publish == [(T, 10.0), (T + 1, 12.0), (T + 2, 11.0)]  # seconds -> ms
    assert samples.delivery == [(T, 25.0), (T + 2, 30.0)]
    assert samples.send_failures == [T + 3]  # the error row, not also its pet sample


def test_mako_csv_bad_number_names_the_line():
    with pytest.raises(EvbenchError, match=r"x\.csv:2:"):
        parse_mako_csv("# inputValue,errorMessage,pl\n1.0,,zero\n", "x.csv")


def test_events_pair_on_send_time():
    events, unpaired = rebuild_events(
        Samples(
            publish=[(1.0, 5.0), (2.0, 6.0), (2.0, 7.0)],
            delivery=[(2.0, 9.0), (3.0, 1.0)],
            send_failures=[4.0],
        )
    )
    assert [(e.sent_ms, e.publish_ms is not None, e.delivery_ms) for e in events] == [
        (1.0, True, None),
        (2.0, True, 9.0),
        (2.0, True, None),
        (4.0, False, None),
    ]
    assert unpaired == 1  # the delivery at 3.0 had no publish sample


@pytest.mark.parametrize(
    ("times", "expected"),
    [([], []), ([0, 1, 2], [(0, 3)]), ([0, 10, 2000, 2010, 5000], [(0, 2), (2, 4), (4, 5)])],
)
def test_segments_split_on_pauses(times, expected):
    assert segments(times) == expected


def _processed_dir(tmp_path):
    d = tmp_path / "run-2-1k-2k" / "channel-imc"
    d.mkdir(parents=True)
    # two steps of 2 s at 100/s and 200/s, a 2 s pause between; every 10th event lost
    pub, dl, fail = [], [], []
    t = T
    for rate, seconds in ((100, 2), (200, 2)):
        for i in range(rate * seconds):
            x = t + i * 1000 / rate
            if i % 50 == 49:
                fail.append(f"{x},1")
                continue
            pub.append(f"{x},{5 + i % 7}")
            if i % 10:
                dl.append(f"{x},{20 + i % 11}")
        t += seconds * 1000 + 2000
    (d / "points-publish-latency.csv").write_text("\n".join(pub) + "\n")
    (d / "points-delivery-latency.csv").write_text("\n".join(dl) + "\n")
    (d / "send-failure-throughput.csv").write_text("\n".join(fail) + "\n")
    return d, len(pub), len(dl), len(fail)


def test_import_processed_dir_writes_a_run(tmp_path):
    source, published, delivered, failed = _processed_dir(tmp_path)
    sut_dir = import_knative(source, tmp_path / "runs", "run-2", "channel-imc", [100, 200])
    run = json.loads((sut_dir / "run.json").read_text())
    assert problems(run, RunDoc) == []
    assert run["pace"]["steps"] == [
        {"rate_per_s": 100, "duration_s": 2},
        {"rate_per_s": 200, "duration_s": 2},
    ]
    assert run["unpaired_delivery_samples"] == 0 and "intended = sent" in run["notes"]
    sent = read_parts(sut_dir / "sent", SENT_FIELDS).to_pylist()
    received = read_parts(sut_dir / "received", RECEIVED_FIELDS).to_pylist()
    assert len(sent) == published + failed and len(received) == delivered
    assert sum(r["status"] == 0 for r in sent) == failed
    assert {r["step"] for r in sent} == {1, 2}
    with pytest.raises(EvbenchError, match="the pace has 3 steps but the data has 2"):
        import_knative(source, tmp_path / "runs", "run-3", "x", [100, 200, 300])


def test_missing_files_are_named(tmp_path):
    with pytest.raises(EvbenchError, match=r"points-publish-latency\.csv"):
        parse_processed_dir(tmp_path)


def _files(root):
    return sorted(p.relative_to(root) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("run_id", "sut", "kind"),
    [
        ("run-2", "../../x", "SUT name"),
        ("run-2", "{outside}", "SUT name"),  # an absolute path, under tmp_path but not runs/
        ("r" * 300, "channel-imc", "run id"),  # used to end in OSError: File name too long
    ],
)
def test_import_refuses_names_that_leave_runs_dir(tmp_path, run_id, sut, kind):
    source, *_ = _processed_dir(tmp_path)
    sut = sut.format(outside=tmp_path / "outside")
    before = _files(tmp_path)
    with pytest.raises(EvbenchError, match=f"^{kind} .* is not allowed: use 1 to 100 characters"):
        import_knative(source, tmp_path / "runs", run_id, sut, [100, 200])
    assert _files(tmp_path) == before  # nothing written, inside runs/ or out of it


@pytest.mark.e2e
def test_import_cli_says_what_is_wrong_with_a_long_run_id(tmp_path):
    source, *_ = _processed_dir(tmp_path)
    runs = tmp_path / "runs"
    args = ["import-knative", str(source), "--sut", "x", "--run-id", "r" * 300]
    result = subprocess.run(
        [sys.executable, "-m", "evbench", *args, "--runs-dir", str(runs), "--no-analyze"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "run id 'rrrr" in result.stderr
    assert "(300 characters)" in result.stderr and not runs.exists()
