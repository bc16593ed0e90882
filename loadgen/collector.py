"""Garbage collection inside a step, placed where it costs the schedule least.

The engine turns Python's automatic collector off for a step, because a collection it starts
runs wherever an allocation happens to trip it, in the middle of a burst of due slots. Off for a
whole step, though, cyclic garbage (asyncio's handles and futures, closed connections) piles up
for as long as the step lasts: a one-hour step would end with hours of it. So the pacer collects
itself, right after it has started every due slot and armed its timer for the next one (the
moment furthest from the next slot), once every INTERVAL_NS: the young generation each time,
the middle one every MIDDLE_EVERY-th time and everything every FULL_EVERY-th time, so garbage
lives at most about a minute. Objects made at start-up are frozen out of every collection
(gc.freeze in loadgen.__main__), so a full one only walks what the run made since.

Measured on the 2-core machine, direct at 20,000 events/s (`benchmarks/soak.py`): a young
collection takes ~0.05 ms, a middle one ~0.1 ms and a full one ~1.5 ms, against a slot every
0.05 ms; at 1 s / 10 s / 60 s that is ~1 slot in 10^5 late by up to 1.5 ms: lag p99 unchanged.
"""

from __future__ import annotations

import gc
import time

from contract.units import NS_PER_S
from loadgen.stepstate import StepState

INTERVAL_NS = NS_PER_S
# A pacer that stays behind its schedule has no idle moment: past this, its report collects.
OVERDUE_NS = 5 * NS_PER_S
MIDDLE_EVERY = 10
FULL_EVERY = 60
_NS_PER_MS = 1_000_000


class StepCollector:
    """When the next in-step collection is due (monotonic ns) and which generation it takes."""

    __slots__ = ("due_ns", "rounds")

    def __init__(self) -> None:
        self.due_ns = 0
        self.rounds = 0

    def start(self, now_mono_ns: int) -> None:
        """A step begins (after the between-steps collection): the first round an interval on."""
        self.due_ns = now_mono_ns + INTERVAL_NS
        self.rounds = 0

    def overdue(self, now_mono_ns: int) -> bool:
        return now_mono_ns >= self.due_ns + OVERDUE_NS

    def collect(self, state: StepState, now_mono_ns: int) -> None:
        """One round (call it when `now_mono_ns >= due_ns`), timed into the step's summary."""
        self.rounds += 1
        generation = generation_for(self.rounds)
        started = time.perf_counter_ns()
        gc.collect(generation)
        took_ms = round((time.perf_counter_ns() - started) / _NS_PER_MS, 3)
        state.gc_step_collections += 1
        if state.gc_step_max_ms is None or took_ms > state.gc_step_max_ms:
            state.gc_step_max_ms = took_ms
        # From now, not from when it was due: a pacer that was behind does not collect twice.
        self.due_ns = now_mono_ns + INTERVAL_NS


def generation_for(round_number: int) -> int:
    """The generation the n-th round of a step collects (1-based): 2 every FULL_EVERY-th,
    1 every MIDDLE_EVERY-th, 0 otherwise."""
    if round_number % FULL_EVERY == 0:
        return 2
    if round_number % MIDDLE_EVERY == 0:
        return 1
    return 0
