"""Following a sender (or a fleet's master) from its start line to its done line, one way for
every policy: each line parsed once into its type (contract.senderlines), progress and step
lines shown (rewritten in place on a terminal, every few seconds in a log), the instruments
watched between lines (a dead receiver stops the sender, a system process's death is said), and
a sender that goes silent stopped and named.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.deaths import death_text
from analysis.verdicts import Thresholds
from contract.errors import EvbenchError
from contract.metricslines import parse_metrics_line
from contract.senderlines import SenderDone, SenderLine, SenderStart, parse_sender_line
from evbench.health import sender_failure
from evbench.interrupts import Interrupts
from evbench.progress import host_note, progress_line, step_line
from evbench.session import Echo, Session
from loadgen.settings import SenderSettings
from runtime.failcause import wiring_cause, wiring_text
from runtime.procs import Child

_LOG_PROGRESS_EVERY = 10  # progress events (seconds) between lines when stderr is not a terminal


@dataclass
class _Follow:
    """What following the sender has seen so far."""

    steps_total: int | None
    live: bool
    on_start: Callable[[SenderStart], None]
    crash_note: str
    receiver_lost: bool = False
    reported_dead: frozenset[str] = frozenset()
    pending_live: bool = False
    progress_count: int = 0
    acked: bool = False  # any event acked in the run so far
    wiring: str | None = None  # the early diagnosis, once made


@dataclass(frozen=True)
class SenderEnd:
    """How a sender (or a fleet) ended: its done line (None: it ended without one) and, when
    its records do not cover its pace or it could not be followed, why (an instrument failure,
    never the system's)."""

    done: SenderDone | None
    failure: str | None
    log: Path


def run_sender(
    session: Session,
    interrupts: Interrupts,
    settings: SenderSettings,
    name: str,
    steps_total: int | None,
    live: bool,
    on_start: Callable[[SenderStart], None],
    **follow: Any,
) -> SenderEnd:
    """One sender from its start to its exit, for every policy: started by the session (whose
    teardown stops it whatever happens), interrupts forwarded to it, followed (`follow_sender`,
    which takes `follow`'s keywords), its exit awaited. A sender that cannot start raises."""
    sender = session.start_senders(settings, name)
    interrupts.attach(sender)
    done, silent = follow_sender(session, sender, steps_total, live, on_start, **follow)
    try:
        code = sender.wait(30)
    except subprocess.TimeoutExpired:
        return SenderEnd(done, "the sender did not exit 30 s after its done line", sender.log_path)
    return SenderEnd(done, silent or sender_failure(code, done), sender.log_path)


def follow_sender(
    session: Session,
    sender: Child,
    steps_total: int | None,
    live: bool,
    on_start: Callable[[SenderStart], None],
    *,
    known_dead: frozenset[str] = frozenset(),
    crash_note: str = "the steps from here are judged by the crash, not as the system's capacity",
    check_wiring: bool = True,
) -> tuple[SenderDone | None, str | None]:
    """The sender's final summary (None if it ended without one) and, if it had to be stopped
    for going silent, why. `on_start` takes its start line (the schedule's start instant and
    clock offsets), written before the first slot. A system process's death is said once, with
    `crash_note` (what the policy makes of it); those in `known_dead` were said already.
    `check_wiring`: whether this sender may still show a wiring mistake (`_watch_wiring`)."""
    follow = _Follow(steps_total, live, on_start, crash_note, reported_dead=known_dead)
    # Only a session's first sender can show wiring: once anything got through, the wiring is
    # right, and a later probe failing every event is the system's answer to its rate.
    follow.acked = not check_wiring
    knobs = session.opts.send
    silence_s = knobs.request_timeout_s + knobs.drain_timeout_s + 60
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
            unreadable(session, str(exc))
            continue
        if line is None:
            _metrics_line(session, doc)
            continue  # a kind this orchestration does not know: a newer sender's
        if line["event"] == "done":
            return line, None
        _on_line(session, line, follow)
        _watch_wiring(session, sender, line, follow)


def _metrics_line(session: Session, doc: dict[str, Any]) -> None:
    """--sender-metrics-port: where the sender's live figures are (a port of 0 picked one)."""
    try:
        line = parse_metrics_line(doc)
    except EvbenchError as exc:
        unreadable(session, str(exc))
        return
    if line is not None and line["event"] == "metrics_listening":
        session.echo(f"the sender's live figures: {line['url']}")


def unreadable(session: Session, why: str) -> None:
    """A line of the sender's that does not read as its type: an instrument failure, said once
    per kind (the run goes on, so its records are kept)."""
    failure = f"{why}: the sender and this evbench do not agree on its lines"
    if session.instrument_failed(failure):
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
        echo(f"{session.opts.sut}: {when}; going on ({follow.crash_note})")


def _watch_wiring(session: Session, sender: Child, line: SenderLine, follow: _Follow) -> None:
    """Every event so far failed with one cause that says the target was never reached as
    meant (runtime.failcause.wiring_cause: a dead port, a 404, a proxy's 502): a wiring
    mistake, said at once with what to check, and the sender stopped as Ctrl-C stops it
    (records kept): the run has failed, never judged as the system's collapse."""
    if line["event"] != "progress" or follow.wiring is not None or follow.acked:
        return
    if line["ok"]:
        follow.acked = True
        return
    causes = line.get("failures_by_cause") or {}
    if cause := wiring_cause(causes, line["ok"], line["failures"]):
        follow.wiring = wiring_text(cause, line["failures"], session.target)
        session.instrument_failed(follow.wiring)
        session.echo(f"{follow.wiring}; stopping the sender (the run has failed)")
        sender.signal(signal.SIGINT)


def _on_line(session: Session, line: SenderLine, follow: _Follow) -> None:
    """One line of the sender's (other than done): recorded, printed or watched."""
    echo = session.echo
    if line["event"] == "start":
        follow.on_start(line)
    elif line["event"] == "fleet_worker":
        session.sampler.watch(f"sender-w{line['index']}", line["pid"])
    elif line["event"] == "progress":
        follow.progress_count += 1
        if follow.live or follow.progress_count % _LOG_PROGRESS_EVERY == 0:
            host = host_note(session.sampler.recent_load(), Thresholds())
            _show(progress_line(line, follow.steps_total, _received(session), host), follow, echo)
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
