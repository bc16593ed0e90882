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

Faults (`--fault`, `--fault-exec`, STEP counting probes) are armed on each probe's sender as
`run` arms them on its one sender; a probe with a fault done in it is judged by whether the
system recovered from it within the probe (analysis.faultsteps.judged_by_recovery).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.compute as pc

from analysis.fanout import fanout_from
from analysis.faultsteps import judged_by_recovery
from analysis.hostload import HostLoad, host_load
from analysis.tasks import files_events
from analysis.verdicts import BREAKS, HOLDS, HOST_SATURATED, SENDER_LIMITED, on_host, saturation
from contract.documents import RunStatus
from contract.errors import EvbenchError
from contract.faults import FaultDoc
from contract.layout import SutDir
from contract.senderlines import SenderDone, SenderStart
from contract.units import NS_PER_S
from evbench.faults import FaultInjector, fault_bound_s
from evbench.follow import run_sender
from evbench.health import receiver_trouble
from evbench.insight import check_profile
from evbench.interrupts import Interrupts
from evbench.options import SearchOptions
from evbench.probejudge import (
    baseline_e2e_p99_ms,
    probe_figures,
    probe_ledgers,
    verdict_of,
    with_objectives,
)
from evbench.searchdoc import (
    Probed,
    corrections,
    cut_probed,
    outcomes,
    probes_clocks,
    record,
    result_line,
)
from evbench.searchplan import Probe, Result, bracket, next_step
from evbench.session import Echo, MakeSut, Session
from loadgen.settings import SenderSettings
from runtime.parquet import part_files
from suts.lab import make_sut


class _InstrumentFailed(Exception):
    """The instruments, not the system, ended a probe: the search cannot go on."""


@dataclass(frozen=True)
class Searched:
    sut_dir: SutDir
    status: RunStatus  # completed | interrupted | failed, as run.json says
    result: Result | None  # None unless completed


def search(opts: SearchOptions, echo: Echo, make: MakeSut = make_sut) -> Searched:
    """The search as one run; `make` builds the system (the lab's registry unless a test
    brings its own)."""
    check_profile(opts, 1, None)  # probes are steps 1, 2, ...: a search has no warm-up
    session = Session.open(opts, "search", echo, make)
    probing = _Search(opts, session)
    result = probing.run()
    return Searched(session.sut_dir, session.outcome.status, result)


