"""Garbage collection inside a step, placed where it costs the schedule least.

The engine turns Python's automatic collector off for a step, because a collection it starts
runs wherever an allocation happens to trip it, in the middle of a burst of due slots. Off for a
whole step, though, cyclic garbage (asyncio's handles and futures, closed connections) piles up
for as long as the step lasts: a one-hour step would end with hours of it. So the pacer collects
itself, right after it has started every due slot and armed its timer for the next one (the
moment furthest from the next slot), every INTERVAL_NS: the young and middle generations each
time, everything every FULL_EVERY-th time, so cyclic garbage lives at most about a minute.
Objects made at start-up are frozen out of every collection (gc.freeze in loadgen.__main__).

What a collection costs is what it walks, and at a high rate that is mostly the requests alive
at that instant (answered ones wait up to 0.1 s for the sweep), not the garbage, which comes
at ~66 objects a second (1,314 in a 20 s step at 20,000/s, nearly all per second rather than
per event). So rarer rounds cost the same each and less in all. Measured with `gc.get_count()`
and the thread's CPU time on the 2-core machine (busy with other jobs), direct: at 20,000/s a
young collection each second took 0.4-3 ms (1,500-5,000 young objects), so every second ~20-60
slots ran late by up to that; every 10 s instead, young and middle took 0.1-2.2 ms and a full
one 1.9 ms; at 10,000/s 0.03-0.75 ms and 0.8-1.1 ms, with lag p99 2.06 ms against 2.07 ms
before (`benchmarks/soak.py --sut direct --pace 10000:150 --no-analyze`).
"""

from __future__ import annotations

import gc
import time

from contract.units import NS_PER_S
from loadgen.stepstate import StepState

INTERVAL_NS = 10 * NS_PER_S
# A pacer that stays behind its schedule has no idle moment: past this, its report collects.
OVERDUE_NS = 5 * NS_PER_S
FULL_EVERY = 6
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
    """The oldest generation the n-th round of a step collects (1-based): 2 (all) every
    FULL_EVERY-th round, 1 (young and middle) otherwise."""
    return 2 if round_number % FULL_EVERY == 0 else 1
