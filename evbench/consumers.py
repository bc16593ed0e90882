"""The consumers `evbench memory` measures (seeds 000/001): the lab's own consumer-group
processes delivering to the session's receiver, and the bare Python clients; each behind one small
interface (`child`, `progress()`, `finish()`), and what a consumer logged that went wrong."""

from __future__ import annotations

import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from contract.consumerlines import parse_consumer_line
from contract.errors import EvbenchError
from runtime.procs import Child
from suts.settings import LabSettings, subscriber_urls

# Seed 001's low-memory settings for librdkafka.
LOW_MEMORY = (
    ("queued.min.messages", "1"),
    ("queued.max.messages.kbytes", "3000"),
    ("fetch.max.bytes", "3000000"),
)
CONSUMERS = {
    "source": ("source", ()),  # the lab's source adapter (librdkafka), delivering to a receiver
    "dispatcher": ("dispatcher", ()),  # the lab's Kafka channel dispatcher, likewise
    "confluent": ("confluent", ()),
    "confluent-lowmem": ("confluent", LOW_MEMORY),
    "aiokafka": ("aiokafka", ()),
    "kafka-python": ("kafka-python", ()),
}


@dataclass(frozen=True)
class ConsumerSpec:
    name: str  # as the user named it (a row of the tables)
    client: str  # suts.consumers.CLIENTS
    settings: tuple[tuple[str, str], ...]


# The lab's own consumer processes (each delivering to a receiver), and every consumer built
# on librdkafka (whose settings are dotted).
LAB_CONSUMERS = ("source", "dispatcher")
LIBRDKAFKA_CLIENTS = ("confluent", *LAB_CONSUMERS)


def consumer_specs(names: str, extra: tuple[str, ...] = ()) -> list[ConsumerSpec]:
    """`confluent,confluent-lowmem,...` with every `--consumer KEY=VALUE` applied to the
    clients it belongs to: librdkafka's dotted names (`fetch.max.bytes`) to confluent, the
    Python clients' identifiers (`fetch_max_bytes`) to aiokafka and kafka-python; a later value
    wins. Raises ValueError naming an unknown consumer or a bad setting."""
    overrides = []
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--consumer '{item}' must be KEY=VALUE")
        overrides.append((key.strip(), value.strip()))
    specs: list[ConsumerSpec] = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name not in CONSUMERS:
            raise ValueError(f"unknown consumer '{name}': use {', '.join(CONSUMERS)}")
        if any(spec.name == name for spec in specs):
            raise ValueError(f"consumer '{name}' named twice")
        client, settings = CONSUMERS[name]
        # librdkafka's names are dotted, the Python clients' snake_case.
        mine = [(k, v) for k, v in overrides if ("." in k) == (client in LIBRDKAFKA_CLIENTS)]
        merged = dict(settings) | dict(mine)
        specs.append(ConsumerSpec(name, client, tuple(merged.items())))
    if not specs:
        raise ValueError("no consumer named")
    return specs


@dataclass
class _Latest:
    """What the consumer said last (progress lines), read by the sampler."""

    progress: dict[str, Any] = field(default_factory=dict)
    trimmed: dict[str, Any] | None = None
    done: dict[str, Any] | None = None


class Consumer(Protocol):
    """A consumer process under measurement."""

    child: Child

    def progress(self) -> dict[str, Any]: ...

    def finish(self) -> tuple[int, dict[str, Any]]: ...


@dataclass(frozen=True)
class Backlog:
    """Where a consumer reads: a filled topic, and the group it consumes as."""

    bootstrap: str
    topic: str
    group: str
    produced: int  # events in the topic: a consumer that read them all is drained


@dataclass(frozen=True)
class BareClientOptions:
    """What applies to the bare clients only (the lab's consumers run as the lab runs them)."""

    tracemalloc: bool = False  # slows pure-Python clients (--python-heap)
    trim_after_drain: bool = False
    memory_limit_bytes: int | None = None


class ClientConsumer:
    """A Python client (`python -m suts.consumers`): it reports its own progress on stdout."""

    def __init__(
        self,
        spec: ConsumerSpec,
        backlog: Backlog,
        bare: BareClientOptions,
        log: Path,
        env: dict[str, str],
    ) -> None:
        argv = [
            sys.executable, "-m", "suts.consumers", spec.client,
            "--bootstrap", backlog.bootstrap, "--topic", backlog.topic, "--group", backlog.group,
            "--expect", str(backlog.produced),
            *(arg for key, value in spec.settings for arg in ("--setting", f"{key}={value}")),
            *(["--tracemalloc"] if bare.tracemalloc else []),
            *(["--trim-after-drain"] if bare.trim_after_drain else []),
            *(["--memory-limit", str(limit)] if (limit := bare.memory_limit_bytes) else []),
        ]  # fmt: skip
        self.child = Child(spec.name, argv, log, env=env)
        self.latest = _Latest()
        self.reader = threading.Thread(target=_read, args=(self.child, self.latest), daemon=True)
        self.reader.start()

    def progress(self) -> dict[str, Any]:
        return self.latest.progress

    def finish(self) -> tuple[int, dict[str, Any]]:
        code = self.child.stop(30)  # SIGTERM (it reports and commits), SIGKILL if it hangs
        self.reader.join(5)
        done = self.latest.done or {}
        return code, {"trimmed": self.latest.trimmed, **done}


