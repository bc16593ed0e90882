"""What every system under test shares: its settings and the lifecycle of its processes.

    sut = make_sut("broker-imc", settings, logs_dir, run_id)   # suts/lab.py
    target = sut.start(subscriber_url)   # fresh processes; the URL (or kafka://) to send to
    ready = sut.wait_ready()             # e.g. consumer-group assignment, with its wait
    sut.processes()                      # role -> pid, for the resource sampler
    sut.metrics_endpoints()              # role -> its /metrics URL, for the scraper
    sut.stop()                           # by pid; returns each component's final counters
    sut.describe()                       # settings that change results, into run.json

A driver (suts/drivers.py) only says which components to start and how they connect (`_start`);
starting, readiness, sampling, stopping and describing are here, the same for all of them. Every
process is started fresh for a run and stopped after it, as the 2019 runs recreated the data
plane and Kafka between tests. Components start from the subscriber end, so each one's
downstream already listens when it starts.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import httpx

from contract.documents import SutDescription
from contract.errors import EvbenchError
from contract.fanout import SubscriberDoc
from contract.faults import LAB_FAULT_ACTIONS
from contract.receiverlines import parse_component_line
from runtime.procs import Child, die_with_parent_at_once
from suts.flags import ComponentSettings
from suts.settings import (
    DEFAULT_TRIGGER,
    LabSettings,
    matching_count,
    subscriber_paths,
    subscriber_urls,
)
from suts.tansu import Tansu, create_topic

BROKER_ROLE = "kafka"  # the lab's own broker among the system's processes

__all__ = ["DEFAULT_TRIGGER", "LabSettings", "Started", "Sut"]


@dataclass
class Started:
    child: Child
    url: str
    settings: ComponentSettings | None = None  # where it listens: how to start it again


# What a fault may do to each kind of process: a component is started again where it listened;
# the lab's broker keeps its records in memory, so only a pause leaves it the same broker.
COMPONENT_ACTIONS: tuple[str, ...] = LAB_FAULT_ACTIONS
BROKER_ACTIONS: tuple[str, ...] = ("pause",)

# How long a component may take to say where it listens (its Python start, its imports).
LISTEN_TIMEOUT_S = 30.0


class Sut:
    """One system under test. A driver sets the class attributes and implements `_start`."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one line of `evbench run --help`
    topology: ClassVar[str]  # the path an event takes, for run.json and the report
    local: ClassVar[bool] = True  # part of the default matrix (`evbench run` without --sut)
    kafka: ClassVar[bool] = False  # runs on a Kafka topic: lag is sampled, the broker described
    settings_shape_results: ClassVar[bool] = True  # LabSettings go into run.json
    # The system is the instruments themselves (direct: the receiver): its limit is theirs.
    instruments_only: ClassVar[bool] = False
    # It starts Python processes of the lab's own (what `--profile` samples with py-spy).
    lab_processes: ClassVar[bool] = True
    # The roles `_start` starts (known before it runs: a --fault is checked against them), and
    # the other names a fault may give one (a channel-imc's queue and dispatcher are one process).
    roles: ClassVar[tuple[str, ...]] = ()
    aliases: ClassVar[dict[str, str]] = {}
    # What a fan-out (LabSettings.fanout) is here: a channel's subscriptions, a broker's
    # triggers; None where the lab's system delivers each event once.
    fanout: ClassVar[str | None] = None
    most_subscribers: ClassVar[int | None] = None  # what the lab's system takes, if less

    def __init__(self, settings: LabSettings, logs: Path, run_id: str, host: str = "127.0.0.1"):
        self.settings = settings
        self.logs = logs
        self.run_id = run_id
        self.host = host
        self.components: dict[str, Started] = {}
        self.broker: Tansu | None = None
        self.bootstrap: str | None = None
        self.topic: str | None = None
        self.group: str | None = None
        self.readiness: dict[str, object] = {}
        self.final_stats: dict[str, dict[str, int]] = {}
        self._stopped = False
        self.faulted: set[str] = set()  # roles down on purpose (a --fault): not deaths
        self.subscriber = ""  # the receiver's URL, as start() was given it

    # what a driver decides
    def _start(self, subscriber: str) -> str:
        """Start the components; return where the sender sends."""
        raise NotImplementedError

    def start_message(self, receiver_url: str) -> str | None:
        """A line for the user before the system starts, if they have something to do."""
        return None

    @classmethod
    def settings_problem(cls, settings: LabSettings) -> str | None:
        """Why this system cannot run with these settings (None: it can): said before
        anything starts, never as a system that failed."""
        if settings.fanout > 1 and cls.fanout is None:
            return (
                f"--subscribers {settings.fanout}: {cls.name} delivers each event to one "
                "subscriber; a channel, a broker or --sut external fans out"
            )
        if cls.most_subscribers and settings.fanout > cls.most_subscribers:
            return (
                f"--subscribers {settings.fanout}: {cls.name} takes at most "
                f"{cls.most_subscribers} (a consumer group each, in one dispatcher)"
            )
        if settings.matching is None:
            return None
        if cls.fanout != "triggers":
            return f"--matching is for a broker's triggers: {cls.name} has none"
        if settings.matching > settings.fanout:
            return f"--matching {settings.matching} is more than the {settings.fanout} --triggers"
        return None

    # lifecycle
    def start(self, subscriber: str) -> str:
        if problem := self.settings_problem(self.settings):
            raise EvbenchError(problem)
        self.subscriber = subscriber
        try:
            return self._start(subscriber)
        except BaseException:
            self.stop()
            raise

    def _kafka_topic(self) -> None:
        """A topic of the run's own on a fresh Tansu broker (or on --kafka-bootstrap)."""
        s = self.settings
        if s.kafka_bootstrap:
            self.bootstrap = s.kafka_bootstrap
        else:
            self.broker = Tansu(self.logs / "tansu.log", self.host)
            self.bootstrap = self.broker.start()
        self.topic = f"evbench-{self.run_id}-{self.name}"
        self.group = f"evbench-{self.run_id}-{self.name}"
        create_topic(self.bootstrap, self.topic, s.partitions, s.replication)

    def _component(self, role: str, kind: str, **given: Any) -> str:
        """Start one `python -m suts <kind>` process with the run's lab settings and `given`
        (suts.flags.ComponentSettings fields; `lab` for other lab settings than the run's);
        its URL once it listens."""
        settings = ComponentSettings(
            kind, host=self.host, port=0, **{"lab": self.settings, **given}
        )
        argv = [sys.executable, "-m", "suts", *settings.argv()]
        child = Child(role, argv, self.logs / f"{role}.log", preexec=die_with_parent_at_once)
        self.components[role] = Started(child, "")
        port = self._listening(role, child)
        url = f"http://{self.host}:{port}/"
        self.components[role] = Started(child, url, replace(settings, port=port))
        return url

    def _listening(self, role: str, child: Child) -> int:
        try:
            listening = parse_component_line(child.wait_for("listening", LISTEN_TIMEOUT_S))
        except (TimeoutError, RuntimeError) as exc:
            raise EvbenchError(f"{self.name} {role} did not start: {exc}\n{child.tail()}") from None
        assert listening is not None and listening["event"] == "listening"
        return int(listening["port"])

    def wait_ready(self) -> dict[str, object]:
        """Block until every component answers /ready (a consumer has its partitions)."""
        started = time.monotonic()
        deadline = started + self.settings.ready_timeout_s
        with httpx.Client(timeout=2.0) as client:
            for role, part in self.components.items():
                self.readiness[role] = self._ready(client, role, part, deadline)
        self.readiness["waited_s"] = round(time.monotonic() - started, 3)
        return self.readiness

    def _ready(
        self,
        client: httpx.Client,
        role: str,
        part: Started,
        deadline: float,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> object:
        """What one component's /ready says once it answers 200."""
        while not cancelled():
            if not part.child.alive():
                raise EvbenchError(
                    f"{self.name} {role} exited before it was ready:\n{part.child.tail()}"
                )
            try:
                answer = client.get(part.url + "ready")
                if answer.status_code == 200:
                    return answer.json()
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise EvbenchError(
                    f"{self.name} {role} not ready after "
                    f"{self.settings.ready_timeout_s:g} s; see {part.child.log_path}"
                )
            time.sleep(0.1)
        raise EvbenchError(f"{self.name} {role}: the run ended before it was ready")

    def processes(self) -> dict[str, int]:
        pids = {role: part.child.pid for role, part in self.components.items()}
        if self.broker is not None and self.broker.pid is not None:
            pids[BROKER_ROLE] = self.broker.pid
        return pids

    def metrics_endpoints(self) -> dict[str, str]:
        """Role -> the URL of its Prometheus /metrics (suts/metrics.py), for every component
        started; {} for a system of none (direct, or the user's own, whose endpoints the user
        names)."""
        return {role: part.url + "metrics" for role, part in self.components.items() if part.url}

    def dead(self) -> list[str]:
        """Components (and the lab's own broker, as `kafka`) that exited while they should be
        running: a Kafka system whose broker died has died with it."""
        gone = [role for role, part in self.components.items() if not part.child.alive()]
        if self.broker is not None and self.broker.exit_code() is not None:
            gone.append(BROKER_ROLE)
        return [role for role in gone if role not in self.faulted]

    def exit_code(self, role: str) -> int | None:
        """How a process of the system ended (None: still running, or not one of its own)."""
        if role == BROKER_ROLE:
            return self.broker.exit_code() if self.broker is not None else None
        part = self.components.get(role)
        return part.child.proc.poll() if part is not None else None

    def stop(self) -> dict[str, dict[str, int]]:
        # Once: a failed start() stops what it started, and the runner's teardown stops again;
        # a second reading of a stopped child's report would find it gone and blank the first.
        if self._stopped:
            return self.final_stats
        self._stopped = True
        # Ingress first, so traffic stops at the door; then downstream in turn.
        for role, part in reversed(list(self.components.items())):
            part.child.stop()
            self.final_stats[role] = part.child.final_report(timeout_s=2)
        if self.broker is not None:
            self.broker.stop()
        return self.final_stats

    # faults (--fault): what a crash or an operator does to one of the system's processes
    @classmethod
    def fault_targets(cls, settings: LabSettings) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The names a fault may give (roles and their aliases) -> (the role, its actions); the
        lab's broker only where the system starts its own."""
        targets = {role: (role, COMPONENT_ACTIONS) for role in cls.roles}
        for alias, role in cls.aliases.items():
            targets[alias] = (role, COMPONENT_ACTIONS)
        if cls.kafka and not settings.kafka_bootstrap:
            targets[BROKER_ROLE] = targets["broker"] = (BROKER_ROLE, BROKER_ACTIONS)
        return targets

    def _pid(self, role: str) -> int:
        pid = self.processes().get(role)
        if pid is None:
            raise EvbenchError(f"{self.name} has no {role} running")
        return pid

    def pause(self, role: str) -> int:
        """SIGSTOP; the pid stopped."""
        pid = self._pid(role)
        os.kill(pid, signal.SIGSTOP)
        self.faulted.add(role)
        return pid

    def resume(self, role: str) -> None:
        """SIGCONT; from here on its death (even while it was stopped) is a death again."""
        try:
            os.kill(self._pid(role), signal.SIGCONT)
        finally:
            self.faulted.discard(role)

    def kill(self, role: str, graceful: bool = False) -> int:
        """SIGKILL (graceful: SIGTERM, as a restart stops it), waited for; the pid that died."""
        part = self.components[role]
        self.faulted.add(role)
        if graceful:
            part.child.stop()
        else:
            part.child.signal(signal.SIGKILL)
            part.child.wait(10)
        return part.child.pid

    def bring_back(self, role: str, cancelled: Callable[[], bool] = lambda: False) -> int:
        """The component started again where it listened (its upstream knows only that
        address), once ready (or `cancelled`: the run is ending); its new pid. From here on its
        death is a death again."""
        old = self.components[role]
        assert old.settings is not None  # every component is started by _component
        argv = [sys.executable, "-m", "suts", *old.settings.argv()]
        child = Child(role, argv, old.child.log_path, preexec=die_with_parent_at_once)
        self.components[role] = Started(child, old.url, old.settings)
        try:
            self._listening(role, child)
            deadline = time.monotonic() + self.settings.ready_timeout_s
            with httpx.Client(timeout=2.0) as client:
                self._ready(client, role, self.components[role], deadline, cancelled)
        finally:
            self.faulted.discard(role)
        return child.pid

    def lag_target(self) -> tuple[str, str, str] | None:
        if self.kafka and self.bootstrap and self.topic and self.group:
            return self.bootstrap, self.group, self.topic
        return None

    def describe(self) -> SutDescription:
        doc: SutDescription = {"topology": self.topology}
        if self.settings_shape_results:
            doc["settings"] = asdict(self.settings)
        if self.kafka or self.bootstrap:
            doc["kafka"] = {
                "bootstrap": self.bootstrap,
                "broker": (
                    f"Tansu {self.broker.binary} (memory storage, fresh for this run)"
                    if self.broker
                    else "given with --kafka-bootstrap"
                ),
                "topic": self.topic,
                "group": self.group,
            }
        doc["components"] = {
            role: {"url": part.url, "pid": part.child.pid} for role, part in self.components.items()
        }
        doc["readiness"] = self.readiness
        doc["final_stats"] = self.final_stats
        if self.settings.fanout > 1 or self.settings.matching is not None:
            doc["subscribers"] = self.subscribers()
        return doc

    def subscribers(self) -> list[SubscriberDoc]:
        """Each subscriber of a fan-out: its path at the receiver, its URL, and whether it
        takes the run's events (a broker's first `matching` triggers do)."""
        s = self.settings
        taking = matching_count(s.fanout, s.matching)
        paths = subscriber_paths(s.fanout)
        urls = subscriber_urls(self.subscriber, s.fanout)
        return [
            {"path": path, "url": url, "matches": number <= taking}
            for number, (path, url) in enumerate(zip(paths, urls, strict=True), start=1)
        ]
