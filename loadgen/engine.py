"""The open-loop sender engine on an asyncio event loop (uvloop in `python -m loadgen`).

A precise timer (`loadgen.ticker`) wakes the pacer at each slot's instant on the monotonic
clock; the pacer starts every slot that is due and re-arms for the next one. Starting a slot
never waits for anything: the transport writes the request on an idle connection or queues it
for one, and answers are read by the same loop whenever they come. So a slow, stuck or refusing
system under test cannot delay a slot (no coordinated omission). The only bound is the in-flight
cap, and every slot refused by it is recorded as a failure at its own time.

Times in records are wall-clock (`time.time_ns()`, like the receiver's stamps); the schedule's
waiting is done on the monotonic clock, so a wall-clock step during a run shows up in the lag
rather than bending the schedule. Two figures tell the sender's health apart: wake jitter (how
late the timer woke the pacer) and lag (request start minus intended time).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections import deque
from collections.abc import Callable
from functools import reduce

from contract.lines import WarningLine
from contract.records import INFLIGHT_CAP_ERROR
from contract.senderlines import Draining, EngineSummary, SenderLine, StepEnd, StepStart
from contract.units import MS_PER_S, NS_PER_MS
from loadgen.collector import StepCollector
from loadgen.recorder import NO_TIME, RowPlan, SentRecorder, is_decoy
from loadgen.request import DECOY, MEASURE, WARMUP, Request, Transport
from loadgen.schedule import NS_PER_S, PlannedStep, WorkerSlots, worker_slots
from loadgen.stepstate import FOLD_AT, StepState
from loadgen.ticker import Ticker, every
from loadgen.window import Window
from runtime.failcause import INFLIGHT_CAP, added, failure_cause
from runtime.parquet import PartWriter

# Slots started in one wake-up before the loop reads answers again, when the pacer is behind.
_MAX_SLOTS_PER_WAKE = 64
# How often timed-out requests are looked for.
_SWEEP_INTERVAL_S = 0.1


class _Cursor:
    """Where the pacer is within the current step: the next slot index of this worker."""

    __slots__ = ("done", "index", "slots", "state")

    def __init__(self, slots: WorkerSlots, state: StepState, done: asyncio.Future[None]) -> None:
        self.slots = slots
        self.state = state
        self.index = slots.first
        self.done = done


class Engine:
    def __init__(
        self,
        transport: Transport,
        writer: PartWriter,
        steps: tuple[PlannedStep, ...],
        *,
        plan: RowPlan,
        workers: int = 1,
        max_inflight: int = 4096,
        request_timeout_s: float = 30.0,
        drain_timeout_s: float = 10.0,
        flush_interval_s: float = 1.0,
        emit: Callable[[SenderLine], None] = lambda line: None,
        latency_histograms: bool = False,
    ) -> None:
        self.transport = transport
        self.writer = writer
        self.steps = steps
        self.plan = plan
        self.worker = plan.worker
        self.workers = workers
        self.max_inflight = max_inflight
        self.request_timeout_s = request_timeout_s
        self.drain_timeout_s = drain_timeout_s
        self.flush_interval_s = flush_interval_s
        self.emit = emit
        self.stop_reason: str | None = None
        self.force_stop = False
        self.states: list[StepState] = []
        self.unanswered_at_end = 0
        self.timed_out = 0
        self.inflight = 0
        self.start_ns = 0
        self._mono_minus_wall_ns = 0
        self.records = SentRecorder(writer, plan, self._warn)
        self._started: deque[Request] = deque()  # in start order, for timeouts and the drain
        self._cursor: _Cursor | None = None
        self.window = Window(latency_histograms)
        self.collector = StepCollector()
        self._wake: asyncio.Event | None = None
        self._ticker: Ticker | None = None
        self._precise_timer: bool | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._id_prefix = plan.event_id_prefix.encode()
        transport.bind(self._complete)

    # control
    def stop(self, reason: str) -> None:
        """Stop scheduling (signal handler); a second call also skips waiting for in-flight."""
        if self.stop_reason is not None:
            self.force_stop = True
        self.stop_reason = reason
        if self._wake is not None:
            self._wake.set()
        cursor = self._cursor
        if cursor is not None and not cursor.done.done():
            cursor.done.set_result(None)

    # main loop
    async def warm_up(self) -> None:
        """First-call costs (the writer's thread, pyarrow's lazy init: 0.1 s here, over a second
        on a loaded machine). Await it before fixing the start instant, or the first slots of
        the schedule are late by however long it took."""
        await asyncio.get_running_loop().run_in_executor(None, self.writer.warm_up)

    async def run(self, start_ns: int) -> EngineSummary:
        """Run the schedule whose slot 0 is at wall-clock `start_ns`; returns the summary."""
        loop = asyncio.get_running_loop()
        self.start_ns = start_ns
        # The schedule in monotonic terms: one reading of both clocks, taken together.
        self._mono_minus_wall_ns = time.monotonic_ns() - time.time_ns()
        self._wake = asyncio.Event()
        self._ticker = Ticker(loop, self._on_tick)
        tasks = [
            loop.create_task(every(self.flush_interval_s, self.records.flush)),
            loop.create_task(every(1.0, self._report)),
            loop.create_task(self._sweep_forever()),
        ]
        try:
            for step in self.steps:
                step_start_ns = start_ns + step.start_offset_ns
                await self._prepare(step, step_start_ns)
                if not await self._wait_until(step_start_ns):
                    break
                state = await self._run_step(step)
                await self._after_step(state)
                if self.stop_reason is not None:
                    break
            await self._drain()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.records.settle()
            self._emit_answers()  # the last ones, the drain's included
            gc.enable()
            self._precise_timer = self._ticker.precise
            self._ticker.close()
            await self.records.flush()
            await self.transport.close()
        return self.summary()

    async def _prepare(self, step: PlannedStep, step_start_ns: int) -> None:
        """Open connections for the step ahead of its start, for at most the time left."""
        left_s = max(0.0, (step_start_ns - time.time_ns()) / NS_PER_S - 0.05)
        # Past the deadline the pool keeps growing in the background (asyncio.wait cancels
        # nothing); the step starts on time.
        task = asyncio.get_running_loop().create_task(self.transport.prepare(step.rate_per_s))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        await asyncio.wait({task}, timeout=left_s)

    def _mono(self, wall_ns: int) -> int:
        return wall_ns + self._mono_minus_wall_ns

    async def _run_step(self, step: PlannedStep) -> StepState:
        loop = asyncio.get_running_loop()
        state = StepState(step, self.start_ns + step.start_offset_ns)
        self.states.append(state)
        line: StepStart = {
            "event": "step_start",
            "step": step.number,
            "warmup": step.warmup,
            "target_rate_per_s": step.rate_per_s,
            "duration_s": step.duration_s,
            "start_ns": state.start_ns,
        }
        self.emit(line)
        cursor = _Cursor(worker_slots(step, self.worker, self.workers), state, loop.create_future())
        self._cursor = cursor
        # Automatic collections would run wherever an allocation trips them, amid due slots:
        # in a step the pacer collects itself at its idle moments (loadgen.collector).
        gc.disable()
        self.collector.start(time.monotonic_ns())
        if cursor.index >= cursor.slots.end:
            cursor.done.set_result(None)
        else:
            self._on_tick()
        await cursor.done
        self._cursor = None
        return state

    def _on_tick(self) -> None:
        """Start every slot the schedule says is due, then re-arm the timer for the next one."""
        cursor = self._cursor
        if cursor is None or cursor.done.done():
            return
        slots, state = cursor.slots, cursor.state
        step, stride = slots.step, slots.stride
        wall0 = self.start_ns
        mono0 = self._mono(wall0)
        clock = time.monotonic_ns
        now = clock()
        index = cursor.index
        due_end = slots.due_end(now - mono0)
        if index < due_end:
            state.wake_jitter_ns.append(now - mono0 - slots.offset_ns(index))
        fired = 0
        while index < due_end:
            if fired == _MAX_SLOTS_PER_WAKE:
                # Behind schedule: let the loop read answers, then carry on at once.
                cursor.index = index
                asyncio.get_running_loop().call_soon(self._on_tick)
                return
            self._fire(state, step, slots.seq(index), wall0 + slots.offset_ns(index))
            fired += 1
            index += stride
            if index >= due_end:  # slots may have come due while these started
                now = clock()
                due_end = slots.due_end(now - mono0)
        cursor.index = index
        if index >= slots.end:
            cursor.done.set_result(None)
            return
        assert self._ticker is not None
        self._ticker.arm(mono0 + slots.offset_ns(index))
        # Every due slot started and the next one armed: the least costly moment for chores.
        if now >= self.collector.due_ns:
            self.collector.collect(state, now)
        if len(state.lags_ns) >= FOLD_AT:
            state.fold(self.window.lag)

    def _fire(self, state: StepState, step: PlannedStep, seq: int, intended_ns: int) -> None:
        if self.stop_reason is not None:
            return
        if self.inflight >= self.max_inflight:
            state.inflight_cap_refused += 1
            state.fail(INFLIGHT_CAP)
            self.records.columns.append(seq, intended_ns, NO_TIME, NO_TIME, 0, INFLIGHT_CAP_ERROR)
            if self.window.latency is not None:
                self.window.answered(0, INFLIGHT_CAP_ERROR)
            return
        if step.warmup:
            kind = WARMUP
        elif is_decoy(seq, False, self.plan.decoy_every):
            kind = DECOY
        else:
            kind = MEASURE
        event_id = self._id_prefix + str(seq).encode()
        sent_ns = time.time_ns()
        request = Request(seq, event_id, kind, intended_ns, sent_ns, state)
        state.scheduled += 1
        state.sent += 1
        state.last_sent_ns = sent_ns
        lag_ns = sent_ns - intended_ns
        state.lags_ns.append(lag_ns)
        self.window.sent += 1
        self.inflight += 1
        self._started.append(request)
        try:
            self.transport.send(request)
        except Exception as exc:  # a transport bug must not stop the pacer: record and go on
            self._give_up(request, f"sender: {type(exc).__name__}: {exc}"[:500])

    def _complete(
        self, request: Request, status: int, error: str | None, ack_ns: int | None
    ) -> None:
        """The transport's report on one request; the first report wins."""
        if request.done:
            return
        request.done = True
        self.inflight -= 1
        ok = 200 <= status < 300
        if ok:
            request.state.ok += 1
        else:
            request.state.fail(failure_cause(status, error) or "other")
        if self.window.latency is not None:
            answered_ns = time.time_ns() if ack_ns is None else ack_ns
            latency_ms = (answered_ns - request.intended_ns) // NS_PER_MS
            self.window.answered(latency_ms, None if ok else (error or f"HTTP {status}"))
        self.records.columns.append(
            request.seq,
            request.intended_ns,
            request.sent_ns,
            NO_TIME if ack_ns is None else ack_ns,
            status,
            error,
        )
        if self.inflight == 0 and self._wake is not None:
            self._wake.set()

    def _give_up(self, request: Request, error: str) -> None:
        self.transport.abandon(request)
        self._complete(request, 0, error, None)

    async def _after_step(self, state: StepState) -> None:
        """Let the step's answers come in, report it, and collect garbage in the gap."""
        step = state.planned
        gap_end_ns = self.start_ns + step.end_offset_ns + self._gap_ns(step)
        settle_until_ns = (self.start_ns + step.end_offset_ns + gap_end_ns) // 2
        await self._wait_for_answers(settle_until_ns)
        inflight_at_step_end = self.inflight
        state.fold(self.window.lag)
        gc.enable()
        started = time.perf_counter()
        # What the collector frees shows whether a step leaves cyclic garbage (RSS growth).
        state.gc_collected = gc.collect()
        state.gc_ms = round((time.perf_counter() - started) * MS_PER_S, 2)
        # Answers still out are counted in the run's final summary, not in this line.
        line: StepEnd = {
            "event": "step_end",
            **state.summary(self.workers),
            **self.transport.stats(),
            "inflight_at_step_end": inflight_at_step_end,
        }
        self.emit(line)

    async def _wait_for_answers(self, until_ns: int) -> None:
        assert self._wake is not None
        while self.inflight and self.stop_reason is None:
            left_s = (until_ns - time.time_ns()) / NS_PER_S
            if left_s <= 0:
                return
            await self._nap(left_s)

    def _gap_ns(self, step: PlannedStep) -> int:
        later = [s for s in self.steps if s.start_offset_ns > step.start_offset_ns]
        return later[0].start_offset_ns - step.end_offset_ns if later else 0

    async def _wait_until(self, when_ns: int) -> bool:
        """Sleep until wall-clock `when_ns` unless stopped; False when stopped."""
        assert self._wake is not None
        while self.stop_reason is None:
            remaining_ns = when_ns - time.time_ns()
            if remaining_ns <= 0:
                return True
            await self._nap(remaining_ns / NS_PER_S)
        return False

    async def _nap(self, seconds: float) -> None:
        """Sleep up to `seconds` (0.5 s at most), woken early by a stop or the last answer."""
        assert self._wake is not None
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), min(seconds, 0.5))

    async def _drain(self) -> None:
        started = time.monotonic()
        deadline = started + self.drain_timeout_s
        announced = False
        while self.inflight and time.monotonic() < deadline and not self.force_stop:
            if not announced and time.monotonic() - started > 0.5:
                announced = True  # only a slow drain is worth a line
                line: Draining = {
                    "event": "draining",
                    "inflight": self.inflight,
                    "timeout_s": self.drain_timeout_s,
                }
                self.emit(line)
            await asyncio.sleep(0.01)
        # Whatever is still unanswered is recorded now, as sent without an answer.
        error = f"no answer within the {self.drain_timeout_s:g} s drain timeout"
        while self._started:
            request = self._started.popleft()
            if not request.done:
                self.unanswered_at_end += 1
                self._give_up(request, error)

    # background tasks
    async def _sweep_forever(self) -> None:
        """Requests unanswered after the request timeout are failures, and their connections
        are dropped; answered ones leave the start-order queue here."""
        timeout_ns = int(self.request_timeout_s * NS_PER_S)
        error = f"no answer within the {self.request_timeout_s:g} s request timeout"
        started = self._started
        while True:
            await asyncio.sleep(_SWEEP_INTERVAL_S)
            self.transport.sweep()
            horizon_ns = time.time_ns() - timeout_ns
            while started and (started[0].done or started[0].sent_ns < horizon_ns):
                request = started.popleft()
                if not request.done:
                    self.timed_out += 1
                    self._give_up(request, error)

    def _warn(self, message: str) -> None:
        self.emit(WarningLine(event="warning", message=message))

    async def _report(self) -> None:
        # Answers keep coming after a step's last slot (its gap, the drain): every second.
        self._emit_answers()
        if self.states:  # the slots started since the last report, counted
            self.states[-1].fold(self.window.lag)
        if (cursor := self._cursor) is not None:
            if self.collector.overdue(now := time.monotonic_ns()):  # a pacer behind for long
                self.collector.collect(cursor.state, now)
            rows = self.writer.rows_written
            self.emit(self.window.progress_line(cursor.state, self.workers, self.inflight, rows))

    def _emit_answers(self) -> None:
        step = self.states[-1].planned.number if self.states else 0
        if (line := self.window.answers_line(step)) is not None:
            self.emit(line)

    def summary(self) -> EngineSummary:
        steps = [state.summary(self.workers) for state in self.states]
        summary: EngineSummary = {
            "start_ns": self.start_ns,
            "worker": self.worker,
            "workers": self.workers,
            "interrupted": self.stop_reason is not None,
            "stop_reason": self.stop_reason,
            "steps": steps,
            "sent": sum(s["sent"] for s in steps),
            "ok": sum(s["ok"] for s in steps),
            "failures": sum(s["failures"] for s in steps),
            "inflight_cap_refused": sum(s["inflight_cap_refused"] for s in steps),
            "failures_by_cause": reduce(added, (s.get("failures_by_cause", {}) for s in steps), {}),
            "unanswered_at_end": self.unanswered_at_end,
            "timed_out": self.timed_out,
            "precise_timer": self._precise_timer,
            **self.transport.stats(),
            "rows_written": self.writer.rows_written,
            "parts_written": self.writer.parts_written,
            "flush_errors": self.records.flush_errors,
        }
        # After the last flush, rows no write took are lost: said, with why.
        if unwritten := self.records.unwritten_rows:
            summary["unwritten_rows"] = unwritten
            summary["records_error"] = self.records.last_error or "unknown"
        return summary
