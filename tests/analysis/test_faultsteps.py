"""A step a fault was injected into, judged by the fault (analysis.faultsteps), table-tested."""

from __future__ import annotations

import pytest

from analysis.faultsteps import FAULTED, after_faults, fault_summaries, fault_text, faults_text
from analysis.verdicts import BREAKS, HOLDS, Verdict, breaking_point
from contract.faults import FaultDoc

S = 1_000_000_000
START = 1_750_000_000 * S


def _fault(step=2, action="kill", target="dispatcher", at_s=12.0, back_s=13.4, error=None):
    doc: FaultDoc = {
        "spec": f"{step}@2s:{action}:{target}", "step": step, "offset_s": 2.0, "action": action,
        "target": target, "duration_s": 1.0, "due_ns": START + int((at_s or 12.0) * S),
        "at_ns": None if at_s is None else START + int(at_s * S),
        "back_ns": None if back_s is None else START + int(back_s * S),
        "pids": [10, 11], "error": error,
    }  # fmt: skip
    return doc


def _totals(step, failures=270, lost=3, duplicates=5):
    return {"step": step, "send_failures": failures, "lost": lost, "duplicates": duplicates}


@pytest.mark.parametrize(
    ("fault", "text"),
    [
        (_fault(), "kill dispatcher 2 s into step 2, back after 1.40 s"),
        (_fault(action="pause", back_s=12.5), "pause dispatcher 2 s into step 2, back after "
         "0.50 s"),
        (_fault(at_s=None, back_s=None), "kill dispatcher 2 s into step 2: not done (the run "
         "ended first)"),
        (_fault(back_s=None, error="EvbenchError: not ready"), "kill dispatcher 2 s into step 2 "
         "(EvbenchError: not ready)"),
        (_fault(action="exec", target="kubectl delete pod x", error="exited 1"),
         "exec `kubectl delete pod x` 2 s into step 2, ended after 1.40 s (exited 1)"),
    ],
)  # fmt: skip
def test_a_fault_is_said_with_when_and_how_it_ended(fault, text):
    assert fault_text(fault) == text


def test_a_step_with_a_fault_that_did_not_hold_is_judged_by_the_fault():
    verdicts = [
        Verdict(1, 100, HOLDS),
        Verdict(2, 200, BREAKS, ("270 send failures of 1000",)),
        Verdict(3, 300, BREAKS, ("delivered 100/s of 300/s",)),
    ]
    faults = [_fault(step=1, action="pause"), _fault(step=2), _fault(step=3, at_s=None)]
    totals = {1: _totals(1, 0, 0, 0), 2: _totals(2), 3: _totals(3)}
    judged = after_faults(verdicts, faults, totals)
    assert judged[0] == verdicts[0]  # held through its fault: held
    assert judged[1].verdict == FAULTED and judged[1].reasons == (
        "kill dispatcher 2 s into step 2, back after 1.40 s: 270 send failures, 3 lost, "
        "5 duplicates in the step; a fault injected, not a capacity limit",
        "270 send failures of 1000",
    )
    assert judged[2] == verdicts[2]  # its fault never came: judged by the step rule
    # the breaking point comes from the steps without a fault
    assert breaking_point(judged) == (300, 100)
    assert breaking_point(verdicts) == (200, 100)


def test_the_summary_tells_each_fault_with_its_steps_cost():
    faults = [_fault(step=2), _fault(step=1, action="pause", at_s=2.0, back_s=2.5)]
    found = fault_summaries(faults, {2: _totals(2)}, START)
    assert [f["step"] for f in found] == [1, 2]  # in time order
    assert found[0]["at_s"] == 2.0 and found[0]["back_s"] == 2.5
    assert found[0]["step_lost"] is None  # no records of step 1
    assert (found[1]["step_send_failures"], found[1]["step_lost"]) == (270, 3)
    assert fault_summaries(faults, {}, None)[0]["at_s"] is None  # the start unknown
    assert faults_text(faults, {2: _totals(2)}) == (
        "kill dispatcher 2 s into step 2, back after 1.40 s: 270 send failures, 3 lost, "
        "5 duplicates in the step; pause dispatcher 2 s into step 1, back after 0.50 s: no "
        "records of the step"
    )
