"""A run's capacity from its steps (analysis.capacity) and the baseline each step is judged
against (analysis.verdicts.judge_against): tables of cases."""

from dataclasses import replace

import pytest

from analysis.capacity import capacity, judge_steps, verdict_text
from analysis.hostload import HostLoad
from analysis.verdicts import (
    BREAKS,
    HOLDS,
    HOST_SATURATED,
    SENDER_LIMITED,
    Thresholds,
    Verdict,
    judge,
)
from tests.analysis.test_verdicts import fig as a_step

T = Thresholds()
H, B, S, X = HOLDS, BREAKS, SENDER_LIMITED, HOST_SATURATED


def steps(*pairs):
    return [Verdict(i, rate, kind) for i, (rate, kind) in enumerate(pairs, start=1)]


CAPACITY = [
    # 1k-2k's cool-down (100/s after 1500/s) held after everything broke: a recovery, never
    # the capacity (the first run read "max sustainable 100/s" from it).
    (
        "every rising step broke, the cool-down held",
        steps((1000, B), (1100, B), (1500, B), (100, H), (1600, B)),
        (1000, None, 100),
    ),
    (
        "held to 1400, broke at 1500, recovered at 100",
        steps((1000, H), (1400, H), (1500, B), (100, H), (1600, B)),
        (1500, 1400, 100),
    ),
    (
        "nothing broke: a cool-down that holds is no recovery",
        steps((1000, H), (100, H)),
        (None, 1000, None),
    ),
    (
        "a descending pace: only its first step rises",
        steps((2000, B), (1500, H)),
        (2000, None, 1500),
    ),
    (
        "a rise after the cool-down counts",
        steps((1000, H), (1500, B), (100, H), (1200, H)),
        (1500, 1200, 100),
    ),
    (
        "a cool-down that broke draining is no recovery",
        steps((1000, H), (1500, B), (100, B)),
        (1500, 1000, None),
    ),
    (
        "a saturated host names no capacity",
        steps((1000, H), (1100, X), (1200, X)),
        (None, 1000, None),
    ),
    # The review's case: the cool-down draining a step a saturated host overloaded is never the
    # breaking point ("breaks at 100/s").
    (
        "a cool-down after a saturated step",
        steps((1000, H), (1400, H), (1500, X), (100, B), (1600, X)),
        (None, 1400, None),
    ),
    (
        "a cool-down that broke on its own is no breaking point",
        steps((1000, H), (1500, H), (100, B)),
        (None, 1500, None),
    ),
]


@pytest.mark.parametrize(("name", "verdicts", "expected"), CAPACITY, ids=[c[0] for c in CAPACITY])
def test_capacity_comes_from_the_rising_pace(name, verdicts, expected):
    found = capacity(verdicts)
    assert (
        found.breaking_point_per_s,
        found.max_sustainable_rate_per_s,
        found.recovered_per_s,
    ) == expected


def test_the_runs_words_say_which_steps_a_saturated_host_left_inconclusive():
    from analysis.capacity import host_verdict_text, saturated_steps

    def row(step, verdict, host):
        return {"step": step, "verdict": verdict, "host": host}

    busy = {"cpus": 2, "busy_ratio": 0.99, "others_ratio": 0.5, "steal_ratio": 0.0, "samples": 9}
    quiet = {**busy, "others_ratio": 0.02}
    rows = [row(1, H, quiet), row(2, H, busy), row(3, X, busy), row(4, "faulted", busy)]
    assert saturated_steps(rows, T) == [2, 3, 4]
    assert host_verdict_text(rows, [2, 3, 4]) == (
        "host saturated by other processes in steps 2, 3, 4 (host 99% busy, 50% by processes "
        "outside the run, of 2 CPUs, at most): 1 inconclusive, 1 held as a lower bound, "
        "1 judged otherwise (see their reasons)"
    )
    assert host_verdict_text(rows[:1], []) == ""


def test_the_verdict_says_a_recovery_and_no_step_held():
    assert verdict_text(1000, None, recovered_per_s=100) == (
        "breaks at 1000/s; no step held below it on the way up; recovered at 100/s"
    )
    assert verdict_text(1500, 1400, recovered_per_s=100).endswith("; recovered at 100/s")


