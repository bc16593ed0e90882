"""Open-loop schedule (pure): when every event of a pace should be sent.

Slot i of a step at rate r is due at `step_start + i * 1e9 // r` nanoseconds, whatever happened
to earlier slots: that is what keeps the sender open-loop. Steps follow each other with a fixed
gap (GC and flushing happen there), so the whole schedule is known before the first send.
Workers split one schedule by slot number (`seq % workers == worker`), so any number of sender
processes together keep exactly the pace's rate.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from contract.senderlines import PlannedStepDoc
from loadgen.pace import Step

NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class PlannedStep:
    number: int  # 0 = warmup, then 1..N in pace order
    rate_per_s: int
    duration_s: int
    warmup: bool
    start_offset_ns: int  # from the schedule's start
    first_seq: int

    @property
    def events(self) -> int:
        return self.rate_per_s * self.duration_s

    @property
    def end_offset_ns(self) -> int:
        return self.start_offset_ns + self.duration_s * NS_PER_S


def planned_step_doc(step: PlannedStep) -> PlannedStepDoc:
    """The step as the sender's start line lists it."""
    return {
        "number": step.number,
        "rate_per_s": step.rate_per_s,
        "duration_s": step.duration_s,
        "warmup": step.warmup,
        "start_offset_ns": step.start_offset_ns,
        "first_seq": step.first_seq,
    }


@dataclass(frozen=True)
class Slot:
    seq: int
    step: int
    offset_ns: int  # intended send time, from the schedule's start
    rate_per_s: int
    warmup: bool


def plan_steps(
    steps: Sequence[Step],
    gap_s: float,
    warmup: Step | None = None,
    first_step: int = 1,
    first_seq: int = 0,
) -> tuple[PlannedStep, ...]:
    """Steps numbered from `first_step` (0 for the warm-up) and slots from `first_seq`: a
    capacity search runs each probe as a sender of its own, numbered after the last."""
    if gap_s < 0:
        raise ValueError(f"step gap must not be negative, got {gap_s}")
    gap_ns = int(gap_s * NS_PER_S)
    numbered = ([(0, warmup, True)] if warmup else []) + [
        (i, step, False) for i, step in enumerate(steps, start=first_step)
    ]
    planned: list[PlannedStep] = []
    offset_ns = 0
    seq = first_seq
    for number, step, is_warmup in numbered:
        planned.append(
            PlannedStep(number, step.rate_per_s, step.duration_s, is_warmup, offset_ns, seq)
        )
        offset_ns += step.duration_s * NS_PER_S + gap_ns
        seq += step.events
    return tuple(planned)


@dataclass(frozen=True, slots=True)
class WorkerSlots:
    """One worker's share of a step's slots, by index within the step: indices `first`,
    `first + stride`, ... below `end`. The engine's pacer walks exactly this (which slots are due
    now, when the next one is), so the schedule tested here is the one that runs; the methods are
    plain arithmetic because the pacer calls them once per slot."""

    step: PlannedStep
    first: int
    stride: int

    @property
    def end(self) -> int:
        return self.step.events

    def seq(self, index: int) -> int:
        return self.step.first_seq + index

    def offset_ns(self, index: int) -> int:
        """Slot `index`'s intended send time, from the schedule's start."""
        return self.step.start_offset_ns + index * NS_PER_S // self.step.rate_per_s

    def due_end(self, elapsed_ns: int) -> int:
        """How many of the step's slots (every worker's) are due `elapsed_ns` after the
        schedule's start: slot i is due when `offset_ns(i) <= elapsed_ns`, that is when
        `i * 1e9 < (since + 1) * rate` with `since` the time since the step's start."""
        since_ns = elapsed_ns - self.step.start_offset_ns
        if since_ns < 0:
            return 0
        due = ((since_ns + 1) * self.step.rate_per_s + NS_PER_S - 1) // NS_PER_S
        return min(self.step.events, due)


def worker_slots(step: PlannedStep, worker: int = 0, workers: int = 1) -> WorkerSlots:
    """Worker `worker`'s share of `step`: the slots whose seq is `worker` modulo `workers`."""
    if not 0 <= worker < workers:
        raise ValueError(f"worker {worker} is not in 0..{workers - 1}")
    return WorkerSlots(step, (worker - step.first_seq) % workers, workers)


def step_slots(step: PlannedStep, worker: int = 0, workers: int = 1) -> Iterator[Slot]:
    share = worker_slots(step, worker, workers)
    for index in range(share.first, share.end, share.stride):
        yield Slot(
            share.seq(index), step.number, share.offset_ns(index), step.rate_per_s, step.warmup
        )


def schedule(steps: Sequence[PlannedStep], worker: int = 0, workers: int = 1) -> Iterator[Slot]:
    for step in steps:
        yield from step_slots(step, worker, workers)
