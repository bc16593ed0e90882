"""What the sender saw since its last report line: the slots it started and their lags, and
(with latency histograms) the answers by whole ms from their intended time and the failures by
error. The engine fills it on its hot path (the lags through the step's fold: the same
log-linear histogram, p99 within 0.39 %) and turns it into a line every second."""

from __future__ import annotations

from contract.senderlines import SenderAnswers, SenderProgress
from loadgen.loghist import LogHistogram
from loadgen.stepstate import StepState, ms


class Window:
    __slots__ = ("errors", "lag", "latency", "sent")

    def __init__(self, latency_histograms: bool) -> None:
        self.lag = LogHistogram()
        self.sent = 0
        # Answers by whole ms from their intended time, and failures by error (a Locust fleet
        # worker feeds Locust's statistics from them); None without histograms.
        self.latency: dict[int, int] | None = {} if latency_histograms else None
        self.errors: dict[str, int] = {}

    def answered(self, latency_ms: int, error: str | None) -> None:
        """Count an answer (with histograms only: `latency` is not None)."""
        latency = self.latency
        assert latency is not None
        latency[latency_ms] = latency.get(latency_ms, 0) + 1
        if error is not None:
            self.errors[error] = self.errors.get(error, 0) + 1

    def progress_line(
        self, state: StepState, workers: int, inflight: int, rows_written: int
    ) -> SenderProgress:
        """The step under way this second; the window of started slots starts afresh."""
        lag, self.lag = self.lag, LogHistogram()
        sent, self.sent = self.sent, 0
        return {
            "event": "progress",
            "step": state.planned.number,
            "target_rate_per_s": state.planned.rate_per_s,
            "window_sent": sent * workers,
            "lag_p99_ms": ms(lag.quantile(0.99)),
            "sent": state.sent,
            "ok": state.ok,
            "failures": state.failures,
            "inflight": inflight,
            "inflight_cap_refused": state.inflight_cap_refused,
            "rows_written": rows_written,
            "failures_by_cause": dict(state.causes),
        }

    def answers_line(self, step: int) -> SenderAnswers | None:
        """The answers since the last such line; None when there were none (or no histograms)."""
        if not self.latency:
            return None
        counts, self.latency = self.latency, {}
        errors, self.errors = self.errors, {}
        return {
            "event": "answers",
            "step": step,
            "latency_ms_counts": {str(ms): n for ms, n in sorted(counts.items())},
            "errors": errors,
        }
