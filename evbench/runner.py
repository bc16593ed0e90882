"""`evbench run`: start the receiver, run the sender, wait for stragglers, stop, write run.json.

Both instruments run as child processes, each on its own event loop, so that neither steals the
other's CPU or GIL. This process only watches,
prints the live lines and records what shaped the run.
"""

from __future__ import annotations

import queue
import signal
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import httpx

from contract.documents import RunStatus
from contract.errors import EvbenchError
from contract.layout import SutDir, new_sut_dir, next_run_id, sut_dir_for
from contract.procs import Child
from evbench.instruments import start_receiver
from evbench.progress import progress_line, step_line
from evbench.rundoc import environment, run_document, sender_clocks, write_run_json
from evbench.samples import ProcessSampler
from loadgen.pace import Pace, parse_warmup
from loadgen.settings import SenderSettings, SendKnobs
from receivers.limits import Limits
from suts.lab import LOCAL_SUTS, LabSettings, Sut, driver_for, make_sut
from suts.lag import ConsumerLagSampler

_LOG_PROGRESS_EVERY = 10  # progress events (seconds) between lines when stderr is not a terminal


@dataclass(frozen=True)
class RunOptions:
    pace: Pace
    runs_dir: Path
    sut: str = "direct"
    run_id: str | None = None
    send: SendKnobs = field(default_factory=SendKnobs)
    grace_s: float = 5.0
    grace_cap_s: float = 60.0
    receiver_host: str = "127.0.0.1"
    receiver_port: int = 0
    # Shifts the receiver's clock, as if on a host whose clock is off (tests the correction).
    receiver_clock_shift_ms: float = 0.0
    workers: int = 1  # sender processes on this host; above 1, a Locust fleet
    lab: LabSettings = field(default_factory=LabSettings)
    lag_interval_s: float = 5.0


@dataclass
class RunOutcome:
    sut_dir: SutDir
    status: RunStatus  # completed | interrupted | failed (run.json says running until the end)
    sender: dict = field(default_factory=dict)
    receiver: dict = field(default_factory=dict)
    sut: dict = field(default_factory=dict)
    sut_died: list[str] = field(default_factory=list)
    # Why the instruments cannot be trusted (any entry fails the run; analysis says so too).
    instrument_failures: list[str] = field(default_factory=list)
    schedule_start_ns: int | None = None  # announced by the sender before its first slot
    # Each sender worker's clock offsets (SenderClock) as of the start line; done has both.
    sender_clocks: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"completed": 0, "interrupted": 130}.get(self.status, 1)


def receiver_limits(payload_bytes: int) -> Limits:
    """The receiver's defaults, with room for the run's own events (and any envelope a system
    wraps them in) whatever --payload-bytes asks for."""
    default = Limits()
    return replace(default, max_body_bytes=max(default.max_body_bytes, 2 * payload_bytes))


