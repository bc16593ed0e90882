"""Documents checked against their types: the checker itself (pure)."""

# No `from __future__ import annotations`: see contract/documents.py.
from typing import NotRequired, TypedDict

import pytest

from contract.documents import RunDoc, problems


class Inner(TypedDict):
    a: int
    b: NotRequired[str]


class Outer(TypedDict):
    name: str
    inner: Inner
    maybe: Inner | None
    items: list[Inner]
    by_key: dict[str, Inner]
    extra: NotRequired[int]


GOOD = {"name": "x", "inner": {"a": 1}, "maybe": None, "items": [{"a": 2, "b": "y"}], "by_key": {}}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, []),
        ({"extra": 3}, []),
        ({"inner": {"a": 1, "c": 2}}, ["Outer.inner: unknown key 'c'"]),
        ({"maybe": {}}, ["Outer.maybe: missing key 'a'"]),
        ({"items": [{"a": 1}, {"b": "z"}]}, ["Outer.items[1]: missing key 'a'"]),
        ({"by_key": {"k": {"a": 1, "zz": 0}}}, ["Outer.by_key['k']: unknown key 'zz'"]),
        ({"items": {"a": 1}}, ["Outer.items: expected a list"]),
        ({"inner": 5}, ["Outer.inner: expected an object, got int"]),
        ({"surplus": 1}, ["Outer: unknown key 'surplus'"]),
    ],
)
def test_problems_name_the_key_and_where_it_is(change, expected):
    assert problems({**GOOD, **change}, Outer) == expected


def test_a_missing_required_key_is_named():
    doc = dict(GOOD)
    del doc["name"]
    assert problems(doc, Outer) == ["Outer: missing key 'name'"]


def test_run_json_of_an_older_minimal_run_is_still_a_run_doc():
    """What analysis needs from any run.json, imported or recorded."""
    minimal = {
        "version": 1,
        "run_id": "r",
        "sut": "direct",
        "status": "completed",
        "pace": {"name": "p", "spec": "1:1", "steps": [{"rate_per_s": 1, "duration_s": 1}]},
        "schedule": {"start_ns": 1, "step_gap_s": 2.0},
        "payload_bytes": 8192,
    }
    assert problems(minimal, RunDoc) == []
