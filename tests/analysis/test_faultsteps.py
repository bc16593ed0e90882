"""A step a fault was injected into, judged by the fault (analysis.faultsteps), table-tested."""

from __future__ import annotations

import pytest

from analysis.capacity import breaking_point
from analysis.faultsteps import (
    FAULTED,
    after_faults,
    fault_ledger,
    fault_ledgers,
    fault_summaries,
    fault_text,
    faulted_steps,
    faults_text,
)
from analysis.verdicts import BREAKS, HOLDS, Verdict
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


def _seconds(delivered, rate=100, step=2, first=10, lost=(), failed=(), late=()):
    """Per-second rows from `first` on: `delivered[i]` in second first+i."""

    def at(values, i):
        return values[i] if i < len(values) else 0

    return [
        {"second": first + i, "step": step, "target_rate_per_s": rate, "scheduled": rate,
         "delivered": d, "lost": at(lost, i), "send_failures": at(failed, i),
         "late": at(late, i)}
        for i, d in enumerate(delivered)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("delivered", "p99", "recovered", "after_s", "window"),
    [
        # killed at 12.4 s: seconds 12-13 deliver nothing, 14 on are back
        ([100, 100, 0, 0, 100, 100, 100, 100], {}, 14, 1.6, (200, 150, 20, 70)),
        # back in rate but e2e P99 over the band (2 ms before: 9 ms) until second 16
        ([100, 100, 0, 0, 100, 100, 100, 100, 100],
         {10: 1.0, 11: 2.0, 14: 50.0, 15: 12.0, 16: 3.0, 17: 3.0, 18: 3.0}, 16, 3.6,
         (400, 150, 20, 70)),
        # never three healthy seconds in a row: not recovered, the window runs to the end
        ([100, 100, 0, 100, 100, 0, 100, 100], {}, None, None, (600, 150, 20, 70)),
        # 95 % of the pace is back in rate
        ([100, 100, 90, 95, 95, 95], {}, 13, 0.6, (100, 100, 20, 0)),
    ],
)  # fmt: skip
def test_recovery_is_the_first_of_three_healthy_seconds(delivered, p99, recovered, after_s, window):
    # late deliveries of events due before the fault are not its
    rows = _seconds(delivered, failed=[0, 0, 100, 50], lost=[0, 0, 20],
                    late=[9, 8, 0, 70])  # fmt: skip
    # every second's events delivered within 1 ms of its P99: each before the fault is settled
    maxima = {second: value + 1.0 for second, value in p99.items()}
    ledger = fault_ledger(START + int(12.4 * S), 2, START, rows, p99, e2e_max_ms=maxima)
    assert ledger.first_second == 12 and ledger.recovered_second == recovered
    assert ledger.recovered_after_s == (None if after_s is None else pytest.approx(after_s))
    counts = (ledger.scheduled, ledger.send_failures, ledger.lost, ledger.late)
    assert counts == window
    if p99:
        assert ledger.band_ms == pytest.approx(2.0 * 2 + 5.0)  # the step's second 11 only
        assert ledger.peak_e2e_p99_ms == 50.0


# A step from second 8 at ~100 ms e2e, a Kafka dispatcher killed in second 12: events due in
# second 11 were still on their way and came ~12.9 s late. Each second: (e2e P99, e2e max) ms.
_STEADY = {8: (80.0, 150.0), 9: (95.0, 150.0), 10: (100.0, 160.0)}


_KILLED = {**_STEADY, 11: (12_900.0, 12_950.0)}
_CALM = {**_STEADY, 11: (120.0, 170.0)}
_SLOW = {**_STEADY, 10: (900.0, 13_000.0), 11: (12_900.0, 14_000.0)}


@pytest.mark.parametrize(
    ("at_s", "seconds", "band_ms"),
    [
        # the second before the kill holds events it delayed: left out (25.8 s before, not 205)
        (12.4, _KILLED, 2 * 100 + 5),
        # late in second 12, second 11's events had all arrived (by 12.17 s): it counts
        (12.9, _CALM, 2 * 120 + 5),
        # early in second 12, second 11's last events were still on their way: left out
        (12.1, _CALM, 2 * 100 + 5),
        # second 10's events too were still on their way (a slow path): left out as well
        (12.4, _SLOW, 2 * 95 + 5),
        # no maxima known: a second counts once a whole second ended before the fault's
        (12.4, {second: (p99, None) for second, (p99, _) in _KILLED.items()}, 2 * 100 + 5),
        # the step's first second only when no other is settled
        (10.4, {8: (80.0, 150.0), 9: (300.0, 1_800.0)}, 2 * 80 + 5),
        # nothing settled before the fault: no band (recovery judged on the rate alone)
        (9.05, {8: (80.0, 150.0)}, None),
    ],
    ids=[
        "kafka kill",
        "late in its second",
        "early in its second",
        "a slow path",
        "no maxima",
        "the step's first",
        "none settled",
    ],
)
def test_the_band_is_of_the_seconds_delivered_before_the_fault(at_s, seconds, band_ms):
    rows = _seconds([100] * 10, first=8)
    p99 = {second: p for second, (p, _) in seconds.items()}
    maxima = {second: m for second, (_, m) in seconds.items() if m is not None}
    ledger = fault_ledger(START + int(at_s * S), 2, START, rows, p99, e2e_max_ms=maxima)
    assert ledger.band_ms == (None if band_ms is None else pytest.approx(band_ms))


