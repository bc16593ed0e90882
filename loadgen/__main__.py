"""`python -m loadgen`: one open-loop sender process (`evbench send` runs the same).

The engine runs on uvloop. Progress goes to stdout as JSON lines, for `evbench run` or a person
to read.
"""

# Arrow's and Python's allocators are chosen before anything below imports pyarrow
# (runtime/allocator.py).
from runtime.allocator import prefer_system_allocator

if __name__ == "__main__":
    prefer_system_allocator()

import argparse
import asyncio
import json
import os
import secrets
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import uvloop

from contract.errors import EvbenchError
from contract.lines import SenderClock
from contract.metricslines import MetricsLine
from contract.records import SENT_FIELDS, event_id, event_id_prefix
from contract.senderlines import SenderDone, SenderLine, SenderRecord, SenderStart, SenderSummary
from contract.units import NS_PER_S
from loadgen.clocksync import measure
from loadgen.engine import Engine
from loadgen.http import HttpTransport
from loadgen.kafka import KafkaTransport
from loadgen.pace import Pace, parse_warmup, resolve_pace
from loadgen.payload import PayloadBuilder
from loadgen.recorder import RowPlan
from loadgen.request import Transport
from loadgen.schedule import PlannedStep, plan_steps, planned_step_doc
from loadgen.settings import (
    START_PASSED_MAX_S,
    SenderSettings,
    add_sender_arguments,
    settings_from_args,
)
from runtime.gcpauses import freeze_start_up
from runtime.parquet import PartWriter
from runtime.procs import raise_fd_limit
from runtime.runs import unusable_directory

if TYPE_CHECKING:
    from loadgen.sendmetrics import SenderMetricsService

_SWITCH_INTERVAL_S = 0.0002


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evbench send",
        description="Open-loop paced sender: one binary-mode CloudEvent per schedule slot, whether "
        "or not earlier ones were answered; every attempt is recorded under --out.",
    )
    add_sender_arguments(parser)
    return parser


def _emit(line: SenderLine | MetricsLine) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def _raise_fd_limit(wanted: int) -> int:
    """Room for one connection per in-flight request; returns the usable in-flight cap."""
    usable = min(wanted, raise_fd_limit(wanted + 256) - 256)
    _grow_fd_table(usable + 128)
    return usable


def _grow_fd_table(descriptors: int) -> None:
    """Size the kernel's descriptor table for every connection now, before any thread starts.

    Linux doubles a process's fd table as descriptors are opened (at 256, 512, 1024, ...), and in
    a process with more than one thread each doubling waits for an RCU grace period: measured
    here as 9-20 ms stalls of the pacer while a slow system made it open its 256th, 512th and
    1024th connection. Opening the highest descriptor once grows the table in one go; it never
    shrinks.
    """
    try:
        os.dup2(sys.stderr.fileno(), descriptors)
    except OSError:
        return  # over the limit: the table then grows as it goes
    os.close(descriptors)


def _transport(settings: SenderSettings, payloads: PayloadBuilder, max_inflight: int) -> Transport:
    source = f"evbench/sender/{settings.worker}"
    if settings.target.startswith("kafka://"):
        config = dict(_key_value(item) for item in settings.kafka_config)
        timeout_s = settings.knobs.request_timeout_s
        return KafkaTransport(settings.target, source, payloads, timeout_s, config)
    return HttpTransport(settings.target, source, payloads, max_inflight)