class LabConsumer:
    """The lab's consumer-group process (`python -m suts kafka-dispatcher`) delivering to the
    session's receiver: as the source adapter of source-kafka (`--mode source`) or the channel
    dispatcher of channel-kafka (`--mode channel`). Its progress comes from its own counters
    and the receiver's first delivery."""

    def __init__(
        self,
        spec: ConsumerSpec,
        backlog: Backlog,
        receiver_url: str,
        log: Path,
        env: dict[str, str],
        subscriptions: int = 1,
    ) -> None:
        self.receiver_url = receiver_url
        # A consumer group per subscription, each delivering to a path of its own at the one
        # receiver, as a channel's subscriptions do in a run.
        subscribers = subscriber_urls(receiver_url, subscriptions)
        # The lab's own consumer settings (its 6 s session timeout gets a group assigned in
        # ~3 s on Tansu, where the 45 s default takes ~23 s), then the user's.
        consumer = (
            *LabSettings().consumer,
            f"bootstrap.servers={backlog.bootstrap}",
            f"group.id={backlog.group}",
            *(f"{k}={v}" for k, v in spec.settings),
        )
        argv = [
            sys.executable, "-m", "suts", "kafka-dispatcher", "--host", "127.0.0.1",
            "--port", "0", "--topic", backlog.topic,
            *(arg for url in subscribers for arg in ("--subscriber", url)),
            "--mode", "source" if spec.client == "source" else "channel",
            *(arg for kv in consumer for arg in ("--consumer", kv)),
        ]  # fmt: skip
        self.child = Child(spec.name, argv, log, env=env)
        try:
            port = self.child.wait_for("listening", 30)["port"]
        except BaseException:
            self.child.stop()
            raise
        self.stats_url = f"http://127.0.0.1:{port}/stats"
        self.http = httpx.Client(timeout=2.0)

    def progress(self) -> dict[str, Any]:
        try:
            mine = self.http.get(self.stats_url).json()
            received = self.http.get(f"{self.receiver_url}/stats").json()
        except (httpx.HTTPError, ValueError):
            return {}
        handled = sum(mine.get(k, 0) for k in ("delivered", "delivery_failed", "filtered"))
        return {"consumed": handled, "first_message_ns": received.get("first_received_ns")}

    def finish(self) -> tuple[int, dict[str, Any]]:
        last = self.progress()
        code = self.child.stop(30)
        self.http.close()
        return code, {
            "consumed": last.get("consumed"),
            "first_message_ns": last.get("first_message_ns"),
        }


# librdkafka's log lines carry a syslog level: %0 emergency .. %3 error, %4 warning.
_RDKAFKA_LEVEL = re.compile(r"^%([0-4])\|")
_PYTHON_ERROR = re.compile(r"^(Traceback|\w+(Error|Exception)\b)")


def logged_errors(log_text: str, limit: int = 20) -> list[str]:
    """What a consumer logged that says something went wrong, in order, each line once:
    librdkafka's warnings and errors (`%3|...`), Python tracebacks' first and last lines.
    Pure."""
    found: list[str] = []
    for raw in log_text.splitlines():
        line = raw.strip()
        if not line or line.startswith("{"):  # its progress lines are JSON
            continue
        if (_RDKAFKA_LEVEL.match(line) or _PYTHON_ERROR.match(line)) and line not in found:
            found.append(line[:500])
            if len(found) == limit:
                break
    return found


def read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _read(child: Child, latest: _Latest) -> None:
    """The consumer's lines, parsed once into their types (contract.consumerlines) as they
    come."""
    while (doc := child.lines.get()) is not None:
        try:
            line = parse_consumer_line(doc)
        except EvbenchError:  # a line short of its keys: the consumer's log says more
            continue
        if line is None:
            continue
        if line["event"] == "progress":
            latest.progress = dict(line)
        elif line["event"] == "trimmed":
            latest.trimmed = dict(line)
        elif line["event"] == "done":
            latest.done = dict(line)
