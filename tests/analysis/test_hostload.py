"""The host's load over a step (analysis.hostload): which samples, and what is others'."""

import pytest

from analysis.hostload import host_load, host_ticks

S = 1_000_000_000
T0 = 1_750_000_000 * S


def _ticks(busy, ours, cpus=2):
    """One host sample a second from T0 + 1 s, with the run's processes' CPU in each tick."""
    host = [
        {
            "t_ns": T0 + (i + 1) * S,
            "cpus": cpus,
            "busy_percent": b,
            "steal_percent": 0.0,
            "evbench_percent": 1.0,
        }
        for i, b in enumerate(busy)
    ]
    processes = [
        {"t_ns": T0 + (i + 1) * S, "process": role, "cpu_percent": o / 2}
        for i, o in enumerate(ours)
        for role in ("sender", "receiver")
    ]
    return host_ticks(host, processes)


def test_others_are_the_busy_cpu_less_the_runs_processes_and_evbench():
    # 190 % busy of 200 %, the run's processes 89 % and evbench 1 %: others 100 % of 200 %
    load = host_load(_ticks([190.0] * 4, [89.0] * 4), T0, T0 + 4 * S)
    assert load is not None
    assert (load.cpus, load.samples) == (2, 4)
    assert load.busy_ratio == pytest.approx(0.95) and load.others_ratio == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("start_s", "end_s", "samples"),
    [
        (0, 4, 4),  # the samples at 1..4 s cover the step's seconds
        (0, 3.4, 3),  # the one at 4 s is more after the step than in it
        (0, 3.5, 4),  # half in it counts
        (2, 4, 2),  # the one at 2 s covers the second before the step
        (5, 9, 0),  # none: no load said
    ],
)
def test_a_step_reads_the_samples_that_cover_it(start_s, end_s, samples):
    ticks = _ticks([100.0] * 4, [10.0] * 4)
    load = host_load(ticks, T0 + int(start_s * S), T0 + int(end_s * S))
    assert (load.samples if load else 0) == samples


def test_a_run_without_host_samples_has_no_load():
    assert host_ticks([], []) is None
    assert host_load(None, T0, T0 + S) is None


def test_a_burst_of_others_is_the_steps_peak_though_its_mean_is_small():
    # The review's case, measured: 8 s of half a core taken by a test run beside a 1600/s step
    # of 30 s at the system's edge, which broke; its mean others' share came to 4 %.
    busy = [170.0] * 30
    ours = [168.0] * 30
    for i in range(10, 15):
        busy[i], ours[i] = 200.0, 120.0  # someone else's 80 % of 200 %
    load = host_load(_ticks(busy, ours), T0, T0 + 30 * S)
    assert load is not None and load.others_ratio < 0.1
    assert load.peak == pytest.approx((1.0, 0.395))  # evbench's own 1 % is the run's
    assert load.text() == (
        "host 100% busy, 40% by processes outside the run in its busiest 5 s (7% over the step), "
        "of 2 CPUs"
    )


def test_others_on_an_idle_host_are_no_peak():
    # others took a core while the run was light: the host had room; the peak is where it
    # was busy, or, with none busy, the window of most others
    busy, ours = [60.0] * 10 + [190.0] * 10, [10.0] * 10 + [180.0] * 10
    load = host_load(_ticks(busy, ours), T0, T0 + 20 * S)
    assert load is not None and load.peak == pytest.approx((0.95, 0.045))
    idle = host_load(_ticks([60.0] * 10, [10.0] * 10), T0, T0 + 10 * S)
    assert idle is not None and idle.peak == pytest.approx((0.3, 0.245))