def exit_text(code: int) -> str:
    """An exit code as people read it: negative codes are the signal that ended the process."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def receiver_failure(died_during_run: bool, exit_code: int, final_stats: dict) -> str | None:
    """How the receiver ended, when that makes its records untrustworthy (None: it did not).

    A healthy receiver, stopped by SIGTERM, flushes, prints its stopped line with its stats and
    exits 0. Anything else (say, it could not write its records) means deliveries may be
    missing that the system under test made.
    """
    if died_during_run:
        return f"receiver died during the run ({exit_text(exit_code)})"
    if exit_code != 0:
        return f"receiver failed at stop ({exit_text(exit_code)}): its records may be incomplete"
    if not final_stats:
        return "receiver ended without its final report: its records may be incomplete"
    return receiver_refusals(final_stats)


# Answers with which the receiver turned away what a system delivered because of its own limits
# or faults. 400 (not an event) and 408 (a stalled request) are the sender's side's doing.
_INSTRUMENT_REFUSALS = ("413", "414", "431", "503")


def receiver_refusals(stats: dict) -> str | None:
    """Deliveries the receiver refused, could not parse for its own fault, or could not write:
    the events they carried would count as lost to the system under test."""
    refused = {
        code: n
        for code, n in (stats.get("refused") or {}).items()
        if code in _INSTRUMENT_REFUSALS and n
    }
    parts = [f"{n} answered {code}" for code, n in sorted(refused.items())]
    for key, what in (
        ("internal_errors", "failed inside the receiver (500)"),
        ("quarantined", "could not be written (see received-quarantine.jsonl)"),
        ("unwritten_rows", "were never written"),
    ):
        if stats.get(key):
            parts.append(f"{stats[key]} {what}")
    if not parts:
        return None
    return "receiver turned deliveries away by its own limits or faults: " + ", ".join(parts)


def sender_failure(exit_code: int, summary: dict | None) -> str | None:
    """How the sender ended, when its records do not cover the pace it was given (None: they
    do). 130 is an interrupted sender that stopped scheduling and flushed, as asked. A fleet
    that lost workers finished without their share of the pace."""
    if summary is None:
        return f"sender ended without finishing ({exit_text(exit_code)})"
    if failed := summary.get("failed_workers"):
        lost = "; ".join(f"worker {i}: {why}" for i, why in sorted(failed.items()))
        return f"sender fleet lost {len(failed)} of {summary['workers']} workers ({lost})"
    if exit_code not in (0, 130):
        return f"sender failed ({exit_text(exit_code)})"
    return None


def grace_verdict(
    received: int,
    expected: int,
    since_change_s: float,
    elapsed_s: float,
    grace_s: float,
    cap_s: float,
) -> str | None:
    """Why waiting for stragglers may stop now (None: keep waiting).

    Stops as soon as everything acked has arrived; otherwise once nothing new has arrived for
    `grace_s`, and in any case after `cap_s`, so a system that trickles cannot hold a run forever.
    """
    if received >= expected:
        return "all acked events received"
    if since_change_s >= grace_s:
        return f"nothing new for {grace_s:g} s"
    if elapsed_s >= cap_s:
        return f"cap of {cap_s:g} s reached"
    return None


class _Interrupts:
    """SIGINT/SIGTERM during a run: forwarded to the sender, which stops scheduling and flushes."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.count = 0
        self.sender: Child | None = None
        self.cleaning_up = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> _Interrupts:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame: object) -> None:
        self.count += 1
        if self.sender is None:
            if not self.cleaning_up:
                raise KeyboardInterrupt  # nothing to stop gracefully yet: unwind and clean up
            return
        if self.count == 1:
            self.echo("interrupted: stopping the sender; every record written so far is kept")
        else:
            self.echo("interrupted again: not waiting for in-flight answers")
        self.sender.signal(signal.SIGINT)


def _receiver_stats(client: httpx.Client, base_url: str) -> dict | None:
    try:
        return client.get(f"{base_url}/stats").json()
    except (httpx.HTTPError, ValueError):
        return None


def run(opts: RunOptions, echo: Callable[[str], None], live: bool) -> RunOutcome:
    """One SUT: receiver, SUT and sender started fresh, the pace sent, stragglers awaited,
    everything stopped by pid, run.json written (at the schedule start and at the end)."""
    driver_for(opts.sut)  # an unknown name fails here, before anything is created
    # A bad warmup fails here, before anything is created.
    warmup = parse_warmup(opts.send.warmup) if opts.send.warmup else None
    env = environment()  # before the directory exists: a failure here leaves nothing behind
    run_id = opts.run_id or next_run_id(opts.runs_dir, opts.pace.name)
    sut_dir = new_sut_dir(opts.runs_dir, run_id, opts.pace.name, opts.sut)
    outcome = RunOutcome(sut_dir, "failed")
    started_ns = time.time_ns()
    echo(
        f"evbench run {run_id}: sut {opts.sut}, pace {opts.pace.name} ({opts.pace.spec}), "
        f"{opts.pace.events} events over {opts.pace.duration_s} s -> {sut_dir.root}"
    )
    parts = _Parts(
        sampler=ProcessSampler(sut_dir.samples),
        client=httpx.Client(timeout=2.0),
        sut=make_sut(opts.sut, opts.lab, sut_dir.logs, run_id, host=opts.receiver_host),
    )

    def record(status: RunStatus | None = None) -> None:
        doc = run_document(
            opts,
            run_id,
            warmup is not None,
            outcome,
            parts.grace,
            parts.sampler.peak_rss_bytes,
            env,
            started_ns,
            time.time_ns(),
            status,
        )
        write_run_json(sut_dir, doc)

    def record_start(start: dict) -> None:
        # Written before the first slot, so that a run whose sender (or this process) dies is
        # still analysed up to where its records end.
        outcome.schedule_start_ns = int(start["start_ns"])
        outcome.sender_clocks = sender_clocks(start)
        record("running")

    with _Interrupts(echo) as interrupts, ExitStack() as teardown:
        # Undone in reverse: the sender stops first, then the SUT (its last deliveries still
        # land), then the receiver; run.json is written last, whatever failed before it.
        teardown.callback(record)
        teardown.callback(parts.client.close)
        teardown.callback(parts.sampler.stop)
        teardown.push(partial(_failed_if_raised, outcome))
        teardown.callback(_judge_instruments, outcome)
        teardown.callback(_stop_receiver, parts, outcome, echo)
        teardown.callback(_stop_sut, parts, outcome, opts)
        teardown.callback(_stop_sender, parts)
        teardown.callback(setattr, interrupts, "cleaning_up", True)
        parts.sampler.start()
        _drive(opts, sut_dir, parts, outcome, interrupts, record_start, echo, live)
    _echo_summary(outcome, echo)
    return outcome


