"""A document read from disk against its type (contract.shapes): what a reader may index is there
and of its JSON type, or the first thing wrong is named (evbench issue 51, part 9). Pure, and
files in a temporary directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contract.documents import RunDoc
from contract.errors import EvbenchError
from contract.figures import TailDoc
from contract.shapes import RUN_JSON_NEEDS, read_shaped, shape_problems
from contract.summarydocs import SummaryDoc

TAIL: TailDoc = {
    "p50": 1.0,
    "p99": 2.0,
    "p999": None,
    "p9999": 3,
    "max": 4.0,
    "n": 10,
    "p9999_is_max": True,
    "exact": ["p50"],
    "rank_error": {"p99": 0.01},
}


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        ({}, []),
        # a float may be null (NaN is written so) or a whole number
        ({"p99": None, "max": 7}, []),
        ({"ci95": {"p99": {"lo_ms": 1.0, "hi_ms": None, "exact": True, "n": 10}}}, []),
        ({"unknown": "a newer writer's"}, []),
        ({"p99": "fast"}, ["p99: expected a number or null, got a string"]),
        ({"p99": True}, ["p99: expected a number or null, got true or false"]),
        ({"n": 1.5}, ["n: expected a whole number, got a number"]),
        ({"n": None}, ["n: expected a whole number, got null"]),
        ({"exact": "p50"}, ["exact: expected a list, got a string"]),
        ({"exact": ["p50", 3]}, ["exact[1]: expected a string, got a whole number"]),
        ({"rank_error": {"p99": "x"}}, ["rank_error.p99: expected a number, got a string"]),
        (
            {"ci95": {"p99": {"lo_ms": 1.0}}},
            ["ci95.p99.exact: missing", "ci95.p99.hi_ms: missing", "ci95.p99.n: missing"],
        ),
        ({"ci95": {"p99": []}}, ["ci95.p99: expected an object, got a list"]),
    ],
)
def test_a_tail_is_held_to_its_keys_and_their_types(changed, said):
    assert shape_problems({**TAIL, **changed}, TailDoc) == said


def test_a_missing_key_and_a_literal_are_named_where_they_are():
    summary = {
        "status": "weird",
        "latency_ms": {"e2e": {k: v for k, v in TAIL.items() if k != "n"}},
    }
    found = shape_problems(summary, SummaryDoc)
    assert "counts: missing" in found and "steps: missing" in found
    assert "latency_ms.e2e.n: missing" in found
    assert "status: 'weird' is not one of 'running', 'completed', 'interrupted', 'failed'" in found
    assert shape_problems([1, 2], SummaryDoc) == ["expected an object, got a list"]


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"run_id": ', "run.json is not JSON: Expecting value"),
        ("[1, 2]", "run.json holds a JSON list, not an object"),
        ('{"run_id": "r", "sut": "direct"}', "run.json: pace: missing"),
        ('{"run_id": "r", "sut": "direct", "pace": "1k-2k"}', "run.json: pace: expected an object"),
        (
            '{"run_id": "r", "sut": "direct", "pace": {"name": "p", "spec": "1:1", "steps": []}, '
            '"schedule": 5, "sender": []}',
            "run.json: schedule: expected an object, got a whole number (and 1 more)",
        ),
    ],
)
def test_a_run_json_of_the_wrong_shape_is_one_line_naming_it(tmp_path, text, said):
    with pytest.raises(EvbenchError) as raised:
        read_shaped(_file(tmp_path, text), RunDoc, "restore it", RUN_JSON_NEEDS)
    assert said in str(raised.value) and str(raised.value).endswith(": restore it")
    assert "\n" not in str(raised.value)


def test_an_older_run_json_without_the_keys_no_reader_indexes_reads(tmp_path):
    pace = {"name": "p", "spec": "1:1", "steps": [{"rate_per_s": 1, "duration_s": 1}]}
    doc = {"run_id": "r", "sut": "direct", "pace": pace}  # no schedule, status, version
    read = read_shaped(_file(tmp_path, json.dumps(doc)), RunDoc, "", RUN_JSON_NEEDS)
    assert read == doc
