"""`evbench search`: the highest rate a system sustains, found by probing (evbench.searchplan).

One run, one system: the receiver starts once, the system once (or afresh before every probe
with `fresh`, the 2019 discipline), and every probe is a sender (or a fleet) of its own sending
one step, its step and slot numbers continuing the last probe's, so the whole search is an
ordinary run that `analyze`, the report and `compare` read. After each probe the stragglers are
awaited and the probe is judged from its records (evbench.probejudge); the plan decides the
next probe. Between warm probes the system settles until nothing has arrived for `settle_s`: a
backlog left by a breaking probe would otherwise be delivered during the next one and break it
too. run.json is rewritten after every probe, so an interrupted search keeps what it found.

The instruments are judged as in `evbench run` (evbench.runner): a sender that fails, a receiver
that dies or turns deliveries away, or a probe without its records ends the search as failed,
never as a breaking point.
"""

from __future__ import annotations

import queue
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.verdicts import BREAKS, HOLDS, SENDER_LIMITED, Thresholds
from contract.documents import SearchDoc, SearchProbeDoc
from contract.errors import EvbenchError
from contract.layout import SutDir, new_sut_dir, next_run_id
from contract.parquet import part_files
from contract.procs import Child
from evbench.instruments import start_receiver
from evbench.probejudge import Objective, ProbeRecords, probe_figures, verdict_of
from evbench.rundoc import environment, run_document, write_run_json
from evbench.runner import (
    RunOptions,
    RunOutcome,
    receiver_failure,
    receiver_limits,
    receiver_refusals,
    sender_failure,
    wait_for_stragglers,
)
from evbench.samples import ProcessSampler
from evbench.searchplan import Outcome, Probe, Result, SearchPlan, next_step
from loadgen.pace import parse_pace
from loadgen.settings import SenderSettings, SendKnobs
from suts.lab import LabSettings, Sut, make_sut
from suts.lag import ConsumerLagSampler


@dataclass(frozen=True)
class SearchOptions:
    sut: str
    plan: SearchPlan
    runs_dir: Path
    run_id: str | None = None
    send: SendKnobs = field(default_factory=SendKnobs)
    lab: LabSettings = field(default_factory=LabSettings)
    workers: int = 1  # sender processes per probe; above 1, a Locust fleet
    fresh: bool = False  # restart the system (and its broker) before every probe
    settle_s: float = 10.0  # a warm system is quiet this long before the next probe
    objective: Objective = field(default_factory=Objective)
    thresholds: Thresholds = field(default_factory=Thresholds)
    grace_s: float = 5.0
    grace_cap_s: float = 60.0


@dataclass
class _Probed:
    probe: Probe
    step: int
    start_ns: int
    verdict: str
    reasons: tuple[str, ...]
    figures: dict
    sender: dict
    restarted: str | None  # why the system was started afresh before this probe


class _InstrumentFailed(Exception):
    """The instruments, not the system, ended a probe: the search cannot go on."""


@dataclass(frozen=True)
class Searched:
    sut_dir: SutDir
    status: str  # completed | interrupted | failed, as run.json says
    result: Result | None  # None unless completed


def search(
    opts: SearchOptions, echo: Callable[[str], None], make: Callable[..., Sut] = make_sut
) -> Searched:
    """The search as one run; `make` builds the system (the lab's registry unless a test
    brings its own)."""
    run_id = opts.run_id or next_run_id(opts.runs_dir, "search")
    session = _Session(opts, new_sut_dir(opts.runs_dir, run_id, "search", opts.sut), run_id)
    status, result = session.run(echo, make)
    return Searched(session.sut_dir, status, result)


