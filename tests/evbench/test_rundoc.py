"""run.json's builder is a pure function of the run's options and outcome."""

from pathlib import Path

import pytest

from contract.documents import RunDoc, problems
from contract.layout import SutDir
from evbench.options import RunOptions, RunOutcome
from evbench.rundoc import Environment, run_document, spanning_clocks
from loadgen.pace import parse_pace
from loadgen.settings import SendKnobs

ENV = Environment("host-a", {"python": "3.11"}, {"cpus": 2}, ["evbench", "run"])
OPTS = RunOptions(
    pace=parse_pace("100:2,200:2", name="p"),
    runs_dir=Path("runs"),
    send=SendKnobs(warmup="5s@10"),
)


def _doc(outcome, status=None, has_warmup=True):
    return run_document(
        OPTS, OPTS.pace, "r1", has_warmup, outcome, {"sender": 1}, ENV, 1, 2, status
    )


@pytest.mark.parametrize(
    ("outcome_status", "status", "written", "interrupted"),
    [
        ("completed", None, "completed", False),
        ("interrupted", None, "interrupted", True),
        ("failed", None, "failed", False),
        ("failed", "running", "running", False),  # the copy written at the schedule start
    ],
)
def test_status_and_interrupted(outcome_status, status, written, interrupted):
    doc = _doc(RunOutcome(SutDir(Path("x")), outcome_status), status)
    assert problems(doc, RunDoc) == []
    assert (doc["status"], doc["interrupted"]) == (written, interrupted)


def test_the_schedule_start_comes_from_the_runner_or_else_the_senders_summary():
    outcome = RunOutcome(SutDir(Path("x")), "completed", sender={"start_ns": 42})
    assert _doc(outcome)["schedule"]["start_ns"] == 42
    outcome.schedule_start_ns = 7
    assert _doc(outcome)["schedule"]["start_ns"] == 7


def test_a_warmup_is_recorded_only_when_the_run_had_one():
    outcome = RunOutcome(SutDir(Path("x")), "completed")
    assert _doc(outcome)["schedule"]["warmup"] == "5s@10"
    assert _doc(outcome, has_warmup=False)["schedule"]["warmup"] is None
    doc = _doc(outcome)
    assert doc["pace"]["steps"] == [
        {"rate_per_s": 100, "duration_s": 2},
        {"rate_per_s": 200, "duration_s": 2},
    ]
    assert (doc["pace"]["events"], doc["hosts"]["sender"], doc["command"]) == (
        600,
        "host-a",
        ["evbench", "run"],
    )


def _at(at_ns: int, offset_ns: int) -> dict:
    return {"at_ns": at_ns, "offset_ns": offset_ns, "bound_ns": 50_000, "exchanges": 16,
            "kept": 8, "min_delay_ns": 100_000}  # fmt: skip


def _c(before, after, errors=()):
    return {"url": "http://r/clock", "before": before, "after": after, "errors": list(errors)}


@pytest.mark.parametrize(
    ("in_turn", "spanned"),
    [
        # one probe: its own offsets
        ([{"0": _c(_at(1, 10), _at(2, 11))}], {"0": _c(_at(1, 10), _at(2, 11))}),
        # several: the first's before, the last's after
        ([{"0": _c(_at(1, 10), _at(2, 11))}, {"0": _c(_at(3, 12), _at(4, 13))},
          {"0": _c(_at(5, 14), _at(6, 15))}],
         {"0": _c(_at(1, 10), _at(6, 15))}),
        # the first could not measure before: the next before stands in; errors kept once each
        ([{"0": _c(None, _at(2, 11), ["timeout"])}, {"0": _c(_at(5, 14), _at(6, 15), ["timeout"])}],
         {"0": _c(_at(5, 14), _at(6, 15), ["timeout"])}),
        # the last could not measure after: the latest after stands
        ([{"0": _c(_at(1, 10), _at(2, 11))}, {"0": _c(_at(5, 14), None, ["refused"])}],
         {"0": _c(_at(1, 10), _at(2, 11), ["refused"])}),
        # a fleet worker missing from the last probe keeps its offsets
        ([{"0": _c(_at(1, 10), None), "1": _c(_at(1, 20), _at(2, 21))},
          {"0": _c(_at(5, 14), _at(6, 15))}],
         {"0": _c(_at(1, 10), _at(6, 15)), "1": _c(_at(1, 20), _at(2, 21))}),
    ],
)  # fmt: skip
def test_a_searchs_clock_spans_its_probes(in_turn, spanned):
    assert spanning_clocks(in_turn) == spanned
