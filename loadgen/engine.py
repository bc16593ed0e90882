"""The open-loop sender engine on gevent.

Import only from `loadgen.__main__`, which monkey-patches the process first (DESIGN §2).

One pacer greenlet walks the schedule and, at each slot, spawns a greenlet that sends one event;
it never waits for earlier events to be answered, so a slow system under test cannot slow the
pace (no coordinated omission). The only bound is the in-flight cap, and every slot refused by it
is recorded as a failure rather than silently delayed. Transports (HTTP now, Kafka later) only
send; stamping, recording and pacing live here, so every transport is measured the same way.
"""

from __future__ import annotations

import gc
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import gevent
import gevent.event

from evbench.formulas import achieved_rate_per_s, percentile
from evbench.parquet import PartWriter, slices
from evbench.records import DECOY_EVENT_TYPE, EVENT_TYPE, INFLIGHT_CAP_ERROR, WARMUP_EVENT_TYPE
from loadgen.payload import PayloadBuilder, event_id
from loadgen.schedule import NS_PER_S, PlannedStep, step_slots

# Yield to the hub at least this often while catching up, so spawned sends actually start.
_MAX_SLOTS_WITHOUT_YIELD = 16


class Transport(Protocol):
    def send(self, event_id: str, payload: bytes, ce_type: str) -> tuple[int, str | None, bool]:
        """Send one event; (status, error or None, whether any answer came back)."""
        ...

    def close(self) -> None: ...


@dataclass
class StepState:
    planned: PlannedStep
    start_ns: int
    scheduled: int = 0
    sent: int = 0
    ok: int = 0
    failures: int = 0
    cap_hits: int = 0
    last_sent_ns: int | None = None
    gc_ms: float | None = None
    gc_collected: int | None = None
    lags_ns: array = field(default_factory=lambda: array("q"))

    def summary(self, workers: int) -> dict:
        lags = sorted(self.lags_ns)
        p99 = percentile(lags, 0.99)
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
            "inflight_cap_hits": self.cap_hits,
            "achieved_send_rate_per_s": achieved_rate_per_s(
                self.sent, self.start_ns, self.last_sent_ns, self.planned.rate_per_s
            )
            * workers,
            "lag_p50_ms": _ms(percentile(lags, 0.5)),
            "lag_p99_ms": _ms(p99),
            "lag_max_ms": _ms(lags[-1] if lags else None),
            "gc_ms": self.gc_ms,
            "gc_collected": self.gc_collected,
        }


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