def fig(step, rate=1000, p99=5.0, **over):
    """A step that holds by the rule (test_verdicts' figures), its e2e P99 `p99`, on time."""
    over = dict(sender_lag_p99_ms=0.5, e2e_median_ms=p99 / 2, e2e_rise_ms=0.0) | over
    return a_step(rate, step=step, e2e_p99_ms=p99, **over)


BUSY = HostLoad(cpus=2, busy_ratio=0.99, others_ratio=0.5, steal_ratio=0.0, samples=30)
OWN_BUSY = HostLoad(cpus=2, busy_ratio=0.99, others_ratio=0.02, steal_ratio=0.0, samples=30)
STOLEN = HostLoad(cpus=2, busy_ratio=0.6, others_ratio=0.1, steal_ratio=0.2, samples=30)
LATE = dict(sender_lag_p99_ms=104.0)  # the first run: step 1 sender-limited by 104 ms

BASELINES = [
    # (name, steps' figures, may set the baseline, verdicts, the run's baseline)
    ("the first clean step", [fig(1, p99=5.0), fig(2, 1100, p99=30.0)], None, [H, H], 5.0),
    (
        "a standing queue past 5x the clean baseline",
        [fig(1, p99=40.0), fig(2, 1100, p99=250.0)],
        None,
        [H, B],
        40.0,
    ),
    # The first run: step 1 already 14.3 s late, its sender 104 ms late. The sender
    # excuses 3 x 104 ms, never seconds; no clean step, so the absolute bar.
    ("step 1 in trouble is never the baseline", [fig(1, p99=14_300.0, **LATE)], None, [B], None),
    # The second run: a sender-limited step 1 at P99 379 ms made 1.9 s the bar, so
    # 371 ms "held". Within what 104 ms of lag explains (100 ms + 3 x 104), step 1 stays
    # sender-limited; the bar is the first clean step's.
    (
        "a sender-limited step sets no bar",
        [fig(1, p99=379.0, **LATE), fig(2, 1100, p99=6.0), fig(3, 1200, p99=371.0)],
        None,
        [S, H, B],
        6.0,
    ),
    ("a slow but healthy system is its own baseline", [fig(1, p99=150.0)], None, [H], 150.0),
    (
        "a faulted step sets no baseline",
        [fig(1, p99=80.0), fig(2, p99=5.0)],
        [False, True],
        [H, H],
        5.0,
    ),
    (
        "held on a crowded host: no baseline",
        [fig(1, p99=5.0, host=BUSY), fig(2, p99=9.0)],
        None,
        [H, H],
        9.0,
    ),
]


@pytest.mark.parametrize(
    ("name", "figures", "eligible", "expected", "baseline"),
    BASELINES,
    ids=[b[0] for b in BASELINES],
)
def test_each_step_is_judged_against_the_first_clean_step_before_it(
    name, figures, eligible, expected, baseline
):
    verdicts, found = judge_steps(figures, T, eligible or [True] * len(figures))
    assert [v.verdict for v in verdicts] == expected, [v.reasons for v in verdicts]
    assert found == baseline


HOSTS = [
    (
        "broke on a host others saturated",
        dict(lost=500, host=BUSY),
        X,
        "host saturated: host 99% busy",
    ),
    (
        "sender short on a host others saturated",
        dict(sender_ratio=0.5, host=BUSY),
        X,
        "by the step rule alone: sender-limited",
    ),
    ("held on a saturated host: a lower bound", dict(host=BUSY), H, "a lower bound"),
    (
        "the run's own processes filling the host are its capacity",
        dict(lost=500, host=OWN_BUSY),
        B,
        "lost",
    ),
    ("a hypervisor's steal saturates too", dict(lost=500, host=STOLEN), X, "steal 20%"),
    ("no host samples: judged as before", dict(lost=500, host=None), B, "lost"),
]


@pytest.mark.parametrize(("name", "over", "expected", "reason"), HOSTS, ids=[h[0] for h in HOSTS])
def test_a_step_that_fell_short_on_a_saturated_host_is_inconclusive(name, over, expected, reason):
    verdict = judge(replace(fig(1), **over), T)
    assert verdict.verdict == expected
    assert reason in " ".join(verdict.reasons), verdict.reasons