def test_the_ledgers_take_each_seconds_highest_e2e_from_the_points():
    points = [{"second": s, "p99_ms": p99, "max_ms": most} for s, (p99, most) in _KILLED.items()]
    # A second in two slices: the highest of their maxima.
    points.append({"second": 11, "p99_ms": 50.0, "max_ms": 60.0})
    (ledger,) = fault_ledgers([_fault(at_s=12.4)], START, _seconds([100] * 10, first=8), points)
    assert ledger.band_ms == pytest.approx(2 * 100 + 5)


def test_a_step_with_a_fault_is_judged_by_the_fault():
    verdicts = [
        Verdict(1, 100, HOLDS),
        Verdict(2, 200, BREAKS, ("270 send failures of 1000",)),
        Verdict(3, 300, BREAKS, ("delivered 100/s of 300/s",)),
        Verdict(4, 400, HOLDS),
    ]
    faults = [_fault(step=1, action="pause"), _fault(step=2), _fault(step=3, at_s=None)]
    totals = {1: _totals(1, 0, 0, 0), 2: _totals(2), 3: _totals(3)}
    ledger = fault_ledger(START + 12 * S, 2, START, _seconds([100, 100, 0, 100, 100, 100]), {})
    judged = after_faults(verdicts, faults, [None, ledger, None], totals)
    # held through its fault: judged by it all the same, the rule's verdict said after
    assert judged[0].verdict == FAULTED and judged[0].reasons[1] == "by the step rule alone: holds"
    assert judged[1].verdict == FAULTED and judged[1].reasons == (
        "kill dispatcher 2 s into step 2, back after 1.40 s, recovered 1.0 s after it; of the 100 "
        "events due in its window, 0 send failures, 0 lost, 0 late (over 1 s); e2e P99 up to - "
        "ms; 5 duplicates in the step; a fault injected: judged by it, not as the system's "
        "capacity",
        "by the step rule alone: breaks",
        "270 send failures of 1000",
    )
    assert judged[2:] == verdicts[2:]  # its fault never came: judged by the step rule
    # the breaking point and the sustainable rate come from the steps without a fault
    assert breaking_point(judged) == (300, None)
    assert breaking_point(verdicts) == (200, 100)
    assert faulted_steps(faults) == {1, 2}


def test_the_summary_tells_each_fault_with_its_ledger_and_its_steps_counts():
    faults = [_fault(step=2), _fault(step=1, action="pause", at_s=2.0, back_s=2.5)]
    rows = _seconds([100, 100, 0, 100, 100, 100], failed=[0, 0, 100])
    ledgers = fault_ledgers(faults, START, rows, [{"step": 2, "second": 12, "p99_ms": 70.0}])
    found = fault_summaries(faults, ledgers, {2: _totals(2)}, START)
    assert [f["step"] for f in found] == [1, 2]  # in time order
    assert found[0]["at_s"] == 2.0 and found[0]["back_s"] == 2.5
    assert found[0]["step_lost"] is None  # no records of step 1
    assert (found[1]["step_send_failures"], found[1]["step_lost"]) == (270, 3)
    assert (found[1]["recovered_after_s"], found[1]["window_send_failures"]) == (1.0, 100)
    assert found[1]["window_peak_e2e_p99_ms"] == 70.0
    assert fault_ledgers(faults, None, rows, []) == [None, None]  # the start unknown
    assert faults_text(faults, [None, None], {2: _totals(2)}) == (
        "kill dispatcher 2 s into step 2, back after 1.40 s, 270 send failures, 3 lost in the "
        "step; 5 duplicates in the step; pause dispatcher 2 s into step 1, back after 0.50 s, "
        "no records of the step"
    )