@dataclass
class _Parts:
    """What a run starts, so each can be stopped whatever failed after it."""

    sampler: ProcessSampler
    client: httpx.Client
    sut: Sut
    receiver: Child | None = None
    sender: Child | None = None  # with a fleet, its master (whose lines are the fleet's)
    fleet: list[Child] = field(default_factory=list)  # the fleet's worker processes
    lag: ConsumerLagSampler | None = None
    grace: dict = field(default_factory=dict)


def _drive(
    opts: RunOptions,
    sut_dir: SutDir,
    parts: _Parts,
    outcome: RunOutcome,
    interrupts: _Interrupts,
    record_start: Callable[[dict], None],
    echo: Callable[[str], None],
    live: bool,
) -> None:
    """Start the receiver, the SUT and the sender; follow the run; wait for stragglers."""
    sampler, sut = parts.sampler, parts.sut
    parts.receiver, base_url = start_receiver(
        sut_dir.received,
        sut_dir.logs / "receiver.log",
        opts.receiver_host,
        opts.receiver_port,
        limits=receiver_limits(opts.send.payload_bytes),
        clock_shift_ms=opts.receiver_clock_shift_ms,
    )
    receiver = parts.receiver
    sampler.watch("receiver", receiver.pid)
    if (message := sut.start_message(f"{base_url}/")) is not None:
        echo(message)
    target = sut.start(f"{base_url}/")
    for role, pid in sut.processes().items():
        sampler.watch(role, pid)
    if sut.components:
        ready = sut.wait_ready()
        echo(f"{opts.sut} ready after {ready['waited_s']:g} s: {_ready_text(ready)}")
    if (where := sut.lag_target()) is not None:
        parts.lag = ConsumerLagSampler(*where, sut_dir.consumer_lag, opts.lag_interval_s)
        parts.lag.start()
    settings = _sender_settings(opts, sut_dir, target, base_url)
    if opts.workers > 1:
        parts.sender, parts.fleet = settings.start_fleet(opts.workers, sut_dir.logs)
        for index, follower in enumerate(parts.fleet):
            sampler.watch(f"fleet-worker-{index}", follower.pid)
    else:
        parts.sender = settings.start(sut_dir.logs / "sender.log")
    sender = parts.sender
    interrupts.sender = sender
    sampler.watch("sender", sender.pid)
    watch = _Watch(
        sender,
        receiver,
        sut,
        record_start,
        lambda doc: sampler.watch(f"sender-w{doc['index']}", doc["pid"]),
    )
    summary, silent = _follow_sender(watch, opts, parts.client, base_url, echo, live)
    outcome.sender = summary or {}
    if failure := silent or sender_failure(sender.wait(timeout_s=30), summary):
        outcome.instrument_failures.append(failure)
        echo(f"instrument failed: {failure}; see {sender.log_path}")
    if receiver.alive():
        # A sender that died says nothing of what it had acked: wait until quiet.
        expected = outcome.sender.get("ok", 0) if summary else sys.maxsize
        parts.grace = wait_for_stragglers(
            parts.client,
            base_url,
            expected,
            opts.grace_s,
            opts.grace_cap_s,
            lambda: interrupts.count,
        )
        if not summary:
            parts.grace["expected"] = None  # unknown: the sender died before saying
    stopped_early = interrupts.count or outcome.sender.get("interrupted")
    outcome.status = "interrupted" if stopped_early else "completed"


def _stop_sender(parts: _Parts) -> None:
    # A fleet's master first: it stops its workers' senders as Ctrl-C does, then the workers.
    for child in [parts.sender, *parts.fleet]:
        if child is not None and child.alive():
            child.stop()


