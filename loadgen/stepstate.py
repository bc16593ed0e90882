"""One step as the sender lives it: its counts and the lags of its slots, and its summary."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from contract.formulas import achieved_rate_per_s, percentile
from contract.lines import SenderStepSummary
from contract.units import NS_PER_MS
from loadgen.schedule import PlannedStep


@dataclass
class StepState:
    planned: PlannedStep
    start_ns: int
    scheduled: int = 0
    sent: int = 0
    ok: int = 0
    failures: int = 0
    inflight_cap_refused: int = 0  # slots the in-flight cap refused (also in failures)
    last_sent_ns: int | None = None
    gc_ms: float | None = None
    gc_collected: int | None = None
    lags_ns: array[int] = field(default_factory=lambda: array("q"))
    wake_jitter_ns: array[int] = field(default_factory=lambda: array("q"))

    def summary(self, workers: int) -> SenderStepSummary:
        lags = sorted(self.lags_ns)
        wakes = sorted(self.wake_jitter_ns)
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
            "achieved_send_rate_per_s": achieved_rate_per_s(
                self.sent, self.start_ns, self.last_sent_ns, self.planned.rate_per_s
            )
            * workers,
            "lag_p50_ms": ms(percentile(lags, 0.5)),
            "lag_p99_ms": ms(percentile(lags, 0.99)),
            "lag_max_ms": ms(lags[-1] if lags else None),
            "wake_jitter_p99_ms": ms(percentile(wakes, 0.99)),
            "wake_jitter_max_ms": ms(wakes[-1] if wakes else None),
            "gc_ms": self.gc_ms,
            "gc_collected": self.gc_collected,
        }


def ms(ns: int | None) -> float | None:
    """Nanoseconds as milliseconds, to the microsecond."""
    return None if ns is None else round(ns / NS_PER_MS, 3)
