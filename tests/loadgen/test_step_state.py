"""A step's state stays the same size however many slots it holds (loadgen.stepstate), and the
in-step collections (loadgen.collector) collect what piles up while automatic GC is off."""

from __future__ import annotations

import gc
import sys
import tracemalloc
import weakref

import numpy as np
import pytest

from loadgen.collector import FULL_EVERY, INTERVAL_NS, OVERDUE_NS, StepCollector, generation_for
from loadgen.loghist import LogHistogram
from loadgen.schedule import PlannedStep
from loadgen.stepstate import FOLD_AT, StepState
from runtime.formulas import percentile

_PER_SECOND = 20_000  # the pacer folds about once a second: at 20,000/s, this many values


def _state() -> StepState:
    step = PlannedStep(
        number=1,
        rate_per_s=_PER_SECOND,
        duration_s=3600,
        warmup=False,
        start_offset_ns=0,
        first_seq=0,
    )
    return StepState(step, start_ns=0)


def _observe(state: StepState, window: LogHistogram, slots: int, seed: int) -> list[int]:
    """`slots` lags and wake-ups appended as the pacer does, folded as its report does."""
    lags = np.random.default_rng(seed).lognormal(np.log(30_000), 1.0, slots).astype(np.int64)
    for start in range(0, slots, _PER_SECOND):
        chunk = lags[start : start + _PER_SECOND].tolist()
        for lag in chunk:
            state.lags_ns.append(lag)
            state.wake_jitter_ns.append(lag // 2)
        state.fold(window)
    return lags.tolist()


def _footprint_bytes(state: StepState) -> int:
    return (
        sys.getsizeof(state.lags_ns)
        + sys.getsizeof(state.wake_jitter_ns)
        + state.lag.counts.nbytes
        + state.wake_jitter.counts.nbytes
    )


def test_a_step_of_a_million_slots_holds_what_a_step_of_a_thousand_does():
    sizes, traced = [], []
    for slots in (1_000, 1_000_000):
        state, window = _state(), LogHistogram()
        tracemalloc.start()
        _observe(state, window, slots, seed=1)
        traced.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
        sizes.append(_footprint_bytes(state))
        assert state.lag.count == slots and state.wake_jitter.count == slots
    assert sizes[0] == sizes[1]
    # What the Python heap holds after the step (lags kept per slot would be 16 MB here).
    assert traced[1] - traced[0] < 256 * 1024, traced


def test_the_summary_reads_the_histograms_within_their_resolution():
    state, window = _state(), LogHistogram()
    lags = sorted(_observe(state, window, 100_000, seed=2))
    state.lags_ns.append(lags[-1] * 2)  # a last slot not yet folded: the summary folds it
    lags.append(lags[-1] * 2)
    summary = state.summary(workers=1)
    for key, fraction in (("lag_p50_ms", 0.5), ("lag_p99_ms", 0.99)):
        exact_ms = percentile(lags, fraction) / 1e6
        assert summary[key] == pytest.approx(exact_ms, rel=1 / 256, abs=0.0005), key
    assert summary["lag_max_ms"] == round(lags[-1] / 1e6, 3)  # exact
    assert summary["wake_jitter_max_ms"] == round(max(lags[:-1]) // 2 / 1e6, 3)
    assert window.count == 100_000  # the progress window saw every folded lag


def test_fold_at_bounds_the_buffer_a_second_holds():
    assert FOLD_AT * 8 <= 1024 * 1024  # at most a MiB of lags between folds


# round -> oldest generation collected: young and middle every round, all every 6th.
GENERATIONS = {1: 1, 5: 1, FULL_EVERY: 2, 7: 1, 12: 2, 13: 1}


@pytest.mark.parametrize("round_number", GENERATIONS)
def test_the_generation_each_round_collects(round_number):
    assert generation_for(round_number) == GENERATIONS[round_number]


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_an_in_step_round_frees_cycles_made_while_automatic_gc_is_off():
    state = _state()
    collector = StepCollector()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        collector.start(now_mono_ns=0)
        assert collector.due_ns == INTERVAL_NS
        assert not collector.overdue(INTERVAL_NS + OVERDUE_NS - 1)
        assert collector.overdue(INTERVAL_NS + OVERDUE_NS)  # the report's, for a pacer behind
        node = _Node()
        alive = weakref.ref(node)
        del node
        assert alive() is not None  # off: the cycle stays
        collector.collect(state, now_mono_ns=collector.due_ns)
        assert alive() is None
        assert collector.due_ns == 2 * INTERVAL_NS
        assert state.gc_step_collections == 1 and state.gc_step_max_ms is not None
        summary = state.summary(workers=1)
        assert summary["gc_step_max_ms"] == state.gc_step_max_ms
    finally:
        if was_enabled:
            gc.enable()
