"""One step as the sender lives it: its counts, the lags of its slots, and its summary.

Its memory does not grow with the step's events: the pacer appends each slot's lag (and each
wake-up's jitter) to a small buffer, and `fold` empties the buffer into log-linear histograms
(loadgen.loghist: fixed size, quantiles within 0.39 %) about once a second and whenever it
holds FOLD_AT values, so the buffer holds at most a second's slots or FOLD_AT, whichever is
fewer, and a step of an hour costs what a step of a second does.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from contract.senderlines import SenderStepSummary
from contract.units import NS_PER_MS
from loadgen.loghist import LogHistogram
from loadgen.schedule import PlannedStep
from runtime.formulas import achieved_rate_per_s

# Values buffered before a fold is due whatever the time (8 bytes each: 512 KiB).
FOLD_AT = 65_536


@dataclass
class StepState:
    planned: PlannedStep
    start_ns: int
    scheduled: int = 0
    sent: int = 0
    ok: int = 0
    failures: int = 0
    inflight_cap_refused: int = 0  # slots the in-flight cap refused (also in failures)
    # The failures by cause (runtime.failcause), for the live lines and the step's summary.
    causes: dict[str, int] = field(default_factory=dict)
    last_sent_ns: int | None = None
    gc_ms: float | None = None
    gc_collected: int | None = None
    gc_step_collections: int = 0  # collections inside the step (loadgen.collector)
    gc_step_max_ms: float | None = None
    # Not yet folded into the histograms below (the pacer's hot path appends here).
    lags_ns: array[int] = field(default_factory=lambda: array("q"))
    wake_jitter_ns: array[int] = field(default_factory=lambda: array("q"))
    lag: LogHistogram = field(default_factory=LogHistogram)
    wake_jitter: LogHistogram = field(default_factory=LogHistogram)

    def fail(self, cause: str) -> None:
        """One more failure, of `cause`."""
        self.failures += 1
        self.causes[cause] = self.causes.get(cause, 0) + 1

    def fold(self, window: LogHistogram | None = None) -> None:
        """Count the buffered values in the step's histograms (the lags in `window` too)."""
        if self.lags_ns:
            pending, self.lags_ns = self.lags_ns, array("q")
            batch = LogHistogram()
            batch.add(np.frombuffer(pending, dtype=np.int64))
            self.lag.merge(batch)
            if window is not None:
                window.merge(batch)
        if self.wake_jitter_ns:
            pending, self.wake_jitter_ns = self.wake_jitter_ns, array("q")
            self.wake_jitter.add(np.frombuffer(pending, dtype=np.int64))

    def summary(self, workers: int) -> SenderStepSummary:
        self.fold()
        lag, wake = self.lag, self.wake_jitter
        return {
            "step": self.planned.number,
            "warmup": self.planned.warmup,
            "target_rate_per_s": self.planned.rate_per_s,
            "duration_s": self.planned.duration_s,
            "worker_target_rate_per_s": self.planned.rate_per_s / workers,
            "scheduled": self.scheduled,
            "sent": self.sent,
            "ok": self.ok,
            "failures": self.failures,
            "inflight_cap_refused": self.inflight_cap_refused,
            "failures_by_cause": dict(self.causes),
            "achieved_send_rate_per_s": achieved_rate_per_s(
                self.sent, self.start_ns, self.last_sent_ns, self.planned.rate_per_s
            )
            * workers,
            "lag_p50_ms": ms(lag.quantile(0.5)),
            "lag_p99_ms": ms(lag.quantile(0.99)),
            "lag_max_ms": ms(lag.max_ns),
            "wake_jitter_p99_ms": ms(wake.quantile(0.99)),
            "wake_jitter_max_ms": ms(wake.max_ns),
            "gc_ms": self.gc_ms,
            "gc_collected": self.gc_collected,
            "gc_step_max_ms": self.gc_step_max_ms,
        }


def ms(ns: int | None) -> float | None:
    """Nanoseconds as milliseconds, to the microsecond."""
    return None if ns is None else round(ns / NS_PER_MS, 3)
