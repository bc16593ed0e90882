"""One measured session: the run directory, the receiver, the samplers, the system (a lab driver
or the user's external target) and the senders, stopped in one order whatever failed, and one
run record.

`evbench run` (a staircase, evbench.runner), `evbench search` (probes, evbench.search) and
`evbench memory` (fill and drain, evbench.memory) are policies over it: they decide what to send
and when to stop, and tell the session what happened through its methods (`scheduled`,
`sender_ended`, `instrument_failed`, `finish`, ...); the session owns how the instruments and
the system start, what every option means (evbench.options.SessionOptions) and how it all ends.
Above it, evbench.campaign runs a command's systems (or scenarios) in turn, evbench.interrupts
is the one way Ctrl-C is taken, and evbench.follow the one way a sender is followed.

Teardown, in this order (each step runs even if one before it failed; Ctrl-C and SIGTERM are
ignored while it runs, so a second one cannot leave a process behind):
  0. the policy's own steps (`on_teardown`: memory's consumer and topic), last added first;
  1. the senders (a fleet's master first: it stops its workers' senders as Ctrl-C does);
  2. the system (memory's: its broker), with its lag sampler (its last deliveries still land
     in the receiver);
  3. the receiver, whose final report is judged (evbench.health): a failed receiver fails the
     run as an instrument failure;
  4. the process sampler and the control-plane client;
  5. the policy's run record (run.json), last, so it says how everything above ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from analysis.instrumentfail import delivery_attempts, wiring_diagnosis
from contract.documents import NotReported, RunDoc, RunStatus, SutDeathDoc
from contract.errors import EvbenchError
from contract.layout import SutDir
from contract.lines import SenderClock
from contract.receiverlines import ReceiverStats
from contract.searchdocs import SearchSenderSummary
from contract.senderlines import SenderDone
from evbench.deathwatch import DeathWatch
from evbench.health import receiver_failure, receiver_limits, stats_or_none, wait_for_stragglers
from evbench.insight import Insight
from evbench.instruments import start_receiver
from evbench.interrupts import ignore_signals_later
from evbench.options import RunOutcome, SessionOptions
from evbench.rundoc import (
    Environment,
    environment,
    records_on_disk,
    run_document,
    write_run_json,
)
from evbench.samples import ProcessSampler
from loadgen.pace import Pace
from loadgen.settings import SenderSettings
from runtime.files import disk_error
from runtime.procs import Child
from runtime.runs import new_sut_dir, next_run_id
from suts.lab import Sut, make_sut
from suts.lag import ConsumerLagSampler

MakeSut = Callable[..., Sut]  # suts.lab.make_sut's signature; tests bring their own systems
Echo = Callable[[str], None]


class Session:
    """A policy enters it (`with Session.open(...) as session:`), starts what it needs, and sets
    `record` to write its run record; everything started is stopped on the way out."""

    def __init__(
        self,
        opts: SessionOptions,
        sut_dir: SutDir,
        run_id: str,
        env: Environment,
        echo: Echo,
        make: MakeSut = make_sut,
    ) -> None:
        self.opts, self.sut_dir, self.run_id, self.env = opts, sut_dir, run_id, env
        self.echo, self.make = echo, make
        self.started_ns = time.time_ns()
        self.outcome = RunOutcome(sut_dir, "failed")
        self.sampler = ProcessSampler(sut_dir.samples)
        self.insight = Insight(opts, sut_dir, echo)
        self.client = httpx.Client(timeout=2.0)
        self.receiver: Child | None = None
        self.base_url = ""
        self.sut: Sut | None = None
        self.target = ""  # where senders send: the system's ingress or topic
        self.lag: ConsumerLagSampler | None = None
        self.watch: DeathWatch | None = None
        self.senders: list[Child] = []  # the sender (or a fleet's master) and its workers
        self.restarts = 0
        self.record: Callable[[RunStatus | None], None] = lambda status: None
        self.teardown = ExitStack()
        self._policy_steps = ExitStack()  # a policy's own teardown steps (on_teardown)

    @classmethod
    def open(
        cls,
        opts: SessionOptions,
        pace_name: str,
        echo: Echo,
        make: MakeSut = make_sut,
        dir_name: str | None = None,
    ) -> Session:
        """A new run directory for one system (`dir_name`, default the system's name). The
        environment is read first: a failure there leaves nothing behind; an existing directory
        is refused (results are never overwritten)."""
        env = environment()
        run_id = opts.run_id or next_run_id(opts.runs_dir, pace_name)
        sut_dir = new_sut_dir(opts.runs_dir, run_id, pace_name, dir_name or opts.system_dir())
        return cls(opts, sut_dir, run_id, env, echo, make)

    # lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> Session:
        stack = self.teardown
        ignore_signals = ignore_signals_later(stack)
        stack.callback(self._final_record)
        stack.callback(self.client.close)
        stack.callback(self.sampler.stop)
        stack.push(self._failed_if_raised)
        stack.callback(self._judge_instruments)
        stack.callback(self._stop_receiver)
        stack.callback(self.stop_system)
        stack.callback(self.insight.stop)
        stack.callback(self.stop_senders)
        stack.callback(self._policy_steps.close)
        stack.callback(ignore_signals)
        self.sampler.start()
        self.insight.start()
        return self

    def on_teardown(self, step: Callable[[], object]) -> None:
        """A policy's own step of the teardown (say, stopping a process it started): run before
        the session's, the last added first, with signals ignored as for the rest."""
        self._policy_steps.callback(step)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        return bool(self.teardown.__exit__(kind, exc, tb))

    # what the policy tells the session: run.json is built from it --------------------------
    def on_record(self, record: Callable[[RunStatus | None], None]) -> None:
        """How the policy writes its run record: called at the policy's own moments (with the
        status "running") and last in the teardown (None: as the outcome says)."""
        self.record = record

    def scheduled(self, start_ns: int | None, clocks: dict[str, SenderClock]) -> None:
        """The schedule's start instant (slot 0 of the first step) and the senders' clock
        offsets, as the sender (or the first probe) said them."""
        self.outcome.schedule_start_ns = start_ns
        self.outcome.sender_clocks = clocks

    def sender_ended(self, summary: SenderDone | SearchSenderSummary | None) -> None:
        """The senders' summary (None: the sender ended without one)."""
        self.outcome.sender = summary if summary is not None else NotReported()

    def settled(self, grace: dict[str, Any]) -> None:
        """How waiting for the stragglers ended."""
        self.outcome.grace = grace

    def instrument_failed(self, why: str) -> bool:
        """An instrument failed (each reason kept once): the run has failed, whatever else.
        True when `why` is new (the caller says it)."""
        if why in self.outcome.instrument_failures:
            return False
        self.outcome.instrument_failures.append(why)
        return True

    def finish(self, status: RunStatus) -> None:
        """How the policy ended (the teardown may still fail it: a receiver that failed)."""
        self.outcome.status = status

    def describe_system(self) -> None:
        """The system's description for run.json, while it runs (stopped, it is final)."""
        if self.sut is not None:
            self.outcome.sut = self.sut.describe()

    def document(self, pace: Pace, status: RunStatus | None, has_warmup: bool = False) -> RunDoc:
        """run.json as of now: what the session knew, with the policy's pace."""
        doc = run_document(
            self.opts,
            pace,
            self.run_id,
            has_warmup,
            self.outcome,
            self.sampler.peak_rss_bytes,
            self.env,
            self.started_ns,
            time.time_ns(),
            status,
        )
        self.insight.describe(doc)
        return doc

    def write(self, doc: RunDoc) -> None:
        write_run_json(self.sut_dir, doc)

    # the receiver -----------------------------------------------------------------------------
    def start_receiver(self) -> str:
        """The receiver where --receiver-host/--receiver-port say; its base URL."""
        receiver, log = self.opts.receiver, self.sut_dir.logs / "receiver.log"
        try:
            self.receiver, self.base_url = start_receiver(
                self.sut_dir.received,
                log,
                receiver.host,
                receiver.port,
                limits=receiver_limits(self.opts.send.payload_bytes),
                clock_shift_ms=receiver.clock_shift_ms,
            )
        except (RuntimeError, TimeoutError):  # it exited, or never said it listens
            where = f"{receiver.host}:{receiver.port or 'a free port'}"
            raise EvbenchError(
                f"the receiver could not listen on {where} ({_last_line(log)}): is "
                f"--receiver-host an address of this host, and --receiver-port free? See {log}"
            ) from None
        self.sampler.watch("receiver", self.receiver.pid)
        # Where the system delivers: the URL it reaches the receiver at, if the user gave one.
        self.outcome.receiver_url = self.opts.receiver_url or f"{self.base_url}/"
        return self.base_url

    def receiver_stats(self) -> ReceiverStats | None:
        """The receiver's counters now (None if it does not answer)."""
        try:
            doc = self.client.get(f"{self.base_url}/stats").json()
        except (httpx.HTTPError, ValueError):
            return None
        return stats_or_none(doc)

    def received(self) -> int:
        """Deliveries the receiver has counted; an unanswering receiver is an instrument
        failure, said as one."""
        stats = self.receiver_stats()
        if stats is None:
            raise EvbenchError(
                f"the receiver at {self.base_url} did not answer /stats with its counters "
                f"(see {self.sut_dir.logs / 'receiver.log'})"
            )
        return stats["received"]

    def wiring_mistake(self, acked: int) -> str | None:
        """Acks, and never one request at the receiver that came to deliver, while the
        system's processes live: the system delivers elsewhere (None: not that). A system
        that delivered before and stops delivering has broken, and is judged so."""
        now = self.receiver_stats()
        if now is None or acked <= 0 or self.dead() or self.opts.send.decoy_every == 1:
            return None
        # Its own control plane (stats, clock) connects to the receiver too: count only the
        # requests that came to deliver something.
        if attempts := delivery_attempts(now):
            return None
        return wiring_diagnosis(acked, self.outcome.receiver_url, attempts)

    def stragglers(
        self,
        expected: int,
        grace_s: float | None = None,
        cap_s: float | None = None,
        interrupts: Callable[[], int] = lambda: 0,
    ) -> dict[str, Any]:
        """Wait until the receiver holds `expected` deliveries, or nothing new came for the
        grace (--grace unless given), or the cap (--grace-cap unless given) passed; returns
        how it ended."""
        return wait_for_stragglers(
            self.receiver_stats,
            expected,
            self.opts.grace_s if grace_s is None else grace_s,
            self.opts.grace_cap_s if cap_s is None else cap_s,
            interrupts,
        )

    # the system -------------------------------------------------------------------------------
    def start_system(self) -> str:
        """The system (a lab driver, or the user's external target), subscribed to the
        receiver; returns where senders send. A restarted system, and a campaign's item
        (`.fanout-10`), gets names of its own: a topic and group on a broker not restarted
        with it (--kafka-bootstrap) already hold the last one's."""
        opts = self.opts
        item = self.sut_dir.root.name.removeprefix(opts.sut)
        run_id = f"{self.run_id}{item}" + (f"-r{self.restarts}" if self.restarts else "")
        sut = self.make(opts.sut, opts.lab, self.sut_dir.logs, run_id, opts.receiver_host)
        self.sut = sut
        subscriber = self.outcome.receiver_url
        if (message := sut.start_message(subscriber)) is not None:
            self.echo(message)
        self.target = sut.start(subscriber)
        for role, pid in sut.processes().items():
            self.sampler.watch(role, pid)
        self.watch = DeathWatch(sut.dead, sut.exit_code)
        self.watch.start()
        self.insight.attach(sut)
        if sut.components:
            ready = sut.wait_ready()
            self.echo(f"{opts.sut} ready after {ready['waited_s']:g} s: {_ready_text(ready)}")
        if (where := sut.lag_target()) is not None:  # for the report, and for settling
            self.lag = ConsumerLagSampler(*where, self.sut_dir.consumer_lag, opts.lag_interval_s)
            self.lag.start()
        return self.target

    def stop_system(self) -> None:
        """The system and its lag sampler, described for run.json (once: a second call after a
        restart's stop finds nothing left)."""
        sut, lag, watch = self.sut, self.lag, self.watch
        if sut is None:
            return
        self.sut, self.lag, self.watch = None, None, None
        if watch is not None:  # before anything is stopped: a stopped process is no death
            self.outcome.sut_deaths.extend(watch.stop())
        self.outcome.sut_died = sut.dead()
        self.insight.detach()
        if lag is not None:
            lag.stop()
        described = sut.describe()
        described["final_stats"] = sut.stop()
        described["died"] = self.outcome.sut_died
        self.outcome.sut = described
        if lag is not None:
            described["consumer_lag"] = {
                "interval_s": self.opts.lag_interval_s,
                "last_total": lag.last_total_lag,
                "sample_errors": lag.errors,
            }

    def restart_system(self) -> str:
        self.stop_system()
        self.restarts += 1
        return self.start_system()

    def dead(self) -> list[str]:
        """The system's processes that exited while they should be running."""
        return self.sut.dead() if self.sut is not None else []

    def deaths(self) -> list[SutDeathDoc]:
        """When each process of the system was seen gone, this system and those before a
        restart (evbench.deathwatch)."""
        current: list[SutDeathDoc] = []
        if self.watch is not None:
            self.watch.check()
            current = list(self.watch.deaths)
        return [*self.outcome.sut_deaths, *current]

    def consumer_lag(self) -> int:
        """The system's consumer group's lag now (0 when it has no topic, or it cannot be read:
        the sampler counts its errors)."""
        return (self.lag.try_sample() or 0) if self.lag is not None else 0

    # senders ----------------------------------------------------------------------------------
    def sender_settings(self, pace_spec: str, **more: Any) -> SenderSettings:
        """A sender of this session: its target, records, knobs and the receiver's clock."""
        kafka = self.target.startswith("kafka://")
        return SenderSettings(
            target=self.target,
            pace=pace_spec,
            out=self.sut_dir.sent,
            knobs=self.opts.send,
            kafka_config=tuple(self.opts.lab.producer) if kafka else (),
            clock_url=f"{self.base_url}/clock",
            **more,
        )

    def start_senders(self, settings: SenderSettings, name: str = "sender") -> Child:
        """One sender, or a Locust fleet of --workers; returns the process whose lines are the
        run's (the sender, or the fleet's master)."""
        logs = self.sut_dir.logs
        if self.opts.workers > 1:
            folder = logs if name == "sender" else logs / name
            sender, fleet = settings.start_fleet(self.opts.workers, folder)
        else:
            sender, fleet = settings.start(logs / f"{name}.log", name), []
        self.senders = [sender, *fleet]
        self.sampler.watch("sender", sender.pid)
        for index, worker in enumerate(fleet):
            self.sampler.watch(f"fleet-worker-{index}", worker.pid)
        return sender

    def stop_senders(self, timeout_s: float = 15.0) -> None:
        # A fleet's master first: it stops its workers' senders as Ctrl-C does, then the workers.
        for child in self.senders:
            if child.alive():
                child.stop(timeout_s)
        self.senders = []

    # teardown steps ---------------------------------------------------------------------------
    def _stop_receiver(self) -> None:
        receiver = self.receiver
        if receiver is None:
            return
        died = not receiver.alive()
        code = receiver.stop()
        self.outcome.receiver = stats_or_none(receiver.final_report()) or NotReported()
        # Every delivery after its death, or left unwritten, would count as lost.
        if failure := receiver_failure(died, code, self.outcome.receiver):
            self.outcome.instrument_failures.append(failure)
            self.echo(f"instrument failed: {failure}:\n{receiver.tail()}")

    def _final_record(self) -> None:
        """The policy's run record, last; a disk that cannot take it is said in one line (the
        records already written are kept, and the run has failed: run.json says running)."""
        try:
            self.outcome.records = records_on_disk(self.sut_dir)
            self.record(None)
        except OSError as exc:
            self.outcome.status = "failed"
            self.echo(
                f"evbench: the run failed: {disk_error(exc, str(self.sut_dir.run_json))}; the "
                f"records written so far are kept in {self.sut_dir.root}"
            )

    def _judge_instruments(self) -> None:
        if self.outcome.instrument_failures:
            self.outcome.status = "failed"

    def _failed_if_raised(
        self, kind: type[BaseException] | None, exc: BaseException | None, *_: object
    ) -> bool:
        """An exception in the policy or in a step of the teardown (say, a system that would
        not stop) leaves run.json saying failed, never completed; the exception goes on."""
        if kind is KeyboardInterrupt:  # Ctrl-C (or SIGTERM) before the policy could take it
            self.outcome.status = "interrupted"
            self.outcome.reason = "interrupted during start-up, before the first slot"
        elif kind is not None:
            self.outcome.status = "failed"
            self.outcome.reason = f"{kind.__name__}: {exc}" if exc is not None else kind.__name__
        return False


def _last_line(log: Path) -> str:
    """What a process said last in its log (its own account of why it stopped)."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "nothing logged"


def _ready_text(ready: dict[str, Any]) -> str:
    parts = []
    for role, doc in ready.items():
        if isinstance(doc, dict) and doc.get("partitions"):
            parts.append(f"{role} has {doc['partitions']} partitions")
    return ", ".join(parts) or "every component answers /ready"
