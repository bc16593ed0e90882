"""A consumer's memory over a backlog, in the figures seeds 000 and 001 read by hand. Pure.

Phases: idle (before its first message), the drain (the backlog consumed), and after it. The
figures: the idle baseline, the peak, the plateau after the drain, and whether memory came
back to idle, judged with a stated tolerance (allocators keep freed pages; a few MiB either
side is noise, not a leak).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MIB = 2**20
# Back to idle: within 10 % of the idle baseline or 2 MiB, whichever is larger.
RETURN_TOLERANCE = 0.10
RETURN_SLACK_BYTES = 2 * MIB
# The plateau: the median of the last seconds after the drain.
PLATEAU_S = 10.0


@dataclass(frozen=True)
class MemoryFigures:
    idle_bytes: int | None  # median before the first message (None: no sample before it)
    peak_bytes: int  # the largest sample, or the kernel's high-water mark if larger
    plateau_bytes: int | None  # median of the last PLATEAU_S after the drain (None: no drain)
    returned_to_idle: bool | None  # None when idle or plateau is unknown
    tolerance_bytes: int | None  # how far above idle still counts as returned


def memory_figures(
    series: Sequence[tuple[float, int]],
    first_message_s: float | None,
    drained_s: float | None,
    high_water_bytes: int | None = None,
) -> MemoryFigures:
    """`series`: (seconds since the consumer started, bytes) samples, in time order."""
    if not series:
        raise ValueError("no memory samples")
    before = [b for t, b in series if first_message_s is None or t < first_message_s]
    idle = int(statistics.median(before)) if before and first_message_s is not None else None
    peak = max(max(b for _, b in series), high_water_bytes or 0)
    plateau = None
    if drained_s is not None:
        end_s = series[-1][0]
        after = [b for t, b in series if t >= max(drained_s, end_s - PLATEAU_S)]
        plateau = int(statistics.median(after)) if after else None
    tolerance = None if idle is None else max(int(idle * RETURN_TOLERANCE), RETURN_SLACK_BYTES)
    returned = (
        None
        if idle is None or plateau is None or tolerance is None
        else plateau <= idle + tolerance
    )
    return MemoryFigures(idle, peak, plateau, returned, tolerance)