def _key_value(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ValueError(f"--kafka-config '{item}' must be KEY=VALUE")
    return key.strip(), value.strip()


def _check_settings(settings: SenderSettings) -> None:
    """What the flags' types cannot check alone, before anything starts (ValueError)."""
    if not settings.worker < settings.workers:
        raise ValueError(
            f"--worker {settings.worker} must be in 0..{settings.workers - 1} (--workers)"
        )
    if problem := unusable_directory(settings.out):
        raise ValueError(f"--out: {problem}")
    if settings.start_at_ns is not None:
        passed_s = (time.time_ns() - settings.start_at_ns) / NS_PER_S
        if passed_s > START_PASSED_MAX_S:
            raise ValueError(
                f"--start-at-ns {settings.start_at_ns} is {passed_s:.0f} s past: every slot "
                "since then would be sent at once (give a future instant, or --start-delay)"
            )


def main(argv: list[str] | None = None) -> int:
    settings = settings_from_args(build_parser().parse_args(argv))
    knobs = settings.knobs
    try:
        _check_settings(settings)
        pace = resolve_pace(settings.pace)
        warmup = parse_warmup(knobs.warmup) if knobs.warmup else None
        steps = plan_steps(
            pace.steps, knobs.step_gap_s, warmup, settings.first_step, settings.first_seq
        )
        run_tag = settings.run_tag or secrets.token_hex(3)
        longest_id = len(event_id(run_tag, settings.workers, sum(s.events for s in steps)))
        payloads = PayloadBuilder(knobs.payload_bytes, longest_id)
        max_inflight = _raise_fd_limit(knobs.max_inflight)
        transport = _transport(settings, payloads, max_inflight)
    except (EvbenchError, ValueError) as exc:
        print(f"evbench send: {exc}", file=sys.stderr)
        return 2
    return uvloop.run(_send(settings, pace, steps, run_tag, transport, max_inflight))


def _engine(
    settings: SenderSettings,
    steps: tuple[PlannedStep, ...],
    run_tag: str,
    transport: Transport,
    max_inflight: int,
) -> Engine:
    worker = settings.worker
    plan = RowPlan(
        steps=steps,
        event_id_prefix=event_id_prefix(run_tag, worker),
        worker=worker,
        payload_bytes=settings.knobs.payload_bytes,
        decoy_every=settings.knobs.decoy_every,
    )
    return Engine(
        transport,
        PartWriter(settings.out, SENT_FIELDS, prefix=f"sent-w{worker}"),
        steps,
        plan=plan,
        workers=settings.workers,
        max_inflight=max_inflight,
        request_timeout_s=settings.knobs.request_timeout_s,
        drain_timeout_s=settings.knobs.drain_timeout_s,
        flush_interval_s=settings.flush_interval_s,
        emit=_emit,
        latency_histograms=settings.latency_histograms,
    )


async def _send(
    settings: SenderSettings,
    pace: Pace,
    steps: tuple[PlannedStep, ...],
    run_tag: str,
    transport: Transport,
    max_inflight: int,
) -> int:
    engine = _engine(settings, steps, run_tag, transport, max_inflight)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, engine.stop, signal.Signals(sig).name)
    metrics = await _metrics(settings, engine)

    # Start-up work first, then the start instant: --start-delay is the time the process has
    # from here to its first slot, not a budget the warm-up may eat into.
    await engine.warm_up()
    clock = _Clock(settings.clock_url)
    await clock.measure("before")
    # Start-up objects (imports, schedule, payload pad) never die: keep them out of every
    # between-steps collection so those stay short.
    freeze_start_up()
    start_ns = settings.start_at_ns or time.time_ns() + int(settings.start_delay_s * NS_PER_S)
    start: SenderStart = {
        "event": "start",
        "pid": os.getpid(),
        "start_ns": start_ns,
        "run_tag": run_tag,
        "pace": pace.name,
        "spec": pace.spec,
        "max_inflight": max_inflight,
        "steps": [planned_step_doc(s) for s in steps],
    }
    if settings.clock_url:
        start["clock"] = clock.doc
    _emit(start)
    # The record writer's thread holds the GIL now and then; by default the pacer would wait up
    # to 5 ms for it when its timer fires. A shorter interval bounds that wait.
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    wall_start = time.perf_counter()
    summary: SenderSummary = {
        **await engine.run(start_ns),
        "run_tag": run_tag,
        "wall_s": round(time.perf_counter() - wall_start, 3),
    }
    if metrics is not None:
        await metrics.close()  # its last line has every record: the engine flushed them all
    if settings.clock_url:
        await clock.measure("after")
        summary["clock"] = clock.doc
    # Beside the records: what `evbench collect` needs to rebuild run.json from them alone
    # (the summary, the settings as argv, the host), when the sender ran somewhere else.
    record: SenderRecord = {**summary, "host": socket.gethostname(), "argv": settings.argv()}
    _write_record(settings.out / f"_sender-w{settings.worker}.json", record)
    done: SenderDone = {"event": "done", **summary}
    _emit(done)
    return _exit_code(done, settings)


def _write_record(path: Path, record: SenderRecord) -> None:
    """The sender's record beside its records; a disk that cannot take it is said, and the
    done line still goes out (it says what the records lack)."""
    try:
        path.write_text(json.dumps(record, indent=2))
    except OSError as exc:
        print(f"evbench send: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)


def _exit_code(done: SenderDone, settings: SenderSettings) -> int:
    """1 when rows were sent but never written (their events would read as sent by no one),
    said on stderr; else 130 interrupted, 0 done."""
    if unwritten := done.get("unwritten_rows"):
        print(
            f"evbench send: {unwritten} sent records could not be written to {settings.out} "
            f"({done.get('records_error')}): the records are incomplete",
            file=sys.stderr,
        )
        return 1
    return 130 if done["interrupted"] else 0


async def _metrics(settings: SenderSettings, engine: Engine) -> "SenderMetricsService | None":
    """The live figures, when asked for (--sender-metrics-port, --metrics-lines)."""
    if settings.knobs.metrics_port is None and not settings.metrics_lines:
        return None
    # Here, not at the top: only a sender that serves them loads the Prometheus client.
    from loadgen.sendmetrics import SenderMetricsService

    metrics = SenderMetricsService(engine, settings.knobs, settings.metrics_lines, _emit)
    await metrics.start()
    return metrics


class _Clock:
    """The offsets to the receiver's clock before and after the run (a SenderClock document)."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.doc: SenderClock = {"url": url or "", "before": None, "after": None, "errors": []}

    async def measure(self, when: Literal["before", "after"]) -> None:
        if self.url is None:
            return
        # Blocking socket work, on a thread: a signal still stops the run meanwhile.
        offset, error = await asyncio.to_thread(measure, self.url)
        self.doc[when] = offset.as_doc() if offset else None
        if error:
            self.doc["errors"].append(f"{when}: {error}")
            print(
                f"evbench send: clock offset {when} the run not measured: {error}", file=sys.stderr
            )


if __name__ == "__main__":
    sys.exit(main())
