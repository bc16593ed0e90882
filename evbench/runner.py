"""`evbench run`: a pace through one system (a staircase), a policy over evbench.session.

Both instruments run as child processes, each on its own event loop, so that neither steals the
other's CPU or GIL. This process only watches, prints the live lines and records what shaped
the run: run.json is written at the schedule start (status running) and at the end.
"""

from __future__ import annotations

import queue
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from analysis.deaths import death_text
from contract.documents import NotReported
from contract.errors import EvbenchError
from contract.layout import next_run_id, sut_dir_for
from contract.metricslines import parse_metrics_line
from contract.senderlines import SenderDone, SenderLine, parse_sender_line
from evbench.health import sender_failure
from evbench.insight import check_profile
from evbench.options import RunOptions, RunOutcome
from evbench.progress import progress_line, step_line
from evbench.rundoc import sender_clocks
from evbench.session import Echo, MakeSut, Session
from loadgen.pace import parse_warmup
from runtime.procs import Child
from suts.lab import LOCAL_SUTS, driver_for, make_sut

__all__ = ["RunOptions", "RunOutcome", "run", "run_matrix"]

_LOG_PROGRESS_EVERY = 10  # progress events (seconds) between lines when stderr is not a terminal


class _Interrupts:
    """SIGINT/SIGTERM during a run: forwarded to the sender, which stops scheduling and flushes.

    Before the sender starts there is nothing to stop gracefully, so the handler raises
    KeyboardInterrupt to unwind the start-up. Raised where Python cannot propagate it (a fork
    hook while a child starts, a finalizer) it is only printed as "Exception ignored" and the
    start-up goes on: so the count is kept, `checkpoint` raises it again between the start-up's
    phases and when the sender has just started (which is still importing: a SIGINT would kill
    it, and the run would read as the sender's failure), and such a swallowed interrupt is not
    printed as a traceback."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.count = 0
        self.forwarded = 0  # interrupts the sender has been sent
        self.sender: Child | None = None
        self.cleaning_up = False
        self._previous: dict[int, object] = {}
        self._unraisable = sys.unraisablehook

    def __enter__(self) -> _Interrupts:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = self._ignored
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        sys.unraisablehook = self._unraisable

    def _ignored(self, unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and self.count:
            return  # ours, swallowed where it was raised: `checkpoint` and `attach` act on it
        self._unraisable(unraisable)

    def checkpoint(self) -> None:
        """Between the start-up's phases: an interrupt swallowed where it was raised unwinds
        the start-up now."""
        if self.count and self.sender is None and not self.cleaning_up:
            raise KeyboardInterrupt

    def attach(self, sender: Child) -> None:
        """The sender started: interrupts from now on stop it. One that came while it was
        starting (swallowed where it was raised) unwinds the start-up, which stops it."""
        self.checkpoint()
        self.sender = sender

    def _handle(self, signum: int, frame: object) -> None:
        self.count += 1
        if self.sender is None:
            if not self.cleaning_up:
                raise KeyboardInterrupt  # nothing to stop gracefully yet: unwind and clean up
            return
        self._forward()

    def _forward(self) -> None:
        assert self.sender is not None
        if self.forwarded == 0:
            self.echo("interrupted: stopping the sender; every record written so far is kept")
        else:
            self.echo("interrupted again: not waiting for in-flight answers")
        self.forwarded += 1
        self.sender.signal(signal.SIGINT)


def run(opts: RunOptions, echo: Echo, live: bool, make: MakeSut = make_sut) -> RunOutcome:
    """One system: receiver, system and sender started fresh, the pace sent, stragglers
    awaited, everything stopped by pid, run.json written (at the schedule start and at the
    end)."""
    driver_for(opts.sut)  # an unknown name fails here, before anything is created
    # A bad warmup fails here, before anything is created.
    has_warmup = opts.send.warmup is not None and parse_warmup(opts.send.warmup) is not None
    check_profile(opts, 0 if has_warmup else 1, len(opts.pace.steps))
    session = Session.open(opts, opts.pace.name, echo, make)
    pace = opts.pace
    echo(
        f"evbench run {session.run_id}: sut {opts.sut}, pace {pace.name} ({pace.spec}), "
        f"{pace.events} events over {pace.duration_s} s -> {session.sut_dir.root}"
    )
    with _Interrupts(echo) as interrupts, session:
        session.record = lambda status: session.write(session.document(pace, status, has_warmup))
        # Ctrl-C during the teardown is not the sender's to take any more.
        session.on_teardown(lambda: setattr(interrupts, "cleaning_up", True))
        _drive(session, opts, interrupts, live)
    _echo_summary(session.outcome, echo)
    return session.outcome


def _drive(session: Session, opts: RunOptions, interrupts: _Interrupts, live: bool) -> None:
    """Start the receiver, the system and the sender; follow the run; wait for stragglers."""
    outcome, echo = session.outcome, session.echo
    session.start_receiver()
    interrupts.checkpoint()
    session.start_system()
    interrupts.checkpoint()
    sender = session.start_senders(session.sender_settings(opts.pace.spec))
    interrupts.attach(sender)
    summary, silent = _follow_sender(session, sender, opts, live)
    outcome.sender = summary if summary is not None else NotReported()
    if failure := silent or sender_failure(sender.wait(timeout_s=30), summary):
        outcome.instrument_failures.append(failure)
        echo(f"instrument failed: {failure}; see {sender.log_path}")
    if session.receiver is not None and session.receiver.alive():
        # A sender that died says nothing of what it had acked: wait until quiet.
        expected = summary["ok"] if summary is not None else sys.maxsize
        outcome.grace = session.stragglers(expected, interrupts=lambda: interrupts.count)
        if summary is None:
            outcome.grace["expected"] = None  # unknown: the sender died before saying
        elif not interrupts.count and (wiring := session.wiring_mistake(summary["ok"])):
            outcome.instrument_failures.append(wiring)
            echo(f"instrument failed: {wiring}")
    stopped_early = interrupts.count or (summary is not None and summary["interrupted"])
    outcome.status = "interrupted" if stopped_early else "completed"


@dataclass
class _Follow:
    """What following the sender has seen so far."""

    steps_total: int
    live: bool
    receiver_lost: bool = False
    reported_dead: frozenset[str] = frozenset()
    pending_live: bool = False
    progress_count: int = 0


def _follow_sender(
    session: Session, sender: Child, opts: RunOptions, live: bool
) -> tuple[SenderDone | None, str | None]:
    """The sender's final summary (None if it ended without one) and, if it had to be stopped
    for going silent, why."""
    follow = _Follow(len(opts.pace.steps), live)
    silence_s = opts.send.request_timeout_s + opts.send.drain_timeout_s + 60
    while True:
        try:
            doc = sender.next_line(timeout_s=silence_s)
        except queue.Empty:
            sender.stop()
            return None, f"sender went silent for {silence_s:g} s and was stopped"
        if doc is None:
            return None, None
        _watch_instruments(session, sender, follow)
        try:
            line = parse_sender_line(doc)  # the one place the sender's output is read
        except EvbenchError as exc:  # a line short of its keys: the sender's contract broke
            _unreadable(session, str(exc))
            continue
        if line is None:
            _metrics_line(session, doc)
            continue  # a kind this orchestration does not know: a newer sender's
        if line["event"] == "done":
            return line, None
        _on_line(session, line, follow)


def _metrics_line(session: Session, doc: dict[str, Any]) -> None:
    """--sender-metrics-port: where the sender's live figures are (a port of 0 picked one)."""
    try:
        line = parse_metrics_line(doc)
    except EvbenchError as exc:
        _unreadable(session, str(exc))
        return
    if line is not None and line["event"] == "metrics_listening":
        session.echo(f"the sender's live figures: {line['url']}")