class _Session:
    """One search's instruments, system and probes, from the first probe to run.json."""

    def __init__(self, opts: SearchOptions, sut_dir: SutDir, run_id: str) -> None:
        self.opts, self.sut_dir, self.run_id = opts, sut_dir, run_id
        self.started_ns = time.time_ns()
        self.env = environment()
        self.tag = secrets.token_hex(3)
        self.probed: list[_Probed] = []
        self.failures: list[str] = []
        self.sut: Sut | None = None
        self.target = ""
        self.restarts = 0
        self.lag: ConsumerLagSampler | None = None
        self.pending: Probe | None = None  # the probe under way, in run.json's steps
        self.sampler = ProcessSampler(sut_dir.samples)
        self.client = httpx.Client(timeout=2.0)
        self.receiver, self.base_url = start_receiver(
            sut_dir.received,
            sut_dir.logs / "receiver.log",
            limits=receiver_limits(opts.send.payload_bytes),
        )
        self.sampler.watch("receiver", self.receiver.pid)
        self.sampler.start()

    def run(
        self, echo: Callable[[str], None], make: Callable[..., Sut]
    ) -> tuple[str, Result | None]:
        result: Result | None = None
        status = "failed"
        # run.json from the start, naming the probe under way: a search interrupted or failed
        # in its first probe keeps its records as a run too.
        first = next_step(self.opts.plan, [])
        assert isinstance(first, Probe)  # a search always begins with a probe
        self.pending = first
        try:
            self._record("running")
            self._start_sut(make)
            restart: str | None = None
            while isinstance(probe := next_step(self.opts.plan, self._outcomes()), Probe):
                if self.probed:
                    restart = self._between_probes(echo)
                if restart is not None:
                    self._restart_sut(make)
                self.pending = probe
                self._record("running")
                self.probed.append(self._probe(probe, restart, echo))
                self.pending = None
                self._record("running")
            result = probe
            status = "completed"
        except (_InstrumentFailed, EvbenchError, httpx.HTTPError) as exc:
            self.failures.append(str(exc))
            echo(f"search failed: {exc}")
        except KeyboardInterrupt:
            status = "interrupted"
            echo("interrupted: the probes so far are kept")
        except BaseException as exc:
            self.failures.append(f"the search itself failed: {exc!r}")
            raise
        finally:
            receiver_report, failure = self._stop_all()
            if failure:
                self.failures.append(failure)
                echo(f"instrument failed: {failure}")
                status, result = "failed", None
            self._record(status, result, receiver_report)
        if result is not None:
            echo(_result_line(result, (time.time_ns() - self.started_ns) / 60e9))
        return status, result

    def _stop_all(self) -> tuple[dict, str | None]:
        """The system, then the receiver (its final report, and whether it failed), then the
        sampler: each in turn even if one before it fails; a Ctrl-C meanwhile is ignored."""
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
        try:
            try:
                self._stop_sut()
            finally:
                died = not self.receiver.alive()
                code = self.receiver.stop()
                report = self.receiver.final_report()
                failure = receiver_failure(died, code, report)
                self.sampler.stop()
                self.client.close()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        return report, failure

    def _start_sut(self, make: Callable[..., Sut]) -> None:
        opts = self.opts
        # A restarted system gets names of its own (a topic and group on a broker that is not
        # restarted with it, --kafka-bootstrap, already hold the last one's).
        run_id = self.run_id if not self.restarts else f"{self.run_id}-r{self.restarts}"
        self.sut = make(opts.sut, opts.lab, self.sut_dir.logs, run_id)
        self.target = self.sut.start(f"{self.base_url}/")
        for role, pid in self.sut.processes().items():
            self.sampler.watch(role, pid)
        if self.sut.components:
            self.sut.wait_ready()
        if (where := self.sut.lag_target()) is not None:  # for the report, and for settling
            self.lag = ConsumerLagSampler(*where, self.sut_dir.consumer_lag, _LAG_INTERVAL_S)
            self.lag.start()

    def _stop_sut(self) -> None:
        if self.lag is not None:
            self.lag.stop()
            self.lag = None
        if self.sut is not None:
            self.sut.stop()

    def _restart_sut(self, make: Callable[..., Sut]) -> None:
        self._stop_sut()
        self.restarts += 1
        self._start_sut(make)

    def _between_probes(self, echo: Callable[[str], None]) -> str | None:
        """Why the system must start afresh before the next probe (None: it goes on warm)."""
        assert self.sut is not None
        if self.opts.fresh:
            return "fresh system for every probe"
        if dead := self.sut.dead():
            why = f"{', '.join(sorted(dead))} exited during the last probe"
            echo(f"{self.opts.sut}: {why}; restarting it")
            return why
        cap_s = max(self.opts.settle_s, self.opts.grace_cap_s)
        deadline = time.monotonic() + cap_s
        while (left_s := deadline - time.monotonic()) > 0:
            quiet = wait_for_stragglers(
                self.client, self.base_url, _NEVER, self.opts.settle_s, left_s
            )
            # Quiet is not drained when a consumer stalls (a rebalance, a slow fetch) with
            # records left: on a topic, settled means nothing arrives and nothing is behind.
            if not quiet["reason"].startswith("cap") and not self._consumer_lag():
                return None
        why = f"still delivering a backlog after {cap_s:g} s"
        if lag := self._consumer_lag():
            why += f" (consumer lag {lag})"
        echo(f"{self.opts.sut}: {why}; restarting it")
        return why

    def _consumer_lag(self) -> int:
        """The system's consumer group's lag now (0 when it has no topic, or it cannot be read:
        the sampler counts its errors)."""
        return (self.lag.try_sample() or 0) if self.lag is not None else 0

    def _outcomes(self) -> list[Outcome]:
        return [
            Outcome(
                p.probe,
                p.verdict,  # holds, breaks or sender-limited: anything else raised
                p.reasons,
                p.figures["sender_ratio"] * p.probe.rate_per_s,
                self.opts.workers,
            )
            for p in self.probed
        ]

    def _probe(self, probe: Probe, restarted: str | None, echo: Callable[[str], None]) -> _Probed:
        opts, sut_dir = self.opts, self.sut_dir
        step = len(self.probed) + 1
        first_seq = sum(p.probe.rate_per_s * p.probe.hold_s for p in self.probed)
        kind = "confirm" if probe.confirm else "probe"
        echo(f"{kind} {step}: {probe.rate_per_s}/s for {probe.hold_s} s")
        # Parts are written whole: the probe's records are in the files that appear from now.
        before = set(part_files(sut_dir.sent)) | set(part_files(sut_dir.received))
        settings = SenderSettings(
            target=self.target,
            pace=f"{probe.rate_per_s}:{probe.hold_s}",
            out=sut_dir.sent,
            knobs=opts.send,
            kafka_config=tuple(opts.lab.producer) if self.target.startswith("kafka://") else (),
            run_tag=self.tag,
            first_step=step,
            first_seq=first_seq,
            clock_url=f"{self.base_url}/clock",
        )
        # What arrived before this probe, duplicates included, plus what it had acked: a count
        # summed over the probes would be reached early after any duplicate delivery.
        received_before = self.client.get(f"{self.base_url}/stats").json()["received"]
        done = self._send(settings, step, probe)
        expected = received_before + done["ok"]
        wait_for_stragglers(self.client, self.base_url, expected, opts.grace_s, opts.grace_cap_s)
        self._check_receiver()
        new_sent = sorted(set(part_files(sut_dir.sent)) - before)
        if not new_sent:
            raise _InstrumentFailed(f"probe {step} left no sent records (see {sut_dir.logs})")
        records = _records(new_sent, sorted(set(part_files(sut_dir.received)) - before))
        # How the system does unloaded: the first probe that held (the first probe, until one
        # has), so that a first probe that broke does not lift the bar for the rest.
        held = [p for p in self.probed if p.verdict == HOLDS]
        baseline = next((p.figures["e2e_p99_ms"] for p in held or self.probed), None)
        figures = probe_figures(records, step, probe.rate_per_s, probe.hold_s, baseline)
        verdict = verdict_of(figures, opts.thresholds, opts.objective)
        if verdict.verdict not in (HOLDS, SENDER_LIMITED, BREAKS):  # insufficient data
            # The plan holds every probe for at least the rule's minimum of events, so fewer
            # records than that are missing ones.
            raise _InstrumentFailed(f"probe {step}: {'; '.join(verdict.reasons)}")
        echo(
            f"  {verdict.verdict}"
            + (f": {'; '.join(verdict.reasons)}" if verdict.reasons else "")
            + f" (e2e P99 {figures.e2e_p99_ms or float('nan'):.1f} ms)"
        )
        return _Probed(
            probe, step, done["start_ns"], verdict.verdict, verdict.reasons,
            asdict(figures), done, restarted,
        )  # fmt: skip

    def _send(self, settings: SenderSettings, step: int, probe: Probe) -> dict:
        """One probe's sender (or fleet) from start to its done line; its failures raise."""
        logs = self.sut_dir.logs
        children: list[Child] = []
        timeout_s = probe.hold_s + self.opts.send.drain_timeout_s + 120
        try:
            if self.opts.workers > 1:
                sender, fleet = settings.start_fleet(self.opts.workers, logs / f"probe-{step}")
            else:
                sender, fleet = settings.start(logs / f"sender-{step}.log", f"sender-{step}"), []
            children = [sender, *fleet]
            self.sampler.watch("sender", sender.pid)  # each probe's in turn, as in one run
            for index, child in enumerate(fleet):
                self.sampler.watch(f"fleet-worker-{index}", child.pid)
            done = sender.wait_for("done", timeout_s)
            code = sender.wait(30)
        except (RuntimeError, TimeoutError, queue.Empty, subprocess.TimeoutExpired) as exc:
            where = f"; see {children[0].log_path}" if children else ""
            raise _InstrumentFailed(
                f"probe {step}: {exc or 'the sender went silent'}{where}"
            ) from None
        finally:
            for child in children:  # done, or stopped by its pid whatever went wrong
                child.stop(30)
        if failure := sender_failure(code, done):
            raise _InstrumentFailed(f"probe {step}: {failure}; see {sender.log_path}")
        return done

    def _check_receiver(self) -> None:
        """Deliveries the receiver could not take would read as the system's losses."""
        if not self.receiver.alive():
            raise _InstrumentFailed("the receiver died (see logs/receiver.log)")
        _wait_until_written(self.client, self.base_url)
        stats = self.client.get(f"{self.base_url}/stats").json()
        if refused := receiver_refusals(stats):
            raise _InstrumentFailed(refused)

    def _record(
        self, status: str, result: Result | None = None, receiver_report: dict | None = None
    ) -> None:
        """run.json: the probes (and the one under way) as the run's steps, and the search's
        state."""
        opts, probed = self.opts, self.probed
        steps = [p.probe for p in probed] + ([self.pending] if self.pending else [])
        spec = ",".join(f"{p.rate_per_s}:{p.hold_s}" for p in steps)
        start_ns = probed[0].start_ns if probed else None
        run_opts = RunOptions(
            pace=parse_pace(spec, name="search"),
            runs_dir=opts.runs_dir,
            sut=opts.sut,
            run_id=self.run_id,
            send=opts.send,
            grace_s=opts.grace_s,
            grace_cap_s=opts.grace_cap_s,
            workers=opts.workers,
            lab=opts.lab,
        )
        sender = {
            "start_ns": start_ns,
            "sent": sum(p.sender["sent"] for p in probed),
            "ok": sum(p.sender["ok"] for p in probed),
            "failures": sum(p.sender["failures"] for p in probed),
            "probes": [p.sender for p in probed],
        }
        sut = self.sut.describe() if self.sut else {}
        outcome = RunOutcome(
            self.sut_dir, status, sender=sender, receiver=receiver_report or {}, sut=sut
        )
        outcome.instrument_failures = list(self.failures)
        outcome.schedule_start_ns = start_ns
        doc = run_document(
            run_opts, self.run_id, False, outcome, {}, self.sampler.peak_rss_bytes, self.env,
            self.started_ns, time.time_ns(), status,
        )  # fmt: skip
        doc["search"] = self._search_doc(result)
        write_run_json(self.sut_dir, doc)

    def _search_doc(self, result: Result | None) -> SearchDoc:
        opts = self.opts
        probes: list[SearchProbeDoc] = [
            {
                "step": p.step,
                "rate_per_s": p.probe.rate_per_s,
                "hold_s": p.probe.hold_s,
                "confirm": p.probe.confirm,
                "start_ns": p.start_ns,
                "verdict": p.verdict,
                "reasons": list(p.reasons),
                "e2e_p99_ms": p.figures["e2e_p99_ms"],
                "sender_ratio": p.figures["sender_ratio"],
                "restarted": p.restarted,
            }
            for p in self.probed
        ]
        return {
            "plan": asdict(opts.plan),
            "fresh": opts.fresh,
            "settle_s": None if opts.fresh else opts.settle_s,
            "workers": opts.workers,
            "objective": asdict(opts.objective),
            "probes": probes,
            "result": asdict(result) if result is not None else None,
            "minutes": round((time.time_ns() - self.started_ns) / 60e9, 2),
        }


