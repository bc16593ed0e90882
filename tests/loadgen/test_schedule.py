import bisect
import dataclasses
import itertools

import pytest

from loadgen.pace import Step
from loadgen.schedule import NS_PER_S, plan_steps, schedule, worker_slots

PACES = [
    [Step(1000, 30), Step(1100, 30), Step(100, 60)],
    [Step(7, 3), Step(3, 1)],  # rates that do not divide a second evenly
    [Step(1, 1)],
]


@pytest.mark.parametrize("steps", PACES)
@pytest.mark.parametrize("gap_s", [0, 2.0, 0.25])
def test_slots_per_step_and_monotonic(steps, gap_s):
    planned = plan_steps(steps, gap_s)
    slots = list(schedule(planned))
    assert [s.seq for s in slots] == list(range(sum(s.events for s in steps)))
    offsets = [s.offset_ns for s in slots]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    for step, plan in zip(steps, planned, strict=True):
        mine = [s for s in slots if s.step == plan.number]
        assert len(mine) == step.rate_per_s * step.duration_s
        # every slot falls inside its step, the first on its start
        assert mine[0].offset_ns == plan.start_offset_ns
        assert all(plan.start_offset_ns <= s.offset_ns < plan.end_offset_ns for s in mine)
        # evenly spaced at the step's rate, to the nanosecond
        spacing = {b.offset_ns - a.offset_ns for a, b in itertools.pairwise(mine)}
        assert spacing <= {NS_PER_S // step.rate_per_s, NS_PER_S // step.rate_per_s + 1}


def test_steps_follow_each_other_after_the_gap():
    planned = plan_steps([Step(10, 3), Step(20, 1), Step(5, 2)], gap_s=2)
    assert [p.start_offset_ns for p in planned] == [0, 5 * NS_PER_S, 8 * NS_PER_S]
    assert [p.first_seq for p in planned] == [0, 30, 50]


def test_warmup_is_step_zero_and_comes_first():
    planned = plan_steps([Step(10, 1)], gap_s=1, warmup=Step(5, 2))
    assert [(p.number, p.warmup) for p in planned] == [(0, True), (1, False)]
    assert planned[1].start_offset_ns == 3 * NS_PER_S
    slots = list(schedule(planned))
    assert sum(s.warmup for s in slots) == 10 and slots[10].step == 1


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_workers_split_the_schedule_exactly(workers):
    planned = plan_steps([Step(100, 3), Step(51, 2)], gap_s=1)
    whole = list(schedule(planned))
    shares = [list(schedule(planned, w, workers)) for w in range(workers)]
    merged = sorted((s for share in shares for s in share), key=lambda s: s.seq)
    assert merged == whole
    assert max(map(len, shares)) - min(map(len, shares)) <= len(planned)


def test_bad_worker_and_gap():
    planned = plan_steps([Step(1, 1)], gap_s=0)
    with pytest.raises(ValueError, match="worker 2"):
        list(schedule(planned, worker=2, workers=2))
    with pytest.raises(ValueError, match="negative"):
        plan_steps([Step(1, 1)], gap_s=-1)


def test_a_probe_continues_the_step_and_slot_numbers_of_the_last():
    (only,) = plan_steps([Step(100, 2)], 0.5, first_step=4, first_seq=1200)
    assert (only.number, only.first_seq, only.start_offset_ns) == (4, 1200, 0)
    slots = list(schedule([only]))
    assert (slots[0].seq, slots[-1].seq, {s.step for s in slots}) == (1200, 1399, {4})


# The pacer asks the schedule which slots are due (`due_end`) rather than working the offsets out
# itself: the count must agree, to the nanosecond, with the slots' own offsets.
@pytest.mark.parametrize(
    ("rate_per_s", "duration_s", "start_offset_ns"),
    [(1, 3, 0), (7, 3, 5 * NS_PER_S), (3, 2, 1), (1000, 1, 0), (20_000, 1, 2 * NS_PER_S)],
)
def test_due_end_counts_exactly_the_slots_whose_time_has_come(
    rate_per_s, duration_s, start_offset_ns
):
    (step,) = plan_steps([Step(rate_per_s, duration_s)], 0)
    step = dataclasses.replace(step, start_offset_ns=start_offset_ns)
    share = worker_slots(step)
    offsets = [share.offset_ns(i) for i in range(share.end)]
    # every slot's instant, the nanosecond before it and after it, and both ends of the step
    probes = {o + d for o in offsets for d in (-1, 0, 1)} | {0, step.end_offset_ns + NS_PER_S}
    for elapsed_ns in sorted(probes):  # offsets are sorted: bisect counts those <= elapsed
        assert share.due_end(elapsed_ns) == bisect.bisect_right(offsets, elapsed_ns), elapsed_ns


@pytest.mark.parametrize(
    ("first_seq", "worker", "workers", "first"),
    [(0, 0, 1, 0), (0, 1, 3, 1), (10, 0, 3, 2), (10, 1, 3, 0), (7, 6, 7, 6)],
)
def test_a_workers_first_slot_is_the_first_whose_seq_is_its_own(first_seq, worker, workers, first):
    (step,) = plan_steps([Step(100, 1)], 0, first_seq=first_seq)
    share = worker_slots(step, worker, workers)
    assert share.first == first and share.seq(first) % workers == worker