def _unreadable(session: Session, why: str) -> None:
    """A line of the sender's that does not read as its type: an instrument failure, said once
    per kind (the run goes on, so its records are kept)."""
    failure = f"{why}: the sender and this evbench do not agree on its lines"
    if failure not in session.outcome.instrument_failures:
        session.outcome.instrument_failures.append(failure)
        session.echo(f"instrument failed: {failure}")


def _watch_instruments(session: Session, sender: Child, follow: _Follow) -> None:
    """Between the sender's lines: a dead receiver ends the run; a dead system process is
    said and the run goes on."""
    receiver, echo = session.receiver, session.echo
    if not follow.receiver_lost and receiver is not None and not receiver.alive():
        # Every later delivery would be lost to a dead receiver: the run cannot stand, so
        # stop the sender as Ctrl-C does (records kept) instead of sending the whole pace.
        follow.receiver_lost = True
        echo("receiver died: stopping the sender (the run has failed)")
        sender.signal(signal.SIGINT)
    for death in session.deaths():
        if death["role"] in follow.reported_dead:
            continue
        # A system's process dying is a crash, not an instrument failure, nor a capacity
        # limit: the run goes on, and the analysis judges the steps from then on by it.
        follow.reported_dead |= {death["role"]}
        when = death_text(death, session.outcome.schedule_start_ns)
        echo(
            f"{session.opts.sut}: {when}; going on (the steps from here are judged by the "
            "crash, not as the system's capacity)"
        )