def _stop_sut(parts: _Parts, outcome: RunOutcome, opts: RunOptions) -> None:
    sut, lag = parts.sut, parts.lag
    outcome.sut_died = sut.dead()
    if lag is not None:
        lag.stop()
    outcome.sut = {**sut.describe(), "final_stats": sut.stop(), "died": outcome.sut_died}
    if lag is not None:
        outcome.sut["consumer_lag"] = {
            "interval_s": opts.lag_interval_s,
            "last_total": lag.last_total_lag,
            "sample_errors": lag.errors,
        }


def _stop_receiver(parts: _Parts, outcome: RunOutcome, echo: Callable[[str], None]) -> None:
    receiver = parts.receiver
    if receiver is None:
        return
    died = not receiver.alive()
    code = receiver.stop()
    outcome.receiver = receiver.final_report()
    # Every delivery after its death, or left unwritten, would count as lost.
    if failure := receiver_failure(died, code, outcome.receiver):
        outcome.instrument_failures.append(failure)
        echo(f"instrument failed: {failure}:\n{receiver.tail()}")


def _judge_instruments(outcome: RunOutcome) -> None:
    if outcome.instrument_failures:
        outcome.status = "failed"


def _failed_if_raised(outcome: RunOutcome, kind: type | None, *_: object) -> bool:
    """An exception in the run or in a step of its teardown (say, a SUT that would not stop)
    leaves run.json saying failed, never completed; the exception goes on."""
    if kind is not None:
        outcome.status = "failed"
    return False


def _ready_text(ready: dict) -> str:
    parts = []
    for role, doc in ready.items():
        if isinstance(doc, dict) and doc.get("partitions"):
            parts.append(f"{role} has {doc['partitions']} partitions")
    return ", ".join(parts) or "every component answers /ready"


def _sender_settings(
    opts: RunOptions, sut_dir: SutDir, target: str, receiver_url: str
) -> SenderSettings:
    kafka = target.startswith("kafka://")
    return SenderSettings(
        target=target,
        pace=opts.pace.spec,
        out=sut_dir.sent,
        knobs=opts.send,
        kafka_config=tuple(opts.lab.producer) if kafka else (),
        clock_url=f"{receiver_url}/clock",
    )


@dataclass
class _Watch:
    """What the runner watches while the sender runs."""

    sender: Child
    receiver: Child
    sut: Sut
    on_start: Callable[[dict], None]  # the sender's start line (SenderStart)
    on_fleet_worker: Callable[[dict], None] = lambda doc: None  # a fleet worker's sender pid
    receiver_lost: bool = False


def _follow_sender(
    watch: _Watch,
    opts: RunOptions,
    client: httpx.Client,
    base_url: str,
    echo: Callable[[str], None],
    live: bool,
) -> tuple[dict | None, str | None]:
    """The sender's final summary (None if it ended without one) and, if it had to be stopped
    for going silent, why."""
    sender, sut = watch.sender, watch.sut
    steps_total = len(opts.pace.steps)
    reported_dead: set[str] = set()
    pending_live = False
    progress_count = 0
    while True:
        silence_s = opts.send.request_timeout_s + opts.send.drain_timeout_s + 60
        try:
            doc = sender.next_line(timeout_s=silence_s)
        except queue.Empty:
            sender.stop()
            return None, f"sender went silent for {silence_s:g} s and was stopped"
        if doc is None:
            return None, None
        kind = doc.get("event")
        if not watch.receiver_lost and not watch.receiver.alive():
            # Every later delivery would be lost to a dead receiver: the run cannot stand, so
            # stop the sender as Ctrl-C does (records kept) instead of sending the whole pace.
            watch.receiver_lost = True
            echo("receiver died: stopping the sender (the run has failed)")
            sender.signal(signal.SIGINT)
        if newly_dead := set(sut.dead()) - reported_dead:
            # A SUT process dying is a result, not an instrument failure: the run goes on and
            # what it drops shows as lost events.
            reported_dead |= newly_dead
            echo(f"{sut.name}: {', '.join(sorted(newly_dead))} exited during the run; going on")
        if kind == "start":
            watch.on_start(doc)
        elif kind == "fleet_worker":
            watch.on_fleet_worker(doc)
        elif kind == "progress":
            progress_count += 1
            if not live and progress_count % _LOG_PROGRESS_EVERY:
                continue
            stats = _receiver_stats(client, base_url)
            line = progress_line(doc, steps_total, stats and stats["received"])
            if live:  # one line rewritten in place
                sys.stderr.write("\r\033[K" + line)
                sys.stderr.flush()
                pending_live = True
            else:  # a log: a line every few seconds, so long steps still show progress
                echo(line)
        elif kind == "step_end":
            if pending_live:
                sys.stderr.write("\r\033[K")
                pending_live = False
            stats = _receiver_stats(client, base_url)
            echo(step_line(doc, steps_total, stats and stats["received"]))
        elif kind == "draining":
            echo(f"waiting up to {doc['timeout_s']:g} s for {doc['inflight']} in-flight answers")
        elif kind in ("warning", "output"):
            echo(f"sender: {doc.get('message') or doc.get('text')}")
        elif kind == "done":
            return doc, None


