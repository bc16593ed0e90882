"""The rule for a system's process that died mid-run (analysis.deaths), table-tested."""

from __future__ import annotations

import pytest

from analysis.deaths import SYSTEM_DIED, after_deaths, death_summaries, spoiled_steps
from analysis.verdicts import BREAKS, HOLDS, SENDER_LIMITED, Verdict
from contract.documents import SutDeathDoc

S = 1_000_000_000
STARTS = [(1, 0), (2, 10 * S), (3, 20 * S)]


def _death(at_s: float, role: str = "dispatcher") -> SutDeathDoc:
    return {"role": role, "noticed_ns": int(at_s * S), "exit_code": -9}


@pytest.mark.parametrize(
    ("at_s", "restarted", "spoiled"),
    [
        (12.4, (), [2, 3]),  # in step 2: it and every later step
        (9.9, (), [1, 2, 3]),  # in step 1 (or the gap after it): in-flight events die too
        (25.0, (), [3]),
        (-1.0, (), [1, 2, 3]),  # before the first slot: every step
        (12.4, (3,), [2]),  # a search restarted the system before step 3
        (12.4, (2,), [2, 3]),  # a restart before the step it died in does not end it
    ],
)
def test_a_death_spoils_its_step_and_the_later_ones_until_a_restart(at_s, restarted, spoiled):
    assert sorted(spoiled_steps([_death(at_s)], STARTS, restarted)) == spoiled


def test_a_spoiled_step_that_did_not_hold_is_judged_by_the_crash():
    verdicts = [
        Verdict(1, 100, HOLDS),
        Verdict(2, 200, BREAKS, ("delivered 10/s of 200/s",)),
        Verdict(3, 300, SENDER_LIMITED, ("sender lag p99 20 ms",)),
    ]
    death = _death(12.4)
    spoiled = spoiled_steps([death], STARTS)
    judged = after_deaths(verdicts, spoiled, {2: 1500, 3: 3000}, 0)
    assert judged[0] == verdicts[0]  # before the death: untouched
    assert [v.verdict for v in judged[1:]] == [SYSTEM_DIED, SYSTEM_DIED]
    assert judged[1].reasons[0] == (
        "dispatcher died at 12.4 s (exit -9): 1500 lost in this step; a crash, not a capacity limit"
    )
    assert judged[1].reasons[1:] == verdicts[1].reasons  # what the rule saw is kept
    (summary,) = death_summaries([death], spoiled, {2: 1500, 3: 3000}, 0)
    assert summary == {"role": "dispatcher", "at_s": 12.4, "step": 2, "lost_after": 4500}


def test_a_step_that_held_through_a_death_still_held():
    verdicts = [Verdict(3, 300, HOLDS)]
    judged = after_deaths(verdicts, spoiled_steps([_death(29.0)], STARTS), {3: 0}, 0)
    assert judged == verdicts


@pytest.mark.parametrize(
    ("scheduled", "duration_s", "ran_s"),
    [
        (10_000, 20, None),  # ran its whole duration
        (9_800, 20, None),  # within half a second's slots: not cut
        (2_760, 20, 5.52),  # Ctrl-C after ~5.5 s
        (0, 20, 0.0),
    ],
)
def test_a_step_cut_short_is_measured_over_the_time_it_ran(scheduled, duration_s, ran_s):
    from analysis.steprule import cut_short_s

    totals = {"target_rate_per_s": 500, "scheduled": scheduled}
    assert cut_short_s(totals, duration_s) == ran_s  # type: ignore[arg-type]
