import itertools

import pytest

from loadgen.pace import Step
from loadgen.schedule import NS_PER_S, plan_steps, schedule

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
