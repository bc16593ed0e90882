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

    res = Resolution(fraction=0.02)
    result, outcomes = search(SearchPlan(1000, 100_000, res), judge)
    assert result.max_sustainable_per_s is None  # never a false breaking point
    assert result.lowest_break_per_s is None
    # narrowed down to the sender's limit: the system holds at least that much
    limited = min(o.probe.rate_per_s for o in outcomes if o.verdict == SENDER_LIMITED)
    assert result.highest_hold_per_s <= 9000 < limited
    assert res.gap_ok(result.highest_hold_per_s, limited)
    assert not any(o.probe.confirm for o in outcomes)
    assert result.workers_needed == 2 and "--workers 2" in result.why
    assert "instrument is the limit" in result.why


def lagging_sender(capacity, lag_from):
    """A system of `capacity` on the sender's host: from `lag_from`/s on, the sender sends
    every event but late (its host short of CPU), whatever the system does."""

    def judge(probe):
        if probe.rate_per_s >= lag_from:  # late slots also end late: 99.5 % of the rate
            return SENDER_LIMITED, 0.995 * probe.rate_per_s
        return (HOLDS if probe.rate_per_s <= capacity else BREAKS), float(probe.rate_per_s)

    return judge


def test_a_break_below_a_sender_limited_rate_is_still_found():
    # channel-kafka on two cores: 4000/s starved the sender, but the system broke below that
    res = Resolution(fraction=0.05)
    result, outcomes = search(SearchPlan(500, 100_000, res), lagging_sender(2900, 4000))
    assert result.highest_hold_per_s <= 2900 < result.lowest_break_per_s < 4000
    assert result.max_sustainable_per_s == result.highest_hold_per_s
    assert outcomes[-1].probe.confirm and outcomes[-1].verdict == HOLDS
    assert max(o.probe.rate_per_s for o in outcomes) == 4000  # never above the limited rate


def test_a_sender_that_sends_the_rate_late_is_not_told_to_add_workers():
    res = Resolution(fraction=0.05)
    result, _ = search(SearchPlan(500, 100_000, res), lagging_sender(10**6, 6000))
    assert result.max_sustainable_per_s is None and result.lowest_break_per_s is None
    assert result.workers_needed is None and "--workers" not in result.why
    assert "host is short of CPU" in result.why
    assert res.gap_ok(result.highest_hold_per_s, 6000) and result.highest_hold_per_s < 6000


def test_a_confirmation_the_sender_could_not_hold_ends_the_search():
    plan = SearchPlan(1000, 2000, Resolution(fraction=0.05))
    history = [
        Outcome(Probe(1000, 30), HOLDS, (), 1000.0),
        Outcome(Probe(2000, 30), HOLDS, (), 2000.0),
        Outcome(
            Probe(2000, 120, confirm=True), SENDER_LIMITED, ("sender lag p99 12.0 ms",), 2000.0
        ),
    ]
    result = next_step(plan, history)
    assert isinstance(result, Result) and result.max_sustainable_per_s is None
    assert "sender lag p99 12.0 ms" in result.why and "instrument is the limit" in result.why


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


@pytest.mark.parametrize("fields", [{}, {"fraction": 0.02, "per_s": 50}])
def test_a_resolution_is_a_fraction_or_a_rate(fields):
    with pytest.raises(ValueError, match="a fraction or a rate"):
        Resolution(**fields)


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


def test_a_sender_that_cannot_hold_the_first_rate_ends_the_search_at_once():
    plan = SearchPlan(50_000, 100_000, Resolution(fraction=0.05))
    result = next_step(plan, [Outcome(Probe(50_000, 30), SENDER_LIMITED, (), 20_000.0)])
    assert isinstance(result, Result) and result.highest_hold_per_s is None
    assert result.workers_needed == 3 and "--workers 3" in result.why


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"from_per_s": 2000, "max_per_s": 1000}, "--max 1000 is below --from 2000"),
        ({"probe_s": 30, "confirm_s": 10}, "--confirm 10 is shorter than --hold 30"),
    ],
)
def test_a_plan_that_contradicts_itself_is_refused_naming_both_options(kwargs, said):
    options = {"from_per_s": 500, "max_per_s": 100_000, **kwargs}
    with pytest.raises(ValueError, match=said):
        SearchPlan(resolution=Resolution(fraction=0.02), **options)
