"""Formulas shared by the sender, the run report and the analysis (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from contract.units import NS_PER_S

Number = TypeVar("Number", int, float)


def percentile(sorted_values: Sequence[Number], fraction: float) -> Number | None:
    """Nearest-rank percentile of already-sorted values; None when there are none."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def achieved_rate_per_s(
    count: int, step_start_ns: int, last_sent_ns: int | None, rate_per_s: int
) -> float:
    """Sends per second over the step as the sender actually spent it.

    A step of n slots on time spans (n-1)/rate from first to last slot; adding one slot period
    makes an on-time step come out at exactly its rate, and a lagging one below it.
    """
    if count == 0 or last_sent_ns is None:
        return 0.0
    span_s = max(0, last_sent_ns - step_start_ns) / NS_PER_S + 1 / rate_per_s
    return count / span_s
