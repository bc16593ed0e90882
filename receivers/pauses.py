"""The receiver's own pauses for garbage collection: kept short, and counted.

A collection runs on the loop's thread and holds it: no request is read or stamped meanwhile,
so every pause is added to the latency of the events arriving then, as if the system under test
had been slow. What a collection costs is what it walks. Start-up (pyarrow, the Prometheus
client, ...) leaves ~69,000 tracked objects that never die, and the collector walked all of them
in each full collection: 23-63 ms every 10-40 s at 20,000/s on `direct`, with no request stamped
meanwhile. That was the run's publish-latency tail (P99.9 52 ms, P99.99 69 ms; after: 18 and
31 ms), and each pause queued ~1,300 requests, for which the sender opened connections (at most
1,994 open; after: 1,256). `freeze_start_up` keeps those objects out of every later collection
(they never die, so no garbage is lost): full collections then walk what the connections hold,
3-6 ms with 1,000 open.

`PauseClock` times every collection (gc.callbacks, ~1 µs each) so the receiver's stats say how
long its loop was held at most: a floor under any tail the run reports for the system.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from receivers.state import Counters

_NS_PER_MS = 1_000_000


def freeze_start_up() -> int:
    """Collect once, then move every object alive now out of later collections; returns how
    many were moved. Call it once start-up is done and before events arrive."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class PauseClock:
    """Counts this process's collections into the receiver's counters (`gc_pauses`) and keeps
    the longest (`gc_pause_max_ms`), from `install` on."""

    __slots__ = ("_started_ns", "counters")

    def __init__(self, counters: Counters) -> None:
        self.counters = counters
        self._started_ns = 0

    def install(self) -> PauseClock:
        gc.callbacks.append(self._observe)
        return self

    def _observe(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._started_ns = time.perf_counter_ns()
            return
        took_ms = (time.perf_counter_ns() - self._started_ns) / _NS_PER_MS
        counters = self.counters
        counters.gc_pauses += 1
        if took_ms > counters.gc_pause_max_ms:
            counters.gc_pause_max_ms = round(took_ms, 3)
