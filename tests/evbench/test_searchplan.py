"""The capacity search's decisions against simulated systems of known capacity (pure)."""

import pytest

from evbench.searchplan import (
    BREAKS,
    HOLDS,
    SENDER_LIMITED,
    Outcome,
    Probe,
    Resolution,
    Result,
    SearchPlan,
    next_step,
    parse_resolution,
    workers_needed,
)


def search(plan, judge):
    """Run the search against `judge(probe) -> (verdict, achieved)` to its result."""
    outcomes = []
    while isinstance(step := next_step(plan, outcomes), Probe):
        verdict, achieved = judge(step)
        outcomes.append(Outcome(step, verdict, ("e2e p99 rising",), achieved))
    return step, outcomes


def capacity(c, sustained=None):
    """A system that holds up to `c`/s in a short probe and `sustained`/s for a long one."""

    def judge(probe):
        limit = (sustained or c) if probe.confirm else c
        return (HOLDS if probe.rate_per_s <= limit else BREAKS), float(probe.rate_per_s)

    return judge


@pytest.mark.parametrize("c", [137, 1000, 2600, 7777])
@pytest.mark.parametrize("resolution", ["2%", "50/s"])
def test_the_answer_is_within_the_resolution_of_the_capacity(c, resolution):
    res = parse_resolution(resolution)
    result, outcomes = search(SearchPlan(100, 100_000, res), capacity(c))
    assert isinstance(result, Result)
    assert result.highest_hold_per_s <= c < result.lowest_break_per_s  # the bracket holds C
    assert result.max_sustainable_per_s == result.highest_hold_per_s
    assert res.gap_ok(result.highest_hold_per_s, result.lowest_break_per_s)
    assert outcomes[-1].probe.confirm and outcomes[-1].probe.hold_s == 120
    assert result.symptom == ("e2e p99 rising",)
    assert len(outcomes) <= 20


@pytest.mark.parametrize(
    ("short", "sustained", "resolution"),
    [(1000, 800, Resolution(per_s=25)), (5000, 2000, Resolution(fraction=0.02))],
)
def test_a_rate_that_fails_its_confirmation_is_a_break_and_the_search_steps_down(
    short, sustained, resolution
):
    # short probes hold up to `short`/s, only `sustained`/s holds for two minutes
    plan = SearchPlan(100, 100_000, resolution)
    result, outcomes = search(plan, capacity(short, sustained))
    confirmations = [o for o in outcomes if o.probe.confirm]
    assert confirmations[0].verdict == BREAKS  # the first confirmation broke
    answer = result.max_sustainable_per_s
    assert answer <= sustained < result.lowest_break_per_s
    assert resolution.gap_ok(answer, result.lowest_break_per_s)
    assert outcomes[-1].probe.confirm and outcomes[-1].verdict == HOLDS
    # stepped down by doubling steps, then bisected: logarithmic in the drop
    assert len(confirmations) <= 14


def test_a_sender_that_cannot_hold_the_rate_ends_the_search_saying_so():
    def judge(probe):  # the system would hold 50,000/s; one sender holds 9,000/s
        if probe.rate_per_s > 9000:
            return SENDER_LIMITED, 9000.0
        return HOLDS, float(probe.rate_per_s)

    result, _ = search(SearchPlan(1000, 100_000, Resolution(fraction=0.02)), judge)
    assert result.max_sustainable_per_s is None  # never a false breaking point
    assert result.lowest_break_per_s is None and result.highest_hold_per_s == 8000
    assert result.workers_needed == 2 and "--workers 2" in result.why
    assert "instrument is the limit" in result.why


def test_a_system_stronger_than_the_maximum_is_confirmed_at_the_maximum():
    result, outcomes = search(SearchPlan(500, 3000, Resolution(fraction=0.02)), capacity(10**6))
    assert [o.probe.rate_per_s for o in outcomes] == [500, 1000, 2000, 3000, 3000]
    assert result.max_sustainable_per_s == 3000 and result.lowest_break_per_s is None


def test_a_system_weaker_than_the_start_is_searched_downwards():
    result, outcomes = search(SearchPlan(1000, 100_000, Resolution(per_s=10)), capacity(90))
    assert [o.probe.rate_per_s for o in outcomes[:4]] == [1000, 500, 250, 125]
    assert 80 <= result.max_sustainable_per_s <= 90


def test_a_system_that_breaks_at_every_rate_has_no_answer():
    result, _ = search(SearchPlan(8, 100, Resolution(per_s=1)), capacity(0))
    assert result.max_sustainable_per_s is None and "broke at every rate" in result.why


def test_the_probe_budget_is_bounded():
    flaky = iter([HOLDS, BREAKS] * 50)
    result, outcomes = search(
        SearchPlan(100, 100_000, Resolution(per_s=1), max_probes=7),
        lambda probe: (next(flaky), 0.0),
    )
    assert len(outcomes) == 7 and "gave up after 7 probes" in result.why


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2%", Resolution(fraction=0.02)),
        ("50/s", Resolution(per_s=50)),
        (" 5% ", Resolution(fraction=0.05)),
    ],
)
def test_resolutions(text, expected):
    assert parse_resolution(text) == expected


@pytest.mark.parametrize("text", ["2", "0%", "100%", "-5/s", "x/s", "fast"])
def test_a_bad_resolution_names_itself(text):
    with pytest.raises(ValueError, match=f"resolution '{text}'"):
        parse_resolution(text)


@pytest.mark.parametrize(
    ("target", "achieved", "workers", "needed"),
    [(20000, 9000.0, 1, 3), (20000, 18000.0, 2, 3), (10000, 10000.0, 1, 1), (5, 0.0, 1, 5)],
)
def test_workers_needed(target, achieved, workers, needed):
    assert workers_needed(target, achieved, workers) == needed


@pytest.mark.parametrize(
    ("rate", "confirm", "hold_s"),
    [(1000, False, 30), (2, False, 50), (3, False, 34), (1, True, 120), (4, True, 120)],
)
def test_a_low_rate_probe_holds_long_enough_to_be_judged(rate, confirm, hold_s):
    # 100 events is the rule's minimum (insufficient data below): 2/s holds 50 s, not 30
    probe = SearchPlan(1, 10, Resolution(per_s=1), min_events=100).probe(rate, confirm)
    assert probe == Probe(rate, hold_s, confirm)
    assert probe.rate_per_s * probe.hold_s >= 100


def test_a_search_from_a_low_rate_never_probes_fewer_events_than_the_rule_judges():
    plan = SearchPlan(1, 1000, Resolution(per_s=1), probe_s=3, confirm_s=6, min_events=100)
    _, outcomes = search(plan, capacity(37))
    assert all(o.probe.rate_per_s * o.probe.hold_s >= 100 for o in outcomes)
    assert outcomes[0].probe == Probe(1, 100)