_LAG_INTERVAL_S = 5.0  # as `evbench run` samples it


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


# An expected count never reached: waiting for stragglers then ends when nothing new came for
# the grace (the system is quiet) or at the cap (it still delivers).
_NEVER = 2**62


def _wait_until_written(client: httpx.Client, base_url: str, timeout_s: float = 10.0) -> None:
    """The receiver counts a delivery when it arrives and writes it on its next flush: the
    probe is judged from the files, so wait until they hold everything counted by now (a
    system still delivering a backlog goes on adding to the count)."""
    counted = client.get(f"{base_url}/stats").json()["received"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stats = client.get(f"{base_url}/stats").json()
        if stats["rows_written"] + stats.get("quarantined", 0) >= counted:
            return
        time.sleep(0.1)
    raise _InstrumentFailed(f"the receiver did not write its records within {timeout_s:g} s")


def _records(sent_parts: list[Path], received_parts: list[Path]) -> ProbeRecords:
    """The probe's sent rows with each event's first delivery (-1: none), from the parts
    written since it began (an earlier probe's late deliveries among them find no match)."""
    sent = pa.concat_tables(
        [
            pq.read_table(p, columns=["event_id", "intended_ns", "sent_ns", "status", "decoy"])
            for p in sent_parts
        ]
    )
    received = pa.concat_tables(
        [pq.read_table(p, columns=["event_id", "received_ns"]) for p in received_parts]
        or [
            pa.table(
                {"event_id": pa.array([], pa.string()), "received_ns": pa.array([], pa.int64())}
            )
        ]
    )
    first = received.group_by("event_id").aggregate([("received_ns", "min")])
    joined = sent.join(first, "event_id", join_type="left outer")
    return ProbeRecords(
        intended_ns=joined["intended_ns"].to_numpy(),
        sent_ns=pc.fill_null(joined["sent_ns"], -1).to_numpy(),
        status=joined["status"].to_numpy(),
        decoy=joined["decoy"].to_numpy(zero_copy_only=False).astype(bool),
        received_ns=pc.fill_null(joined["received_ns_min"], -1).to_numpy(),
    )


def _result_line(result: Result, minutes: float) -> str:
    """The search's last words: the answer with its bracket, what broke, probes and minutes."""
    spent = f"{result.probes} probes in {minutes:.1f} min"
    if result.max_sustainable_per_s is None:
        return f"search ended after {spent}: {result.why}"
    line = (
        f"max sustainable rate {result.max_sustainable_per_s}/s (held {result.highest_hold_per_s}"
        f"/s, broke {result.lowest_break_per_s or '-'}/s) after {spent}: {result.why}"
    )
    if result.symptom:
        line += f"\n  at {result.lowest_break_per_s}/s: {'; '.join(result.symptom)}"
    return line
