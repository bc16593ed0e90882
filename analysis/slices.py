"""The analysis' unit of work: a slice, whole seconds of one step, bounded in events (pure).

A step of an hour at 20,000/s is 72 M events; read whole by one task it took ~360 bytes per
event in one Python worker (measured: 10.9 GiB for a 30 M-event step), and a cluster could not
split it. So a step is cut into slices of whole seconds of its schedule, each holding at most
`slice_events` slots (`slice_seconds`); every figure of a step is merged from its slices'
(analysis.job), and Spark runs the slices of one step on every executor.

A sent event's slice follows from its own columns: its step, its step's rate and its intended
second since the schedule start. Slices are whole seconds of intended time, so a second's
digest (analysis.digests) is made by one slice, whole. The slots of a slice are a contiguous
range (a step's slot i is due at `i * 1e9 // rate`, in slot order), so a delivery, whose id
carries its slot, is routed to its slice as it was to its step (analysis.routing).

A slice's key packs (step, index) into one int64, ordered as (step, index), never negative
(analysis.routing.NO_ROUTE is -1).
"""

from __future__ import annotations

import numpy as np

from contract.units import NS_PER_S

# Events per slice by default: a slice costs its task ~360 bytes per event at most (measured),
# so ~0.4 GiB per task; the 1k-2k matrix's 30-second steps stay one slice each.
SLICE_EVENTS = 1_000_000
INDEX_BITS = 32
_INDEX_MASK = (1 << INDEX_BITS) - 1


def slice_seconds(rate_per_s: int | np.ndarray, slice_events: int) -> np.ndarray:
    """Seconds per slice at this rate: as many whole seconds as `slice_events` allows, at
    least one (a step faster than `slice_events` per second is sliced per second)."""
    rate = np.maximum(np.asarray(rate_per_s, dtype=np.int64), 1)
    return np.maximum(slice_events // rate, 1)


def slice_keys(
    steps: np.ndarray,
    rates_per_s: np.ndarray,
    intended_ns: np.ndarray,
    start_ns: int,
    slice_events: int,
) -> np.ndarray:
    """Each sent event's slice key: its step and its intended second's slice index."""
    seconds = (np.asarray(intended_ns, dtype=np.int64) - start_ns) // NS_PER_S
    index = np.clip(seconds // slice_seconds(rates_per_s, slice_events), 0, _INDEX_MASK)
    return (np.asarray(steps, dtype=np.int64) << INDEX_BITS) | index


def key_of(step: int, index: int) -> int:
    return (step << INDEX_BITS) | index


def step_of(key: int) -> int:
    return key >> INDEX_BITS


def index_of(key: int) -> int:
    return key & _INDEX_MASK


def top_count(samples: int, margin: int) -> int:
    """How many of a step's largest values to keep so that P99.99 of `samples` values is the
    exact order statistic: the rank q(n-1) lies at most ceil(n * 1e-4) from the top, and
    linear interpolation reads the value above it too (`margin` covers both)."""
    return -(-samples // 10_000) + margin