def _on_line(session: Session, line: SenderLine, follow: _Follow) -> None:
    """One line of the sender's (other than done): recorded, printed or watched."""
    echo = session.echo
    if line["event"] == "start":
        # Written before the first slot, so that a run whose sender (or this process) dies is
        # still analysed up to where its records end.
        session.outcome.schedule_start_ns = line["start_ns"]
        session.outcome.sender_clocks = sender_clocks(line)
        session.insight.on_sender_start(line)
        session.record("running")
    elif line["event"] == "fleet_worker":
        session.sampler.watch(f"sender-w{line['index']}", line["pid"])
    elif line["event"] == "progress":
        follow.progress_count += 1
        if follow.live or follow.progress_count % _LOG_PROGRESS_EVERY == 0:
            _show(progress_line(line, follow.steps_total, _received(session)), follow, echo)
    elif line["event"] == "step_end":
        if follow.pending_live:
            sys.stderr.write("\r\033[K")
            follow.pending_live = False
        echo(step_line(line, follow.steps_total, _received(session)))
    elif line["event"] == "draining":
        echo(f"waiting up to {line['timeout_s']:g} s for {line['inflight']} in-flight answers")
    elif line["event"] == "warning":
        echo(f"sender: {line['message']}")
    elif line["event"] == "output":
        echo(f"sender: {line['text']}")


def _show(line: str, follow: _Follow, echo: Echo) -> None:
    if follow.live:  # one line rewritten in place
        sys.stderr.write("\r\033[K" + line)
        sys.stderr.flush()
        follow.pending_live = True
    else:  # a log: a line every few seconds, so long steps still show progress
        echo(line)


def _received(session: Session) -> int | None:
    stats = session.receiver_stats()
    return None if stats is None else int(stats["received"])


def _echo_summary(outcome: RunOutcome, echo: Echo) -> None:
    sender, receiver = outcome.sender, outcome.receiver
    sent, ok, failures = (_count(sender, k) for k in ("sent", "ok", "failures"))
    received = _count(receiver, "received")
    if "sent" not in sender:  # it died before its summary: what its files hold, instead
        on_disk = outcome.records or {"sent_rows": 0, "received_rows": 0}
        echo(
            f"{outcome.status}: the sender left no summary; its records hold "
            f"{on_disk['sent_rows']} sent events, the receiver's {on_disk['received_rows']} "
            f"deliveries; records in {outcome.sut_dir.root}"
        )
    else:
        echo(
            f"{outcome.status}: sent {sent}, acked {ok}, send failures {failures}, received "
            f"{received}, acked but not received {max(0, ok - received)}; records in "
            f"{outcome.sut_dir.root}"
        )
    for failure in outcome.instrument_failures:
        echo(f"instrument failed: {failure}")
    if outcome.status == "interrupted":
        echo(
            f"interrupted run kept {_count(sender, 'rows_written')} sent and "
            f"{_count(receiver, 'rows_written')} received records; run.json says interrupted"
        )


def _count(doc: Mapping[str, object], key: str) -> int:
    """A count of a summary that may not have been reported (0 then)."""
    value = doc.get(key, 0)
    return value if isinstance(value, int) else 0


def run_matrix(
    opts: RunOptions, echo: Echo, live: bool, suts: tuple[str, ...] = LOCAL_SUTS
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
