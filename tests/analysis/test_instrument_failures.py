"""Instrument failures are their own verdict, never a breaking point of the system under test:
crafted runs (every count known) analysed together in one Spark chain, then their reports."""

import json
import shutil

import pytest

from analysis.job import AnalyzeOptions, analyze
from analysis.report import write_index, write_report
from analysis.summary import strict_json
from tests.analysis.crafted import T0, S, craft


def _variant(root, name, run_json=None, drop=()):
    """The crafted SUT directory as system `name` of one run, with run.json changes and
    record directories removed."""
    sut, _ = craft(root / "craft" / name)
    for directory in drop:
        shutil.rmtree(sut / directory)
    run = json.loads((sut / "run.json").read_text())
    run["sut"] = name
    for key, value in (run_json or {}).items():
        if value is None:
            run.pop(key)
        else:
            run[key] = value
    (sut / "run.json").write_text(json.dumps(run))
    return sut.rename(root / "run-x-p" / name)


@pytest.fixture(scope="module")
def analysed(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("instruments")
    (root / "run-x-p").mkdir()
    suts = [
        _variant(root, "healthy"),
        _variant(
            root,
            "receiver-died",
            {"status": "failed", "instrument_failures": ["receiver died (killed by SIGKILL)"]},
        ),
        _variant(root, "empty-received", drop=("received",)),
        _variant(root, "no-sent", drop=("sent",)),
        # What the runner wrote before it kept the schedule start when the sender died.
        _variant(root, "old-killed-sender", {"status": "failed", "schedule": None}),
        _variant(root, "interrupted", {"status": "interrupted"}),
    ]
    summaries = analyze(spark, suts, AnalyzeOptions())
    return {s["sut"]: s for s in summaries}, suts


@pytest.mark.parametrize(
    ("sut", "why"),
    [
        ("receiver-died", "receiver died (killed by SIGKILL)"),
        ("empty-received", "nothing received although 5719 events were acked"),
        ("no-sent", "records missing: no sent records in sent/"),
        ("old-killed-sender", "run.json says the run failed"),
    ],
)
def test_instrument_failure_is_the_verdict_never_a_breaking_point(analysed, sut, why):
    summary = analysed[0][sut]
    assert summary["verdict"].startswith("instrument failed: ") and why in summary["verdict"]
    assert why in " ".join(summary["instrument_failures"])
    assert summary["breaking_point_per_s"] is None
    assert summary["max_sustainable_rate_per_s"] is None
    assert "breaks" not in {step["verdict"] for step in summary["steps"]}


def test_healthy_and_interrupted_runs_keep_their_verdicts(analysed):
    summaries, _ = analysed
    for sut in ("healthy", "interrupted"):
        assert summaries[sut]["instrument_failures"] == []
        assert summaries[sut]["verdict"] == "breaks at 400/s; max sustainable 200/s"
    assert summaries["interrupted"]["status"] == "interrupted"


def test_a_failed_runs_steps_are_judged_up_to_where_records_end(analysed):
    died = analysed[0]["receiver-died"]
    assert [s["verdict"] for s in died["steps"]] == ["holds", "instrument-failed"]
    assert died["counts"] == analysed[0]["healthy"]["counts"]


def test_a_run_json_without_schedule_start_is_analysed_from_its_records(analysed):
    old = analysed[0]["old-killed-sender"]
    # slot 0 (here the crafted warmup's first) is the earliest intended time in sent/
    assert old["schedule_start_ns"] == T0 - 5 * S
    assert old["schedule_start_from"] == "the earliest slot in sent/"
    assert old["counts"]["scheduled"] == 6000


def test_summary_json_is_strict_json(analysed):
    _, suts = analysed

    def refuse(constant):
        raise AssertionError(f"{constant} in summary.json")

    for sut in suts:
        json.loads((sut / "analysis" / "summary.json").read_text(), parse_constant=refuse)


def test_strict_json_turns_non_finite_figures_into_null():
    doc = {"p99": float("nan"), "steps": [{"rise": float("inf")}, (1.5, float("-inf"))]}
    assert json.loads(strict_json(doc)) == {"p99": None, "steps": [{"rise": None}, [1.5, None]]}


def test_reports_say_failed_or_interrupted_at_the_top(analysed):
    _, suts = analysed
    pages = {sut.name: write_report(sut).read_text() for sut in suts}
    top = {name: page[page.index("<h1>") : page.index("<table>")] for name, page in pages.items()}
    assert "Instrument failed" in top["receiver-died"] and "SIGKILL" in top["receiver-died"]
    assert "Instrument failed" in top["no-sent"] and "no sent records" in top["no-sent"]
    assert "Interrupted" in top["interrupted"]
    assert "Instrument failed" not in top["healthy"] and "Interrupted" not in top["healthy"]
    assert "breaks at" not in pages["receiver-died"]

    index = write_index(suts[0].parent, suts).read_text()
    head = index[: index.index("<table>")]
    for name in ("receiver-died", "empty-received", "no-sent", "old-killed-sender"):
        assert f"<h3>{name}</h3><div class='banner failed'>" in head
    assert "<h3>interrupted</h3><div class='banner interrupted'>" in head
    assert "<h3>healthy</h3>" not in head
    assert index.count("<tr class='instrument-failed'>") == 4


def test_the_comparison_table_never_shows_a_failed_run_as_holding(tmp_path):
    from analysis.comparison import write_comparison

    row = {
        "sut": "direct",
        "breaking_point_per_s": None,
        "max_sustainable_rate_per_s": None,
        "p9999_e2e_ms": 1.0,
        "e2e_n": 10,
        "p9999_is_max": True,
        "send_failures": 0,
        "lost": 0,
        "faults": "-",
        "report": tmp_path / "r" / "report.html",
    }
    rows = [
        {**row, "run": "held-run", "instrument_failures": []},
        {**row, "run": "failed-run", "instrument_failures": ["receiver died during the run"]},
    ]
    page = write_comparison(rows, tmp_path / "compare.html").read_text()
    held, failed = page.split("<td class='text'>held-run")[1], page.split("failed-run")[1]
    assert "instrument failed" not in held.split("</tr>")[0]
    assert failed.split("</tr>")[0].count("<td>instrument failed</td>") == 2
    assert "<tr class='instrument-failed'><td class='text'>failed-run" in page