def wait_for_stragglers(
    client: httpx.Client,
    base_url: str,
    expected: int,
    grace_s: float,
    cap_s: float,
    interrupts: Callable[[], int] = lambda: 0,
) -> dict:
    """Wait until the receiver holds `expected` deliveries, or nothing new came for `grace_s`,
    or `cap_s` passed; returns how it ended."""
    started = last_change = time.monotonic()
    stats = _receiver_stats(client, base_url) or {"received": 0}
    last = stats["received"]
    while True:
        now = time.monotonic()
        # After a Ctrl-C the user wants out: a short grace; after a second one, none.
        grace_now_s = grace_s if not interrupts() else min(grace_s, 1.0)
        reason = grace_verdict(last, expected, now - last_change, now - started, grace_now_s, cap_s)
        if interrupts() >= 2:
            reason = reason or "interrupted twice"
        if reason:
            return {
                "waited_s": round(now - started, 3),
                "reason": reason,
                "expected": expected,
                "received": last,
            }
        time.sleep(0.1)
        stats = _receiver_stats(client, base_url) or stats
        if stats["received"] != last:
            last, last_change = stats["received"], time.monotonic()


def _echo_summary(outcome: RunOutcome, echo: Callable[[str], None]) -> None:
    sender, receiver = outcome.sender, outcome.receiver
    ok = sender.get("ok", 0)
    received = receiver.get("received", 0)
    echo(
        f"{outcome.status}: sent {sender.get('sent', 0)}, acked {ok}, "
        f"send failures {sender.get('failures', 0)}, received {received}, "
        f"acked but not received {max(0, ok - received)}; records in {outcome.sut_dir.root}"
    )
    for failure in outcome.instrument_failures:
        echo(f"instrument failed: {failure}")
    if outcome.status == "interrupted":
        echo(
            f"interrupted run kept {sender.get('rows_written', 0)} sent and "
            f"{receiver.get('rows_written', 0)} received records; run.json says interrupted"
        )


def run_matrix(
    opts: RunOptions, echo: Callable[[str], None], live: bool, suts: tuple[str, ...] = LOCAL_SUTS
) -> list[RunOutcome]:
    """Every local SUT in turn under one run id, each started fresh (the 2019 matrix).

    Stops at the first interrupted run: the user asked to stop, not to skip one system. A
    system that fails (it would not start, or the receiver died) is recorded as failed and the
    matrix goes on; an error before anything was recorded (a bad option) stops it.
    """
    run_id = opts.run_id or next_run_id(opts.runs_dir, opts.pace.name)
    dirs = {name: sut_dir_for(opts.runs_dir, run_id, opts.pace.name, name) for name in suts}
    # Before anything starts: a system's directory left by an earlier run would otherwise be
    # taken for this run's failed system, and the others written beside it.
    taken = [d.root for d in dirs.values() if d.root.exists()]
    if taken:
        raise EvbenchError(
            f"{taken[0]} already exists: choose another --run-id (results are never overwritten)"
        )
    outcomes = []
    for number, name in enumerate(suts, 1):
        echo(f"[{number}/{len(suts)}] {name}")
        try:
            outcome = run(replace(opts, sut=name, run_id=run_id), echo, live)
        except EvbenchError as exc:
            if not dirs[name].run_json.exists():
                raise
            echo(f"{name} failed: {exc}\ngoing on with the next system")
            outcome = RunOutcome(dirs[name], "failed")
        outcomes.append(outcome)
        if outcome.status == "interrupted":
            echo(f"stopping the matrix: {len(suts) - number} systems not run")
            break
    return outcomes