class _Search:
    """One search's probes over one session, from the first probe to run.json."""

    def __init__(self, opts: SearchOptions, session: Session) -> None:
        self.opts, self.session = opts, session
        self.tag = secrets.token_hex(3)
        self.probed: list[Probed] = []
        self.pending: Probe | None = None  # the probe under way, in run.json's steps
        self.cut: SenderDone | None = None  # the done line of the probe under way, once it came
        self.result: Result | None = None
        self.interrupts = Interrupts(session.echo)
        self.faults: FaultInjector | None = None  # the probe under way's
        self.fault_docs: list[FaultDoc] = []  # every probe's, as run.json's `faults`

    def run(self) -> Result | None:
        session, echo = self.session, self.session.echo
        # run.json from the start, naming the probe under way: a search interrupted or failed
        # in its first probe keeps its records as a run too.
        first = next_step(self.opts.plan, [])
        assert isinstance(first, Probe)  # a search always begins with a probe
        self.pending = first
        session.on_record(self._record)
        with self.interrupts, session:
            session.on_teardown(self._stop_faults)
            # Ctrl-C during the teardown is not a sender's to take any more.
            session.on_teardown(self.interrupts.cleaning)
            try:
                session.record("running")
                session.start_receiver()
                self.interrupts.checkpoint()
                session.start_system()
                self.interrupts.checkpoint()
                self.result = self._probe_all()
                session.finish("completed")
            except (_InstrumentFailed, EvbenchError, httpx.HTTPError) as exc:
                session.instrument_failed(str(exc))
                echo(f"search failed: {exc}")
            except KeyboardInterrupt:
                self._cut_short()
                session.finish("interrupted")
                echo("interrupted: the probes so far are kept")
            except BaseException as exc:
                session.instrument_failed(f"the search itself failed: {exc!r}")
                raise
        if session.outcome.status != "completed":
            self.result = None  # the receiver failed at the end: nothing found stands
        elif self.result is not None:
            minutes = (time.time_ns() - session.started_ns) / (60 * NS_PER_S)
            echo(result_line(self.result, minutes, any(p.faulted for p in self.probed)))
        return self.result

    def _probe_all(self) -> Result:
        """Probe until the plan has its answer; run.json rewritten around every probe."""
        session = self.session
        restart: str | None = None
        while isinstance(
            probe := next_step(self.opts.plan, outcomes(self.probed, self.opts.workers)), Probe
        ):
            if self.probed:
                restart = self._between_probes()
            if crowded := self._crowded():
                if len(crowded) > _HOST_RETRIES:
                    return self._host_result(probe, crowded)
                self._wait_for_quiet_host(probe)
            if restart is not None:
                session.restart_system()
            self.pending = probe
            session.record("running")
            self.probed.append(self._probe(probe, restart))
            self.pending, self.cut = None, None
            session.record("running")
        return probe

    def _crowded(self) -> list[Probed]:
        """The last probes in a row that others' load on the host left inconclusive."""
        crowded: list[Probed] = []
        for probed in reversed(self.probed):
            if probed.verdict != HOST_SATURATED:
                break
            crowded.append(probed)
        return crowded

    def _wait_for_quiet_host(self, probe: Probe) -> None:
        """Before probing a rate again that a saturated host left inconclusive: until the host's
        last 3 samples are under the host rule's thresholds, at most `_HOST_WAIT_S`."""
        t, sampler = self.opts.thresholds, self.session.sampler
        self.session.echo(
            f"  the host is saturated by other processes: waiting up to {_HOST_WAIT_S:g} s for "
            f"it to quiet, then {probe.rate_per_s}/s again (no break is placed on a busy host)"
        )
        deadline = time.monotonic() + _HOST_WAIT_S
        while time.monotonic() < deadline:
            load = sampler.recent_load()
            if load is not None and saturation(load, t) is None:
                return
            self.interrupts.checkpoint()
            time.sleep(1.0)

    def _host_result(self, probe: Probe, crowded: list[Probed]) -> Result:
        """The search ends without placing a break: the host stayed saturated by others."""
        hold, broke = bracket(outcomes(self.probed, self.opts.workers))
        host = host_of(crowded[0].figures)
        load = f" ({host.text()})" if host else ""
        why = (
            f"the host stayed saturated by other processes{load}: {len(crowded)} probes in a row "
            f"inconclusive, the last at {probe.rate_per_s}/s; no break placed. Free the host of "
            "them and search again"
        )
        return Result(None, hold, broke, why, (), None, len(self.probed))

    def _host_over(self, events: pa.Table) -> HostLoad | None:
        """The host's load over a probe's slots, as the run's analysis reads it from the
        samples (analysis.hostload)."""
        if events.num_rows == 0:
            return None
        intended = events.column("intended_ns")
        start_ns, end_ns = pc.min(intended).as_py(), pc.max(intended).as_py()
        ticks, busy = self.session.sampler.recent_host(), self.opts.thresholds.host_busy_ratio
        return host_load(ticks, start_ns, end_ns, busy)

    def _between_probes(self) -> str | None:
        """Why the system must start afresh before the next probe (None: it goes on warm)."""
        session, opts = self.session, self.opts
        if opts.fresh:
            return "fresh system for every probe"
        if dead := session.dead():
            why = f"{', '.join(sorted(dead))} exited during the last probe"
            session.echo(f"{opts.sut}: {why}; restarting it")
            return why
        if not_back := self.faults.not_back() if self.faults is not None else []:
            why = f"{', '.join(not_back)} not back from the last probe's fault"
            session.echo(f"{opts.sut}: {why}; restarting it")
            return why
        cap_s = max(opts.settle_s, opts.grace_cap_s)
        deadline = time.monotonic() + cap_s
        while (left_s := deadline - time.monotonic()) > 0:
            quiet = session.stragglers(_NEVER, grace_s=opts.settle_s, cap_s=left_s)
            # Quiet is not drained when a consumer stalls (a rebalance, a slow fetch) with
            # records left: on a topic, settled means nothing arrives and nothing is behind.
            if not quiet["reason"].startswith("cap") and not session.consumer_lag():
                return None
        why = f"still delivering a backlog after {cap_s:g} s"
        if lag := session.consumer_lag():
            why += f" (consumer lag {lag})"
        session.echo(f"{opts.sut}: {why}; restarting it")
        return why

    def _probe(self, probe: Probe, restarted: str | None) -> Probed:
        session, sut_dir = self.session, self.session.sut_dir
        step = len(self.probed) + 1
        first_seq = sum(p.probe.rate_per_s * p.probe.hold_s for p in self.probed)
        kind = "confirm" if probe.confirm else "probe"
        session.echo(f"{kind} {step}: {probe.rate_per_s}/s for {probe.hold_s} s")
        # Parts are written whole: the probe's records are in the files that appear from now.
        before = set(part_files(sut_dir.sent)) | set(part_files(sut_dir.received))
        settings = session.sender_settings(
            f"{probe.rate_per_s}:{probe.hold_s}",
            run_tag=self.tag,
            first_step=step,
            first_seq=first_seq,
        )
        # What arrived before this probe, duplicates included, plus what it had acked: a count
        # summed over the probes would be reached early after any duplicate delivery.
        received_before = session.received()
        self.faults = FaultInjector(self.opts.faults, session.echo, session.sampler.watch)
        done = self._send(settings, step)
        # A kill's target is back before the stragglers are awaited, or given up after the
        # lab's own bound (then the next probe restarts the system, as after a death).
        # (A Ctrl-C meanwhile raises: the sender is detached; the teardown stops the faults.)
        self.faults.wait_ended(fault_bound_s(self.opts.lab))
        faults = self.faults.stop()
        session.stragglers(received_before + done["ok"])
        if wiring := session.wiring_mistake(done["ok"]):
            # Bisecting down to 1/s would only repeat it: the search stops at the first probe.
            raise _InstrumentFailed(wiring)
        self._check_receiver()
        new_sent = sorted(set(part_files(sut_dir.sent)) - before)
        if not new_sent:
            raise _InstrumentFailed(f"probe {step} left no sent records (see {sut_dir.logs})")
        new_received = sorted(set(part_files(sut_dir.received)) - before)
        lab = self.opts.lab
        fanning = lab.fanout > 1 or lab.matching is not None
        fans = session.sut.subscribers() if session.sut and fanning else []
        events = files_events(
            [str(p) for p in new_sent],
            [str(p) for p in new_received],
            corrections(self.probed, done),
            fanout_from(fans),
        )
        return self._judge(probe, step, events, done, restarted, faults)

    def _judge(
        self,
        probe: Probe,
        step: int,
        events: pa.Table,
        done: SenderDone,
        restarted: str | None,
        faults: list[FaultDoc],
    ) -> Probed:
        """The probe's verdict from its records (evbench.probejudge), said and kept."""
        # A probe with a fault is no measure of the system unloaded.
        calm = [(p.verdict, p.figures["e2e_p99_ms"], host_of(p.figures)) for p in self.probed]
        baseline = baseline_e2e_p99_ms(
            [c for c, p in zip(calm, self.probed, strict=True) if not p.faulted],
            self.opts.thresholds,
        )
        # The run's seconds count from its first slot, as the analysis counts them.
        start_ns = self.probed[0].start_ns if self.probed else done["start_ns"]
        figures = probe_figures(
            events, step, probe.rate_per_s, probe.hold_s, baseline, schedule_start_ns=start_ns
        )
        figures = replace(figures, host=self._host_over(events))
        sut = self.session.sut
        only = sut is not None and sut.instruments_only
        verdict = verdict_of(figures, self.opts.thresholds, self.opts.objective, only)
        if verdict.verdict not in (HOLDS, SENDER_LIMITED, BREAKS, HOST_SATURATED):
            # The plan holds every probe for at least the rule's minimum of events, so fewer
            # records than that are missing ones.
            raise _InstrumentFailed(f"probe {step}: {'; '.join(verdict.reasons)}")
        faulted = any(f["at_ns"] is not None for f in faults)
        if faulted and done["start_ns"] is not None:  # judged by its recovery within the probe
            # On the probe's own seconds: whole seconds from its first slot to its last (the
            # run's seconds cut a probe's first and last), for the 3 healthy ones in a row.
            ledgers = probe_ledgers(events, faults, done["start_ns"])
            recovered = judged_by_recovery(verdict, faults, ledgers)
            verdict = with_objectives(recovered, figures, self.opts.objective)
            # Not recovering on a host others saturated is no break either.
            verdict = on_host(verdict, figures.host, self.opts.thresholds)
        self.session.echo(
            f"  {verdict.verdict}"
            + (f": {'; '.join(verdict.reasons)}" if verdict.reasons else "")
            + f" (e2e P99 {figures.e2e_p99_ms or float('nan'):.1f} ms)"
        )
        return Probed(
            probe, step, done["start_ns"] or 0, verdict.verdict, verdict.reasons,
            asdict(figures), done, restarted, faulted,
        )  # fmt: skip

    def _send(self, settings: SenderSettings, step: int) -> SenderDone:
        """One probe's sender (or fleet) from start to its done line, as `run` runs its sender
        (evbench.follow); its failures raise, and an interrupt it took ends the search once it
        has flushed its records."""
        session, interrupts = self.session, self.interrupts
        failures = len(session.outcome.instrument_failures)
        try:
            end = run_sender(
                session, interrupts, settings,
                f"probe-{step}" if self.opts.workers > 1 else f"sender-{step}",
                None, False, self._started,
                known_dead=frozenset(d["role"] for d in session.deaths()),
                crash_note="this probe is judged by what it delivered",
                check_wiring=not self.probed,
            )  # fmt: skip
            self.cut = end.done  # an interrupt from here on cuts this probe short
        except (RuntimeError, TimeoutError) as exc:  # it exited, or never said it started
            raise _InstrumentFailed(f"probe {step}: {exc}; see {session.sut_dir.logs}") from None
        finally:
            interrupts.detach()
            session.stop_senders(30)  # done, or stopped by its pid whatever went wrong
        if interrupts.count:  # the user's: the probe under way ends, its records kept
            raise KeyboardInterrupt
        if end.failure:
            raise _InstrumentFailed(f"probe {step}: {end.failure}; see {end.log}")
        assert end.done is not None  # a failure says why when there is none
        if len(session.outcome.instrument_failures) > failures:  # an unreadable line, said
            raise _InstrumentFailed(f"probe {step}: {session.outcome.instrument_failures[-1]}")
        if end.done["start_ns"] is None:
            raise _InstrumentFailed(f"probe {step}: the sender never started its schedule")
        return end.done

    def _cut_short(self) -> None:
        """The search was interrupted: the probe under way, if its sender said what it sent, is
        listed as cut short (never judged) and its sends counted (evbench.searchdoc)."""
        if self.pending is not None and self.cut is not None:
            self.probed.append(cut_probed(self.pending, len(self.probed) + 1, self.cut))
            self.pending, self.cut = None, None

    def _started(self, line: SenderStart) -> None:
        """A probe's sender has its schedule: the probe's faults armed (`every` probe's, and
        those of this probe's number)."""
        assert self.faults is not None
        self.faults.arm(line["start_ns"], line["steps"], self.session.sut)
        self.fault_docs.extend(self.faults.docs)
        self.session.insight.on_sender_start(line)

    def _stop_faults(self) -> None:
        """The teardown: a paused process resumed, a command killed, before the system stops."""
        if self.faults is not None:
            self.faults.stop()

    def _check_receiver(self) -> None:
        """Deliveries the receiver could not take would read as the system's losses."""
        session = self.session
        alive = session.receiver is not None and session.receiver.alive()
        if trouble := receiver_trouble(alive, session.received, session.receiver_stats):
            raise _InstrumentFailed(trouble)

    def _record(self, status: RunStatus | None) -> None:
        """run.json: the probes (and the one under way) as the run's steps, and the search's
        state (evbench.searchdoc)."""
        clocks = probes_clocks(self.probed, self.probed[-1].sender) if self.probed else {}
        final = (status or self.session.outcome.status) == "completed"
        result = self.result if final else None
        record(
            self.session, self.opts, self.probed, self.pending, result, clocks, status,
            self.fault_docs,
        )  # fmt: skip


# A probe a saturated host left inconclusive is probed again this many times, each after
# waiting up to _HOST_WAIT_S for the host to quiet; then the search ends without a break.
_HOST_RETRIES = 2
_HOST_WAIT_S = 30.0


def host_of(figures: dict[str, Any]) -> HostLoad | None:
    """A probe's host load from its figures as run.json keeps them (dataclasses.asdict)."""
    host = figures.get("host")
    return HostLoad(**host) if host else None


# An expected count never reached: waiting for stragglers then ends when nothing new came for
# the grace (the system is quiet) or at the cap (it still delivers).
_NEVER = 2**62