class Engine:
    def __init__(
        self,
        transport: Transport,
        writer: PartWriter,
        steps: tuple[PlannedStep, ...],
        payloads: PayloadBuilder,
        *,
        run_tag: str,
        worker: int = 0,
        workers: int = 1,
        max_inflight: int = 4096,
        drain_timeout_s: float = 10.0,
        flush_interval_s: float = 1.0,
        decoy_every: int = 0,
        emit: Callable[[dict], None] = lambda doc: None,
    ) -> None:
        self.transport = transport
        self.writer = writer
        self.steps = steps
        self.payloads = payloads
        self.run_tag = run_tag
        self.worker = worker
        self.workers = workers
        self.max_inflight = max_inflight
        self.drain_timeout_s = drain_timeout_s
        self.flush_interval_s = flush_interval_s
        self.decoy_every = decoy_every
        self.emit = emit
        self.stop_reason: str | None = None
        self.force_stop = False
        self._wake = gevent.event.Event()
        self._inflight: dict[int, tuple] = {}
        self._current: StepState | None = None
        self._window_lags_ns = array("q")
        self._window_sent = 0
        self.states: list[StepState] = []
        self.flush_errors = 0
        self.unanswered_at_end = 0

    # control
    def stop(self, reason: str) -> None:
        """Stop scheduling (signal handler); a second call also skips waiting for in-flight."""
        if self.stop_reason is not None:
            self.force_stop = True
        self.stop_reason = reason
        self._wake.set()

    # main loop
    def run(self, start_ns: int) -> dict:
        self.start_ns = start_ns
        # First-call costs (thread start, pyarrow's lazy init) belong before the first slot.
        gevent.get_hub().threadpool.apply(self.writer.warm_up)
        flusher = gevent.spawn(self._flush_forever)
        reporter = gevent.spawn(self._report_forever)
        try:
            for step in self.steps:
                if not self._wait_until(start_ns + step.start_offset_ns):
                    break
                state = self._run_step(step)
                self._after_step(state)
            self._drain()
        finally:
            reporter.kill()
            flusher.kill()
            gc.enable()
            self._flush()
            self.transport.close()
        return self.summary()

    def _run_step(self, step: PlannedStep) -> StepState:
        step_start_ns = self.start_ns + step.start_offset_ns
        state = StepState(step, step_start_ns)
        self.states.append(state)
        self._current = state
        self.emit(
            {
                "event": "step_start",
                "step": step.number,
                "warmup": step.warmup,
                "target_rate_per_s": step.rate_per_s,
                "duration_s": step.duration_s,
                "start_ns": step_start_ns,
            }
        )
        clock = time.time_ns
        sleep = gevent.sleep
        spawn = gevent.spawn_raw
        fire = self._fire
        inflight = self._inflight
        start_ns = self.start_ns
        since_yield = 0
        # Collections during a step would stall every in-flight send; they run between steps.
        gc.disable()
        for slot in step_slots(step, self.worker, self.workers):
            intended_ns = start_ns + slot.offset_ns
            wait_ns = intended_ns - clock()
            if wait_ns > 0:
                sleep(wait_ns / NS_PER_S)
                since_yield = 0
            else:
                since_yield += 1
                if since_yield >= _MAX_SLOTS_WITHOUT_YIELD:
                    sleep(0)
                    since_yield = 0
            if self.stop_reason is not None:
                break
            if len(inflight) >= self.max_inflight:
                state.cap_hits += 1
                state.failures += 1
                self._record_unsent(slot, intended_ns, INFLIGHT_CAP_ERROR)
                continue
            state.scheduled += 1
            # Registered here, not in the send greenlet, so the drain sees sends not yet started.
            inflight[slot.seq] = (state, slot, intended_ns, None)
            spawn(fire, state, slot, intended_ns)
        sleep(0)  # let the last spawned sends start before the gap's GC
        return state

    def _fire(self, state: StepState, slot, intended_ns: int) -> None:
        eid = event_id(self.run_tag, self.worker, slot.seq)
        payload = self.payloads.build(eid)
        sent_ns = time.time_ns()
        if slot.seq not in self._inflight:
            return  # the run ended before this send started; its row is already written
        self._inflight[slot.seq] = (state, slot, intended_ns, sent_ns)
        state.sent += 1
        state.last_sent_ns = sent_ns
        lag_ns = sent_ns - intended_ns
        state.lags_ns.append(lag_ns)
        self._window_lags_ns.append(lag_ns)
        self._window_sent += 1
        status, error, answered = self.transport.send(eid, payload, self._ce_type(slot))
        ack_ns = time.time_ns() if answered else None
        if self._inflight.pop(slot.seq, None) is None:
            return  # given up on at the end of the run; its row is already written
        if 200 <= status < 300:
            state.ok += 1
        else:
            state.failures += 1
        self.writer.rows.append(
            (
                eid,
                slot.seq,
                slot.step,
                slot.warmup,
                self._is_decoy(slot),
                slot.rate_per_s,
                intended_ns,
                sent_ns,
                ack_ns,
                status,
                error,
                self.worker,
                len(payload),
            )
        )

    def _is_decoy(self, slot) -> bool:
        every = self.decoy_every
        return bool(every) and not slot.warmup and slot.seq % every == every - 1

    def _ce_type(self, slot) -> str:
        if slot.warmup:
            return WARMUP_EVENT_TYPE
        return DECOY_EVENT_TYPE if self._is_decoy(slot) else EVENT_TYPE

    def _record_unsent(self, slot, intended_ns: int, error: str) -> None:
        self.writer.rows.append(
            (
                event_id(self.run_tag, self.worker, slot.seq),
                slot.seq,
                slot.step,
                slot.warmup,
                self._is_decoy(slot),
                slot.rate_per_s,
                intended_ns,
                None,
                None,
                0,
                error,
                self.worker,
                self.payloads.size_bytes,
            )
        )

    def _after_step(self, state: StepState) -> None:
        """Let the step's answers come in, report it, and collect garbage in the gap."""
        step = state.planned
        gap_end_ns = self.start_ns + step.end_offset_ns + self._gap_ns(step)
        settle_until_ns = (self.start_ns + step.end_offset_ns + gap_end_ns) // 2
        while self._inflight and time.time_ns() < settle_until_ns and self.stop_reason is None:
            self._wake.wait(0.01)
        inflight_at_step_end = len(self._inflight)
        gc.enable()
        started = time.perf_counter()
        # What the collector frees shows whether a step leaves cyclic garbage (RSS growth).
        state.gc_collected = gc.collect()
        state.gc_ms = round((time.perf_counter() - started) * 1e3, 2)
        # Answers still out are counted in the run's final summary, not in this line.
        self.emit(
            {
                "event": "step_end",
                **state.summary(self.workers),
                "inflight_at_step_end": inflight_at_step_end,
            }
        )

    def _gap_ns(self, step: PlannedStep) -> int:
        later = [s for s in self.steps if s.start_offset_ns > step.start_offset_ns]
        return later[0].start_offset_ns - step.end_offset_ns if later else 0

    def _wait_until(self, when_ns: int) -> bool:
        """Sleep until `when_ns` unless stopped; False when stopped."""
        while self.stop_reason is None:
            remaining_ns = when_ns - time.time_ns()
            if remaining_ns <= 0:
                return True
            self._wake.wait(min(remaining_ns / NS_PER_S, 0.5))
        return False

    def _drain(self) -> None:
        started = time.monotonic()
        deadline = started + self.drain_timeout_s
        announced = False
        while self._inflight and time.monotonic() < deadline and not self.force_stop:
            if not announced and time.monotonic() - started > 0.5:
                announced = True  # only a slow drain is worth a line
                self.emit(
                    {
                        "event": "draining",
                        "inflight": len(self._inflight),
                        "timeout_s": self.drain_timeout_s,
                    }
                )
            gevent.sleep(0.01)
        # Whatever is still unanswered is recorded now, as sent without an answer.
        for seq, (state, slot, intended_ns, sent_ns) in list(self._inflight.items()):
            del self._inflight[seq]
            state.failures += 1
            self.unanswered_at_end += 1
            error = (
                f"no answer within the {self.drain_timeout_s:g} s drain timeout"
                if sent_ns is not None
                else "run stopped before this event was sent"
            )
            self.writer.rows.append(
                (
                    event_id(self.run_tag, self.worker, seq),
                    seq,
                    slot.step,
                    slot.warmup,
                    self._is_decoy(slot),
                    slot.rate_per_s,
                    intended_ns,
                    sent_ns,
                    None,
                    0,
                    error,
                    self.worker,
                    self.payloads.size_bytes,
                )
            )

    # background greenlets
    def _flush(self) -> None:
        rows = self.writer.take()
        if not rows:
            return
        try:
            batches = []
            for part in slices(rows):
                batches.append(self.writer.batch(part))
                gevent.sleep(0)  # due slots go out between slices
            gevent.get_hub().threadpool.apply(self.writer.write_batches, (batches,))
        except Exception as exc:
            self.flush_errors += 1
            self.writer.rows[:0] = rows
            self.emit(
                {"event": "warning", "message": f"writing sent records failed, will retry: {exc}"}
            )

    def _flush_forever(self) -> None:
        next_tick = time.monotonic()
        while True:
            next_tick += self.flush_interval_s
            gevent.sleep(max(0.0, next_tick - time.monotonic()))
            self._flush()

    def _report_forever(self) -> None:
        next_tick = time.monotonic()
        while True:
            next_tick += 1.0
            gevent.sleep(max(0.0, next_tick - time.monotonic()))
            state = self._current
            if state is None:
                continue
            lags, self._window_lags_ns = sorted(self._window_lags_ns), array("q")
            window_sent, self._window_sent = self._window_sent, 0
            self.emit(
                {
                    "event": "progress",
                    "step": state.planned.number,
                    "target_rate_per_s": state.planned.rate_per_s,
                    "window_sent": window_sent * self.workers,
                    "lag_p99_ms": _ms(percentile(lags, 0.99)),
                    "sent": state.sent,
                    "ok": state.ok,
                    "failures": state.failures,
                    "inflight": len(self._inflight),
                    "inflight_cap_hits": state.cap_hits,
                    "rows_written": self.writer.rows_written,
                }
            )

    def summary(self) -> dict:
        steps = [state.summary(self.workers) for state in self.states]
        return {
            "start_ns": self.start_ns,
            "worker": self.worker,
            "workers": self.workers,
            "interrupted": self.stop_reason is not None,
            "stop_reason": self.stop_reason,
            "steps": steps,
            "sent": sum(s["sent"] for s in steps),
            "ok": sum(s["ok"] for s in steps),
            "failures": sum(s["failures"] for s in steps),
            "inflight_cap_hits": sum(s["inflight_cap_hits"] for s in steps),
            "unanswered_at_end": self.unanswered_at_end,
            "rows_written": self.writer.rows_written,
            "parts_written": self.writer.parts_written,
            "flush_errors": self.flush_errors,
        }
