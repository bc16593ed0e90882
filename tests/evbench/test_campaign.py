"""The one loop above the session (evbench.campaign), with fake items: pure logic."""

import pytest

from contract.errors import EvbenchError
from evbench.campaign import campaign_exit_code, each, exit_code, worst_exit_code
from runtime.runs import refuse_taken


class _Policy:
    """A campaign policy whose items return (or raise) their outcome, remembering the order;
    `roots` are where they record (the campaign refuses any that exists)."""

    noun = "system"

    def __init__(self, outcomes, recorded=(), roots=()):
        self.outcomes, self.recorded_names, self.root_paths = outcomes, set(recorded), roots
        self.driven = []

    def items(self):
        return tuple(self.outcomes)

    def roots(self):
        return self.root_paths

    def drive(self, name):
        self.driven.append(name)
        outcome = self.outcomes[name]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def recorded(self, name):
        return name in self.recorded_names


@pytest.mark.parametrize(
    ("outcomes", "recorded", "statuses", "code"),
    [
        ({"a": "completed", "b": "completed"}, set(), ["completed", "completed"], 0),
        # a failure after something was recorded is said, and the campaign goes on
        ({"a": EvbenchError("x"), "b": "completed"}, {"a"}, ["failed", "completed"], 1),
        ({"a": "failed", "b": "completed"}, set(), ["failed", "completed"], 1),
        # the first interrupted item stops the rest
        ({"a": "interrupted", "b": "completed"}, set(), ["interrupted"], 130),
        ({"a": "failed", "b": "interrupted", "c": "completed"}, set(), ["failed", "interrupted"],
         130),
    ],
)  # fmt: skip
def test_each_item_in_turn(outcomes, recorded, statuses, code):
    policy, lines = _Policy(outcomes, recorded), []
    got = each(policy, lines.append)
    assert got == statuses and policy.driven == list(outcomes)[: len(statuses)]
    assert campaign_exit_code(got) == code
    assert lines[0] == f"[1/{len(outcomes)}] a"
    if "interrupted" in got:
        left = len(outcomes) - len(got)
        assert lines[-1] == f"stopping: {left} system{'' if left == 1 else 's'} not run"


def test_an_error_before_anything_was_recorded_stops_the_campaign():
    policy = _Policy({"a": EvbenchError("no such tool"), "b": "completed"})
    with pytest.raises(EvbenchError, match="no such tool"):
        each(policy, lambda line: None)
    assert policy.driven == ["a"]


def test_one_item_is_not_numbered_and_its_failure_is_said_alone():
    lines = []
    got = each(_Policy({"a": EvbenchError("x")}, recorded={"a"}), lines.append)
    assert got == ["failed"] and lines == ["a failed: x"]


def test_a_taken_directory_is_refused_before_anything(tmp_path):
    (tmp_path / "b").mkdir()
    refuse_taken([tmp_path / "a"])  # none taken: nothing said
    with pytest.raises(EvbenchError, match=r"b already exists: choose another --run-id"):
        refuse_taken([tmp_path / "a", tmp_path / "b"])
    policy = _Policy({"a": "completed", "b": "completed"}, roots=[tmp_path / "a", tmp_path / "b"])
    with pytest.raises(EvbenchError, match=r"b already exists"):
        each(policy, lambda line: None)
    assert policy.driven == []  # refused before the first item


@pytest.mark.parametrize(
    ("status", "code"), [("completed", 0), ("interrupted", 130), ("failed", 1), ("running", 1)]
)
def test_exit_codes(status, code):
    assert exit_code(status) == code
    assert campaign_exit_code([]) == 0


@pytest.mark.parametrize(
    ("codes", "worst"),
    [
        ([], 0),
        ([0, 3], 3),  # an objective breached
        ([3, 1], 1),  # a failure is worse than a miss: its figures may not be the system's
        ([1, 2, 3], 2),
        ([3, 130, 1], 130),  # the user stopped it
    ],
)
def test_the_worst_exit_code_is_said(codes, worst):
    assert worst_exit_code(codes) == worst
