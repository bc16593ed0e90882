"""`evbench run`: a pace through one system (a staircase), a policy over evbench.session.

Both instruments run as child processes, each on its own event loop, so that neither steals the
other's CPU or GIL. This process only watches, prints the live lines and records what shaped
the run: run.json is written at the schedule start (status running) and at the end.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from contract.documents import RunStatus
from contract.layout import repeat_dir_name, sut_dir_for
from contract.senderlines import SenderStart
from evbench.campaign import each
from evbench.faults import FaultInjector, fault_bound_s
from evbench.follow import run_sender
from evbench.insight import check_profile
from evbench.interrupts import Interrupts
from evbench.options import RunOptions, RunOutcome
from evbench.rundoc import sender_clocks
from evbench.session import Echo, MakeSut, Session
from loadgen.pace import parse_warmup
from runtime.runs import next_run_id
from suts.lab import LOCAL_SUTS, driver_for, make_sut

__all__ = ["RunOptions", "RunOutcome", "run", "run_matrix"]


def run(opts: RunOptions, echo: Echo, live: bool, make: MakeSut = make_sut) -> RunOutcome:
    """One system: receiver, system and sender started fresh, the pace sent, stragglers
    awaited, everything stopped by pid, run.json written (at the schedule start and at the
    end)."""
    driver_for(opts.sut)  # an unknown name fails here, before anything is created
    # A bad warmup fails here, before anything is created.
    has_warmup = opts.send.warmup is not None and parse_warmup(opts.send.warmup) is not None
    check_profile(opts, 0 if has_warmup else 1, len(opts.pace.steps))
    name = repeat_dir_name(opts.system_dir(), opts.repeat, opts.repeats)
    session = Session.open(opts, opts.pace.name, echo, make, name)
    pace = opts.pace
    echo(
        f"evbench run {session.run_id}: sut {opts.sut}, pace {pace.name} ({pace.spec}), "
        f"{pace.events} events over {pace.duration_s} s -> {session.sut_dir.root}"
    )
    # Faults wait for the schedule's start; the teardown cancels those not yet due first.
    faults = FaultInjector(opts.faults, echo, on_back=session.sampler.watch)

    def record(status: RunStatus | None) -> None:
        doc = session.document(pace, status, has_warmup)
        if opts.faults:
            doc["faults"] = faults.docs
        if opts.repeats > 1:
            doc["repeat"] = {"index": opts.repeat, "of": opts.repeats}
        if opts.objectives:  # judged again by `evbench analyze` when given no --slo
            doc["objectives"] = list(opts.objectives)
        session.write(doc)

    with Interrupts(echo) as interrupts, session:
        session.on_record(record)
        session.on_teardown(faults.stop)
        # Ctrl-C during the teardown is not the sender's to take any more.
        session.on_teardown(interrupts.cleaning)
        _drive(session, opts, interrupts, live, faults)
    _echo_summary(session.outcome, echo)
    return session.outcome


def _drive(
    session: Session, opts: RunOptions, interrupts: Interrupts, live: bool, faults: FaultInjector
) -> None:
    """Start the receiver, the system and the sender; follow the run; wait for stragglers."""
    echo = session.echo
    session.start_receiver()
    interrupts.checkpoint()
    session.start_system()
    interrupts.checkpoint()
    end = run_sender(
        session, interrupts, session.sender_settings(opts.pace.spec), "sender",
        len(opts.pace.steps), live, lambda line: _started(session, line, faults),
    )  # fmt: skip
    summary = end.done
    session.sender_ended(summary)
    if end.failure:
        faults.cancel_pending()  # the run has failed: nothing to wait for
        session.instrument_failed(end.failure)
        echo(f"instrument failed: {end.failure}; see {end.log}")
    else:  # none after the sender, nor during the stragglers; one under way ends first
        faults.wait_ended(fault_bound_s(opts.lab), lambda: bool(interrupts.count))
    if session.receiver is not None and session.receiver.alive():
        # A sender that died says nothing of what it had acked: wait until quiet.
        expected = summary["ok"] if summary is not None else sys.maxsize
        grace = session.stragglers(expected, interrupts=lambda: interrupts.count)
        if summary is None:
            grace["expected"] = None  # unknown: the sender died before saying
        session.settled(grace)
        wiring = (
            None if summary is None or interrupts.count else session.wiring_mistake(summary["ok"])
        )
        if wiring:
            session.instrument_failed(wiring)
            echo(f"instrument failed: {wiring}")
    stopped_early = interrupts.count or (summary is not None and summary["interrupted"])
    session.finish("interrupted" if stopped_early else "completed")


def _started(session: Session, line: SenderStart, faults: FaultInjector) -> None:
    """The sender's start line, recorded before its first slot, so that a run whose sender (or
    this process) dies is still analysed up to where its records end; the faults armed."""
    session.scheduled(line["start_ns"], sender_clocks(line))
    faults.arm(line["start_ns"], line["steps"], session.sut)
    session.insight.on_sender_start(line)
    session.record("running")


def _echo_summary(outcome: RunOutcome, echo: Echo) -> None:
    """The run's last lines: its counts as the instruments reported them, or, for one that
    died before its report, as its records on disk hold them (and said so)."""
    sender, receiver = outcome.sender, outcome.receiver
    sent, ok, failures = (_count(sender, k) for k in ("sent", "ok", "failures"))
    on_disk = outcome.records or {"sent_rows": 0, "received_rows": 0}
    received, from_records = _count(receiver, "received"), ""
    if "received" not in receiver:  # it died before its report: what its files hold
        received = on_disk["received_rows"]
        from_records = " (from its records: the receiver left no final report)"
    if "sent" not in sender:  # it died before its summary: what its files hold, instead
        echo(
            f"{outcome.status}: the sender left no summary; its records hold "
            f"{on_disk['sent_rows']} sent events, the receiver's {on_disk['received_rows']} "
            f"deliveries; records in {outcome.sut_dir.root}"
        )
    else:
        echo(
            f"{outcome.status}: sent {sent}, acked {ok}, send failures {failures}, received "
            f"{received}{from_records}, acked but not received {max(0, ok - received)}; "
            f"records in {outcome.sut_dir.root}"
        )
    for failure in outcome.instrument_failures:
        echo(f"instrument failed: {failure}")
    if outcome.status == "interrupted":
        kept = (
            (on_disk["sent_rows"], on_disk["received_rows"])
            if outcome.records is not None
            else (_count(sender, "rows_written"), _count(receiver, "rows_written"))
        )
        echo(
            f"interrupted run kept {kept[0]} sent and {kept[1]} received records; run.json "
            "says interrupted"
        )


def _count(doc: Mapping[str, object], key: str) -> int:
    """A count of a summary that may not have been reported (0 then)."""
    value = doc.get(key, 0)
    return value if isinstance(value, int) else 0


def run_matrix(
    opts: RunOptions, echo: Echo, live: bool, suts: tuple[str, ...] = LOCAL_SUTS
) -> list[RunOutcome]:
    """Every local SUT in turn under one run id, each started fresh (the 2019 matrix), the
    whole of it `opts.repeats` times (2019's run-1 .. run-5, in one run directory), as one
    campaign (evbench.campaign: directories checked first, a failed system said and passed,
    the first interrupted one stopping the rest)."""
    matrix = _Matrix(opts, echo, live, suts)
    statuses = each(matrix, echo)
    return [
        matrix.outcomes.get(name, RunOutcome(matrix.dirs[name], "failed"))
        for name in matrix.items()[: len(statuses)]
    ]


class _Matrix:
    """`run`'s campaign policy: one run per system, fan-out and repeat, under one run id;
    repeat k of every system before repeat k + 1 of any, each system's fan-outs in the
    user's order."""

    noun = "system"

    def __init__(self, opts: RunOptions, echo: Echo, live: bool, suts: tuple[str, ...]) -> None:
        run_id = opts.run_id or next_run_id(opts.runs_dir, opts.pace.name)
        self.opts, self.echo, self.live = replace(opts, run_id=run_id), echo, live
        self.runs: dict[str, RunOptions] = {}
        for k in range(1, opts.repeats + 1):
            for sut in suts:
                for fanout in opts.campaign_fanouts():
                    item = replace(self.opts, sut=sut, repeat=k).fanned(fanout)
                    self.runs[repeat_dir_name(item.system_dir(), k, opts.repeats)] = item
        self.dirs = {n: sut_dir_for(opts.runs_dir, run_id, opts.pace.name, n) for n in self.runs}
        self.outcomes: dict[str, RunOutcome] = {}

    def items(self) -> tuple[str, ...]:
        return tuple(self.runs)

    def roots(self) -> list[Path]:
        return [d.root for d in self.dirs.values()]

    def drive(self, name: str) -> RunStatus:
        self.outcomes[name] = run(self.runs[name], self.echo, self.live)
        return self.outcomes[name].status

    def recorded(self, name: str) -> bool:
        return self.dirs[name].run_json.exists()