def test_each_fault_done_is_marked_with_a_line_and_a_band_to_its_recovery():
    import plotly.graph_objects as go

    from analysis.figures import mark_faults

    faults = [_fault(step=2), _fault(step=2, at_s=None, back_s=None), _fault(step=1, at_s=2.0)]
    ledger = fault_ledger(START + 12 * S, 2, START, _seconds([100] * 6), {}, START + 134 * S // 10)
    ledgers = [ledger, None, None]
    summaries = fault_summaries(faults, ledgers, {}, START)
    figure = go.Figure()
    mark_faults(figure, summaries)
    lines = [(s.x0, s.line.dash) for s in figure.layout.shapes if s.type == "line"]
    bands = [(s.x0, s.x1) for s in figure.layout.shapes if s.type == "rect"]
    assert lines == [(2.0, "dot"), (12.0, "dot")]  # the fault never done is not drawn
    # step 2's: to its recovery (second 13, the one its target came back in, and the next two
    # healthy); step 1's has no seconds here, so its target's return bounds it
    assert bands == [(2.0, 13.4), (12.0, 13.0)]
    assert [a.text for a in figure.layout.annotations] == ["kill dispatcher"] * 2


def test_faults_at_several_rates_are_drawn_against_the_rate():
    from analysis.fault_report import cost_against_rate, faults_section

    rows = _seconds([100, 100, 0, 0, 100, 100, 100], failed=[0, 0, 100, 100])
    faults = [_fault(step=2), _fault(step=1, at_s=2.0), _fault(step=3, at_s=None, back_s=None)]
    ledgers = fault_ledgers(faults, START, rows, [])
    summaries = fault_summaries(faults, ledgers, {}, START)
    figure = cost_against_rate(summaries, {1: 100, 2: 200, 3: 300})
    recovery, failures, *_ = figure.data
    assert list(recovery.x) == [100, 200]  # in rate order; the fault never done is left out
    # step 2's recovers at second 14, the first of three healthy ones after 12 and 13; step 1
    # has no seconds here: not recovered within it, nothing counted
    assert list(recovery.y) == [None, pytest.approx(2.0)]
    assert list(failures.y) == [0, 200]
    summary = {"faults": summaries, "steps": [{"step": 1, "target_rate_per_s": 100},
                                              {"step": 2, "target_rate_per_s": 200}]}  # fmt: skip
    section = faults_section(summary)
    assert section.count("<li>") == 3 and 'id="fault-costs"' in section
    one_rate = {**summary, "steps": [{"step": 1, "target_rate_per_s": 100},
                                     {"step": 2, "target_rate_per_s": 100}]}  # fmt: skip
    assert "fault-costs" not in faults_section(one_rate)
    assert faults_section({"faults": [], "steps": []}) == ""


def test_recovery_is_looked_for_from_the_targets_return():
    # the user's command took the system down a while after it ran: the seconds right after
    # the fault (what was already on its way) are no recovery
    rows = _seconds([100] * 5 + [0, 0] + [100] * 5)  # seconds 15 and 16 deliver nothing
    late = fault_ledger(START + 12 * S, 2, START, rows, {}, back_ns=START + int(16.5 * S))
    assert late.recovered_second == 17 and late.recovered_after_s == pytest.approx(5.0)
    assert late.scheduled == 500  # its window: seconds 12 to 16
    assert fault_ledger(START + 12 * S, 2, START, rows, {}).recovered_second == 12  # without


def test_a_faults_window_ends_with_its_step():
    # killed at 14.2 s, two seconds before its step ends; the next step delivers at once
    rows = _seconds([100, 100, 100, 100, 0, 0], failed=[0, 0, 0, 0, 100, 100]) + _seconds(
        [200] * 5, rate=200, step=3, first=16, failed=[7] * 5
    )
    ledger = fault_ledger(START + int(14.2 * S), 2, START, rows, {})
    assert ledger.recovered_second is None and ledger.recovered_after_s is None
    assert (ledger.scheduled, ledger.send_failures) == (200, 200)  # none of step 3's
    assert (
        "not recovered within its step"
        in fault_summaries([_fault(at_s=14.2)], [ledger], {}, START)[0]["text"]
    )


def _done(step, recovered_after_s, failed=0, lost=0, duplicates=0, late=0, at_s=5.0):
    return {"step": step, "at_s": at_s, "recovered_after_s": recovered_after_s,
            "window_send_failures": failed, "window_lost": lost,
            "step_duplicates": duplicates, "window_late": late}  # fmt: skip


@pytest.mark.parametrize(
    ("faults", "brief"),
    [
        ([], "-"),
        ([_done(1, None, at_s=None)], "1 given, none done"),
        ([_done(2, 1.99, failed=1270)],
         "1 fault: recovered in 2.0 s; 1,270 failed, 0 lost, 0 duplicates, 0 late"),
        # the fastest and the slowest recovery; the windows' counts added up, and each step's
        # duplicates once, however many faults it had
        ([_done(1, 13.0, duplicates=58, late=12000), _done(2, 12.9, lost=4, duplicates=968),
          _done(2, 12.97, duplicates=968, late=1)],
         "3 faults: recovered in 12.9-13.0 s; 0 failed, 4 lost, 1,026 duplicates, 12,001 late"),
        ([_done(1, None, duplicates=1018), _done(2, 2.0), _done(3, None, at_s=None)],
         "2 faults: 1 of 2 recovered (in 2.0 s); 0 failed, 0 lost, 1,018 duplicates, 0 late"),
        ([_done(1, None)], "1 fault: 0 of 1 recovered; 0 failed, 0 lost, 0 duplicates, 0 late"),
        # a summary analysed before late deliveries were counted in the window
        ([{"step": 1, "at_s": 2.0, "recovered_after_s": 1.0, "window_send_failures": 3,
           "window_lost": 0, "step_duplicates": None}],
         "1 fault: recovered in 1.0 s; 3 failed, 0 lost, 0 duplicates, 0 late"),
    ],
)  # fmt: skip
def test_the_index_and_compare_tell_a_runs_faults_in_one_cell(faults, brief):
    from analysis.fault_report import faults_brief

    assert faults_brief(faults) == brief
