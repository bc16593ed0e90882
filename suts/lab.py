"""The systems under test, each a small driver behind one interface.

    sut = make_sut("broker-imc", settings, logs_dir, run_id)
    target = sut.start(subscriber_url)   # fresh processes; the URL (or kafka://) to send to
    ready = sut.wait_ready()             # e.g. consumer-group assignment, with its wait
    sut.processes()                      # role -> pid, for the resource sampler
    sut.stop()                           # by pid; returns each component's final counters
    sut.describe()                       # settings that change results, into run.json

Every process is started fresh for a run and stopped after it, as the 2019 runs recreated the
data plane and Kafka between tests. Components start from the subscriber end, so each one's
downstream already listens when it starts.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from evbench.shared.errors import EvbenchError
from evbench.shared.procs import Child
from evbench.shared.records import EVENT_TYPE, WARMUP_EVENT_TYPE
from suts.tansu import Tansu, create_topic

LOCAL_SUTS = (
    "direct",
    "channel-imc",
    "broker-imc",
    "channel-kafka",
    "broker-kafka",
    "source-kafka",
)
SUTS = (*LOCAL_SUTS, "external")
KAFKA_SUTS = ("channel-kafka", "broker-kafka", "source-kafka")

# The trigger of the broker SUTs: Knative's exact attribute match, any of these alternatives.
# Warmup events pass so they warm the whole path; decoys (DECOY_EVENT_TYPE) do not.
DEFAULT_TRIGGER = (f"type={EVENT_TYPE}", f"type={WARMUP_EVENT_TYPE}")


@dataclass(frozen=True)
class LabSettings:
    """Everything that changes results; all of it is recorded in run.json."""

    partitions: int = 100
    replication: int = 1
    concurrency: int = 256
    retries: int = 3
    backoff_ms: float = 100.0
    delivery_timeout_s: float = 30.0
    queue_limit: int = 100_000
    max_pending: int = 10_000
    # Producer/consumer settings on top of librdkafka's defaults. A 6 s session timeout gets
    # the group assigned in ~3 s on Tansu (the 45 s default takes ~23 s); acks=all as Knative.
    # Tansu does not answer a waiting fetch when records arrive, as Kafka does, but only at
    # fetch.wait.max.ms: at the 500 ms default that added ~200-400 ms to every delivery
    # (measured), an artifact of the local broker, so the wait is capped at 50 ms.
    producer: tuple[str, ...] = ("acks=all", "linger.ms=5")
    consumer: tuple[str, ...] = (
        "fetch.wait.max.ms=50",
        "session.timeout.ms=6000",
        "heartbeat.interval.ms=1000",
        "auto.offset.reset=earliest",
        "enable.auto.commit=false",
    )
    trigger: tuple[str, ...] = DEFAULT_TRIGGER
    kafka_bootstrap: str | None = None  # a real Kafka instead of a fresh Tansu
    ingress: str | None = None  # external: where the sender sends (HTTP)
    topic: str | None = None  # external: produce to this topic on --kafka-bootstrap
    ready_timeout_s: float = 120.0


@dataclass
class Started:
    child: Child
    url: str


@dataclass
class Sut:
    name: str
    settings: LabSettings
    logs: Path
    run_id: str
    host: str = "127.0.0.1"
    components: dict[str, Started] = field(default_factory=dict)
    broker: Tansu | None = None
    bootstrap: str | None = None
    topic: str | None = None
    group: str | None = None
    readiness: dict = field(default_factory=dict)
    final_stats: dict = field(default_factory=dict)

    # lifecycle
    def start(self, subscriber: str) -> str:
        try:
            return self._start(subscriber)
        except BaseException:
            self.stop()
            raise

    def _start(self, subscriber: str) -> str:
        s = self.settings
        delivery = [
            "--concurrency",
            str(s.concurrency),
            "--retries",
            str(s.retries),
            "--backoff-ms",
            str(s.backoff_ms),
            "--timeout",
            str(s.delivery_timeout_s),
        ]
        match = [arg for spec in s.trigger for arg in ("--match", spec)]
        if self.name == "direct":
            return subscriber
        if self.name == "external":
            if s.ingress:
                return s.ingress
            if s.kafka_bootstrap and s.topic:
                self.bootstrap, self.topic = s.kafka_bootstrap, s.topic
                return f"kafka://{s.kafka_bootstrap}/{s.topic}"
            raise EvbenchError(
                "--sut external needs --ingress URL, or --kafka-bootstrap HOST:PORT with --topic"
            )
        if self.name == "channel-imc":
            return self._component(
                "channel",
                "imc-channel",
                "--subscriber",
                subscriber,
                "--queue-limit",
                str(s.queue_limit),
                *delivery,
            )
        if self.name == "broker-imc":
            trigger = self._component(
                "filter", "trigger-filter", "--subscriber", subscriber, *match, *delivery
            )
            channel = self._component(
                "channel",
                "imc-channel",
                "--subscriber",
                trigger,
                "--queue-limit",
                str(s.queue_limit),
                *delivery,
            )
            return self._component(
                "ingress",
                "broker-ingress",
                "--channel",
                channel,
                "--timeout",
                str(s.delivery_timeout_s),
            )
        if self.name not in KAFKA_SUTS:
            raise EvbenchError(f"unknown SUT '{self.name}': choose from {', '.join(SUTS)}")
        self._kafka_topic()
        mode = "source" if self.name == "source-kafka" else "channel"
        consumer = [
            arg
            for kv in (*s.consumer, f"group.id={self.group}", f"bootstrap.servers={self.bootstrap}")
            for arg in ("--consumer", kv)
        ]
        self._component(
            "dispatcher",
            "kafka-dispatcher",
            "--topic",
            self.topic or "",
            "--subscriber",
            subscriber,
            "--mode",
            mode,
            *consumer,
            "--max-pending",
            str(s.max_pending),
            *delivery,
            *(match if self.name == "broker-kafka" else []),
        )
        if self.name == "source-kafka":
            return f"kafka://{self.bootstrap}/{self.topic}"
        producer = [
            arg
            for kv in (*s.producer, f"bootstrap.servers={self.bootstrap}")
            for arg in ("--producer", kv)
        ]
        return self._component("ingress", "kafka-ingress", "--topic", self.topic or "", *producer)

    def _kafka_topic(self) -> None:
        s = self.settings
        if s.kafka_bootstrap:
            self.bootstrap = s.kafka_bootstrap
        else:
            self.broker = Tansu(self.logs / "tansu.log", self.host)
            self.bootstrap = self.broker.start()
        self.topic = f"evbench-{self.run_id}-{self.name}"
        self.group = f"evbench-{self.run_id}-{self.name}"
        create_topic(self.bootstrap, self.topic, s.partitions, s.replication)

    def _component(self, role: str, kind: str, *args: str) -> str:
        child = Child(
            role,
            [sys.executable, "-m", "suts", kind, "--host", self.host, "--port", "0", *args],
            self.logs / f"{role}.log",
        )
        self.components[role] = Started(child, "")
        try:
            listening = child.wait_for("listening", 30)
        except (TimeoutError, RuntimeError) as exc:
            raise EvbenchError(f"{self.name} {role} did not start: {exc}\n{child.tail()}") from None
        url = f"http://{self.host}:{listening['port']}/"
        self.components[role].url = url
        return url

    def wait_ready(self) -> dict:
        """Block until every component answers /ready (a consumer has its partitions)."""
        started = time.monotonic()
        deadline = started + self.settings.ready_timeout_s
        with httpx.Client(timeout=2.0) as client:
            for role, part in self.components.items():
                while True:
                    if not part.child.alive():
                        raise EvbenchError(
                            f"{self.name} {role} exited before it was ready:\n{part.child.tail()}"
                        )
                    try:
                        answer = client.get(part.url + "ready")
                        if answer.status_code == 200:
                            self.readiness[role] = answer.json()
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        raise EvbenchError(
                            f"{self.name} {role} not ready after "
                            f"{self.settings.ready_timeout_s:g} s; see {part.child.log_path}"
                        )
                    time.sleep(0.1)
        self.readiness["waited_s"] = round(time.monotonic() - started, 3)
        return self.readiness

    def processes(self) -> dict[str, int]:
        pids = {role: part.child.pid for role, part in self.components.items()}
        if self.broker is not None and self.broker.pid is not None:
            pids["kafka"] = self.broker.pid
        return pids

    def dead(self) -> list[str]:
        """Components that exited while they should be running."""
        return [role for role, part in self.components.items() if not part.child.alive()]

    def stop(self) -> dict:
        # Ingress first, so traffic stops at the door; then downstream in turn.
        for role, part in reversed(list(self.components.items())):
            part.child.stop()
            self.final_stats[role] = part.child.final_report(timeout_s=2)
        if self.broker is not None:
            self.broker.stop()
        return self.final_stats

    def lag_target(self) -> tuple[str, str, str] | None:
        if self.name in KAFKA_SUTS and self.bootstrap and self.topic and self.group:
            return self.bootstrap, self.group, self.topic
        return None

    def describe(self) -> dict:
        doc: dict = {"topology": TOPOLOGIES.get(self.name, "")}
        if self.name != "direct":
            doc["settings"] = asdict(self.settings)
        if self.name in KAFKA_SUTS or self.bootstrap:
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
        return doc


TOPOLOGIES = {
    "direct": "sender -> receiver",
    "channel-imc": "sender -> imc-channel (queue, dispatcher) -> receiver",
    "broker-imc": "sender -> broker-ingress -> imc-channel -> trigger-filter -> receiver",
    "channel-kafka": "sender -> kafka-ingress -> topic -> kafka-dispatcher -> receiver",
    "broker-kafka": "sender -> kafka-ingress -> topic -> kafka-dispatcher (trigger filter) "
    "-> receiver",
    "source-kafka": "sender (Kafka producer) -> topic -> kafka-dispatcher (source adapter) "
    "-> receiver",
    "external": "sender -> your system -> receiver",
}
