"""Garbage collection in the processes that serve or stamp: start-up kept out, every pause timed.

A collection runs on the thread that tripped it and holds the GIL: an event loop reads and
stamps nothing meanwhile, so every pause is added to the latency of the events arriving then.
What a collection costs is what it walks. Start-up (pyarrow, the Prometheus client, ...) leaves
~69,000 tracked objects that never die; the receiver walked all of them in each full
collection, 23-63 ms every 10-40 s at 20,000/s on `direct`, with no request stamped meanwhile:
the run's publish-latency tail (P99.9 52 ms, P99.99 69 ms; after: 18 and 31 ms), and each pause
queued ~1,300 requests, for which the sender opened connections (at most 1,994 open; after:
1,256). `freeze_start_up` keeps those objects out of every later collection (they never die,
so no garbage is lost): full collections then walk what the connections hold, 3-6 ms with 1,000
open. The sender and the receiver both call it once start-up is done.

`GcClock` times every collection (a gc.callbacks entry, ~1 µs each): the lab's components export
its seconds per generation, the receiver its count and its longest, a floor under any tail a
run reports for the system.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping
from typing import Any


def freeze_start_up() -> int:
    """Collect once, then move every object alive now out of later collections; returns how
    many were moved. Call it once start-up is done and before events arrive."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class GcClock:
    """This process's collections, timed by a gc.callbacks entry: seconds per generation, how
    many, and the longest.

    A collection stops every thread of the process (it holds the GIL), and is not reentrant,
    so one start instant is enough. A "stop" without its "start" (installed mid-collection)
    counts nothing."""

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now
        self.seconds = [0.0] * len(gc.get_stats())
        self.collections = 0
        self.longest_s = 0.0
        self._started: float | None = None

    def __call__(self, phase: str, info: Mapping[str, Any]) -> None:
        if phase == "start":
            self._started = self.now()
            return
        if self._started is not None:
            took_s = self.now() - self._started
            self._started = None
            self.seconds[info["generation"]] += took_s
            self.collections += 1
            self.longest_s = max(self.longest_s, took_s)

    def install(self) -> None:
        """Once per process however often called: a second entry would count twice."""
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def uninstall(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)
