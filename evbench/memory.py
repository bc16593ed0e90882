"""`evbench memory`: how much memory a Kafka consumer takes to drain a backlog (seeds 000/001).

Per scenario (a consumer and a partition count): a fresh Tansu broker, a topic of P partitions
filled as fast as it takes 8 KB events for the fill time (or N events), then one consumer,
started only now as the seed's source was, consuming for the consume time. Every second the
consumer's memory is read from /proc (RSS, USS, anonymous RSS, the kernel's high-water mark)
next to what the consumer says of itself (consumed, Python heap, librdkafka's fetch queue);
every 5 s a line is printed, as the seed reported. At the end: the lag per partition (printed
as `kafka-consumer-groups --describe` prints it), the partitions never consumed, the idle,
peak and post-drain figures, and the predicted buffer bound next to the measured peak.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import psutil
from confluent_kafka import Consumer, Producer, TopicPartition

from analysis.memory import describe_lines, memory_figures, peak_table
from contract.errors import EvbenchError
from contract.layout import safe_component
from contract.parquet import PartWriter
from contract.procs import Child
from contract.records import (
    CONSUMER_LAG_FIELDS,
    MEMORY_SAMPLE_FIELDS,
    ConsumerLagRow,
    MemorySampleRow,
)
from evbench.instruments import start_receiver
from suts.consumers.predict import predicted
from suts.settings import LabSettings
from suts.tansu import Tansu, create_topic

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
_REPORT_EVERY_S = 5.0
_FLUSH_EVERY_S = 30.0  # samples reach disk at least this often, so a crash keeps them
_CE_HEADERS = [
    ("ce_specversion", b"1.0"),
    ("ce_type", b"dev.evbench.measure"),
    ("ce_source", b"evbench/memory"),
    ("content-type", b"application/octet-stream"),
]


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
    specs = []
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


@dataclass(frozen=True)
class MemoryOptions:
    runs_dir: Path
    run_id: str
    partitions: tuple[int, ...] = (1, 50, 100)
    consumers: tuple[ConsumerSpec, ...] = ()
    fill_s: float = 120.0
    fill_events: int | None = None  # instead of fill_s
    consume_s: float = 250.0
    event_bytes: int = 8192
    max_backlog_bytes: int = 4 * 2**30  # the broker keeps every record in memory
    memory_limit_bytes: int | None = None
    malloc_arena_max: int | None = None
    trim_after_drain: bool = False
    tracemalloc: bool = False  # slows pure-Python clients (--python-heap)


def status_fields(text: str) -> dict[str, int]:
    """The memory lines of /proc/<pid>/status in bytes (`VmHWM:  1234 kB`)."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[key] = int(parts[0]) * 1024
    return out


@dataclass
class _Latest:
    """What the consumer said last (progress lines), read by the sampler."""

    progress: dict = field(default_factory=dict)
    trimmed: dict | None = None
    done: dict | None = None


def run_memory(options: MemoryOptions, echo: Callable[[str], None]) -> tuple[Path, list[dict]]:
    """Every scenario in turn; returns the run's directory and the scenarios that failed.
    memory.json is rewritten after each scenario, so an interrupted or failing matrix keeps
    (and analyses) what it finished."""
    root = options.runs_dir / f"{safe_component('run id', options.run_id)}-memory"
    if root.exists():
        raise EvbenchError(f"{root} already exists: choose another --run-id")
    root.mkdir(parents=True)
    rows: list[dict] = []
    failed: list[dict] = []

    def save(interrupted: bool = False) -> None:
        doc = {"scenarios": rows, "failed": failed, "interrupted": interrupted}
        (root / "memory.json").write_text(json.dumps(doc, indent=2) + "\n")

    for partitions in options.partitions:
        for spec in options.consumers:
            scenario = root / f"{spec.name}-p{partitions}"
            echo(f"scenario {scenario.name}: {partitions} partitions, consumer {spec.name}")
            try:
                result = _scenario(options, spec, partitions, scenario, echo)
            except KeyboardInterrupt:
                save(interrupted=True)
                echo(f"interrupted: {len(rows)} finished scenario(s) kept in {root}")
                raise
            except Exception as exc:  # one scenario failing is reported, not fatal
                reason = f"{type(exc).__name__}: {exc}"
                echo(f"  scenario {scenario.name} failed: {reason} (logs in {scenario / 'logs'})")
                failed.append({"scenario": scenario.name, "reason": reason})
                save()
                continue
            (scenario / "scenario.json").write_text(json.dumps(result, indent=2) + "\n")
            rows.append(result)
            save()
    for line in peak_table(rows):
        echo(line)
    return root, failed


def _scenario(options: MemoryOptions, spec: ConsumerSpec, partitions: int, out: Path, echo) -> dict:
    logs = out / "logs"
    logs.mkdir(parents=True)
    broker = Tansu(logs / "tansu.log")
    bootstrap = broker.start()
    topic, group = "backlog", f"memory-{spec.name}-p{partitions}"
    try:
        create_topic(bootstrap, topic, partitions, 1)
        produced, fill_s, ends = _fill(bootstrap, topic, options)
        mib = produced * options.event_bytes / 2**20
        echo(f"  filled {produced} events ({mib:.0f} MiB) in {fill_s:.1f} s")
        result = _consume(options, spec, partitions, bootstrap, topic, group, produced, out, echo)
        result["fill_s"] = round(fill_s, 3)
        result["lag"] = _lag(bootstrap, group, topic, partitions, ends, out)
        result["never_consumed"] = never_consumed(result["per_partition"], result["lag"])
    finally:
        broker.stop()
    for line in describe_lines(
        group, topic, [(r["partition"], r["committed"], r["end"]) for r in result["lag"]]
    ):
        echo("  " + line)
    if result["exit"] == "died during the run":
        echo(
            f"  the consumer died during the run ({result['exit_code']}); its lag is as it left it"
        )
    if result["never_consumed"]:
        echo(f"  partitions never consumed: {', '.join(map(str, result['never_consumed']))}")
    for line in result["logged_errors"][:5]:
        echo(f"  consumer logged: {line}")
    return result


def _fill(bootstrap: str, topic: str, options: MemoryOptions) -> tuple[int, float, dict[int, int]]:
    """Produce 8 KB events as fast as the broker takes them, for the fill time or N events,
    never more than max_backlog_bytes (the broker holds them all in memory). Returns the
    events written, the time taken, and each partition's end offset from the delivery reports:
    Tansu's ListOffsets answers the base offset of a partition's last batch, not its end, which
    a fill in ~1 MB batches puts ~120 events short."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1"})
    payload = b"x" * options.event_bytes
    cap = options.max_backlog_bytes // options.event_bytes
    wanted = min(options.fill_events or cap, cap)
    ends: dict[int, int] = {}
    failed: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    started = time.monotonic()
    deadline = started + (options.fill_s if options.fill_events is None else 1e9)
    sent = 0
    while sent < wanted and time.monotonic() < deadline:
        try:
            # Binary-mode CloudEvent headers, as the lab's Kafka ingress writes them: the
            # channel dispatcher forwards them; the other consumers ignore them.
            producer.produce(
                topic,
                value=payload,
                key=str(sent).encode(),
                headers=[*_CE_HEADERS, ("ce_id", f"memory-{sent}".encode())],
                on_delivery=delivered,
            )
            sent += 1
        except BufferError:
            producer.poll(0.05)  # the producer's queue is full: let it drain
        if sent % 1000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise EvbenchError("the backlog could not be written to the broker within 120 s")
    if failed:
        raise EvbenchError(f"{len(failed)} of {sent} backlog events were not written: {failed[0]}")
    return sent, time.monotonic() - started, ends


class _ClientConsumer:
    """A Python client (`python -m suts.consumers`): it reports its own progress on stdout."""

    def __init__(self, options, spec, bootstrap, topic, group, produced, out, env) -> None:
        argv = [
            sys.executable, "-m", "suts.consumers", spec.client,
            "--bootstrap", bootstrap, "--topic", topic, "--group", group,
            "--expect", str(produced),
            *(arg for key, value in spec.settings for arg in ("--setting", f"{key}={value}")),
            *(["--tracemalloc"] if options.tracemalloc else []),
            *(["--trim-after-drain"] if options.trim_after_drain else []),
            *(["--memory-limit", str(limit)] if (limit := options.memory_limit_bytes) else []),
        ]  # fmt: skip
        self.child = Child(spec.name, argv, out / "logs" / "consumer.log", env=env)
        self.latest = _Latest()
        self.reader = threading.Thread(target=_read, args=(self.child, self.latest), daemon=True)
        self.reader.start()

    def progress(self) -> dict:
        return self.latest.progress

    def finish(self) -> tuple[int, dict]:
        code = self.child.stop(30)  # SIGTERM (it reports and commits), SIGKILL if it hangs
        self.reader.join(5)
        done = self.latest.done or {}
        return code, {"trimmed": self.latest.trimmed, **done}


class _LabConsumer:
    """The lab's consumer-group process (`python -m suts kafka-dispatcher`) delivering to a
    receiver: as the source adapter of source-kafka (`--mode source`) or the channel dispatcher
    of channel-kafka (`--mode channel`). Its progress comes from its own counters and the
    receiver's first delivery."""

    def __init__(self, options, spec, bootstrap, topic, group, produced, out, env) -> None:
        self.receiver, self.receiver_url = start_receiver(
            out / "received", out / "logs" / "receiver.log"
        )
        # The lab's own consumer settings (its 6 s session timeout gets a group assigned in
        # ~3 s on Tansu, where the 45 s default takes ~23 s), then the user's.
        consumer = (
            *LabSettings().consumer,
            f"bootstrap.servers={bootstrap}",
            f"group.id={group}",
            *(f"{k}={v}" for k, v in spec.settings),
        )
        argv = [
            sys.executable, "-m", "suts", "kafka-dispatcher", "--host", "127.0.0.1",
            "--port", "0", "--topic", topic, "--subscriber", f"{self.receiver_url}/",
            "--mode", "source" if spec.client == "source" else "channel",
            *(arg for kv in consumer for arg in ("--consumer", kv)),
        ]  # fmt: skip
        self.child = Child(spec.name, argv, out / "logs" / "consumer.log", env=env)
        try:
            port = self.child.wait_for("listening", 30)["port"]
        except BaseException:
            self.child.stop()
            self.receiver.stop()
            raise
        self.stats_url = f"http://127.0.0.1:{port}/stats"
        self.http = httpx.Client(timeout=2.0)

    def progress(self) -> dict:
        try:
            mine = self.http.get(self.stats_url).json()
            received = self.http.get(f"{self.receiver_url}/stats").json()
        except (httpx.HTTPError, ValueError):
            return {}
        handled = sum(mine.get(k, 0) for k in ("delivered", "delivery_failed", "filtered"))
        return {"consumed": handled, "first_message_ns": received.get("first_received_ns")}

    def finish(self) -> tuple[int, dict]:
        last = self.progress()
        code = self.child.stop(30)
        self.http.close()
        self.receiver.stop()
        return code, {
            "consumed": last.get("consumed"),
            "first_message_ns": last.get("first_message_ns"),
        }


def _consume(options, spec, partitions, bootstrap, topic, group, produced, out, echo) -> dict:
    env = {**os.environ}
    if options.malloc_arena_max:
        env["MALLOC_ARENA_MAX"] = str(options.malloc_arena_max)
    # Every time of the scenario counts from here, on the wall clock (the consumer's own
    # first-message stamp, the samples, the series in the analysis).
    started_ns = time.time_ns()
    writer = PartWriter(out / "samples" / "memory", MEMORY_SAMPLE_FIELDS, prefix="memory")
    lab = spec.client in LAB_CONSUMERS
    kind = _LabConsumer if lab else _ClientConsumer
    consumer = kind(options, spec, bootstrap, topic, group, produced, out, env)
    child = consumer.child
    echo(f"  consumer {spec.name} started, pid {child.pid}")
    try:
        series, drained_s, hwm = _sample_until_done(
            options, consumer, produced, started_ns, writer, echo
        )
    except BaseException:
        consumer.finish()  # stops the consumer (and the lab's receiver) by pid
        raise
    finally:
        writer.flush()  # every sample taken so far stays on disk
    died = not child.alive()
    last_progress = consumer.progress()  # a dead Python client's last line still counts
    code, done = consumer.finish()
    first_ns = done.get("first_message_ns") or last_progress.get("first_message_ns")
    first_s = None if first_ns is None else (first_ns - started_ns) / 1e9
    figures = memory_figures(series, first_s, drained_s, hwm) if series else None
    prediction = predicted(
        spec.client,
        dict(spec.settings),
        partitions,
        options.event_bytes,
        pending_events=LabSettings().max_pending if lab else 0,
    )
    return {
        "consumer": spec.name,
        "client": spec.client,
        "settings": dict(spec.settings),
        "partitions": partitions,
        "produced": produced,
        "consumed": done.get("consumed", last_progress.get("consumed")),
        "consumer_started_ns": started_ns,
        "first_message_s": first_s,
        "drained_s": drained_s,
        "exit": "died during the run" if died else f"exit {code}",
        "exit_code": code,
        "errors": done.get("errors", []),
        "per_partition": done.get("per_partition"),
        # A consumer that died says nothing at the end: what its log said last, instead.
        "log_tail": child.tail(10) if died or code != 0 else None,
        "logged_errors": logged_errors(_read_text(child.log_path)),
        "trimmed": done.get("trimmed"),
        "figures": asdict(figures) if figures else None,
        "predicted_buffer_bytes": prediction.buffer_bytes,
        "predicted_formula": prediction.formula,
        "memory_limit_bytes": None if lab else options.memory_limit_bytes,
        "malloc_arena_max": options.malloc_arena_max,
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


def _sample_until_done(options, consumer, produced, started_ns, writer, echo):
    """Samples the consumer every second for the consume time or until it dies: (seconds since
    start, RSS) series, when it drained, its high-water mark."""
    child = consumer.child
    started = time.monotonic()
    # last_report is in seconds since the consumer's start, as now_s is
    series, drained_s, last_report = [], None, -_REPORT_EVERY_S
    last_flush, hwm = started, None
    while time.monotonic() - started < options.consume_s and child.alive():
        time.sleep(1.0)
        progress = consumer.progress()
        sample = _sample(child.pid, progress)
        if sample is None:
            break
        now_s = (sample.t_ns - started_ns) / 1e9
        writer.append(sample)
        series.append((now_s, sample.rss_bytes))
        hwm = sample.hwm_bytes
        consumed = progress.get("consumed") or 0
        if drained_s is None and consumed >= produced:
            drained_s = now_s
        if now_s - last_report >= _REPORT_EVERY_S:
            last_report = now_s
            echo(
                f"  {now_s:5.0f} s  rss {sample.rss_bytes / 2**20:7.1f} MiB  "
                f"uss {(sample.uss_bytes or 0) / 2**20:7.1f} MiB  consumed {consumed}/{produced}"
            )
        if time.monotonic() - last_flush >= _FLUSH_EVERY_S:
            last_flush = time.monotonic()
            writer.flush()
    return series, drained_s, hwm


def never_consumed(per_partition: dict[str, int] | None, lag: list[dict]) -> list[int]:
    """Partitions with events that the consumer never read from: by its own count when it
    finished, else (it died or was killed) those with nothing committed. Pure."""
    waiting = [r for r in lag if r["lag"] > 0 or (r["committed"] is None and r["end"] > 0)]
    if per_partition is not None:
        return [r["partition"] for r in waiting if not per_partition.get(str(r["partition"]))]
    return [r["partition"] for r in waiting if r["committed"] is None]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _read(child: Child, latest: _Latest) -> None:
    while (doc := child.lines.get()) is not None:
        kind = doc.get("event")
        if kind == "progress":
            latest.progress = doc
        elif kind == "trimmed":
            latest.trimmed = doc
        elif kind == "done":
            latest.done = doc


def _sample(pid: int, progress: dict) -> MemorySampleRow | None:
    try:
        process = psutil.Process(pid)
        full = process.memory_full_info()
        status = status_fields(Path(f"/proc/{pid}/status").read_text())
    except (psutil.Error, OSError):
        return None
    return MemorySampleRow(
        time.time_ns(),
        "consumer",
        pid,
        full.rss,
        getattr(full, "uss", None),
        status.get("RssAnon"),
        status.get("VmHWM"),
        progress.get("consumed"),
        progress.get("py_traced_bytes"),
        progress.get("fetchq_bytes"),
    )


def _lag(
    bootstrap: str, group: str, topic: str, partitions: int, ends: dict[int, int], out: Path
) -> list[dict]:
    """Each partition's committed offset and end, from outside the group (no rebalance). The
    end is the fill's own where the broker reports less (see _fill)."""
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        committed = {tp.partition: tp.offset for tp in reader.committed(tps, timeout=10)}
        rows, now_ns = [], time.time_ns()
        writer = PartWriter(out / "samples" / "consumer-lag", CONSUMER_LAG_FIELDS, prefix="lag")
        for p in range(partitions):
            low, high = reader.get_watermark_offsets(
                TopicPartition(topic, p), timeout=10, cached=False
            )
            high = max(high, ends.get(p, 0))
            offset = committed.get(p)
            known = offset if offset is not None and offset >= 0 else None
            lag = high - (known if known is not None else low)
            writer.append(ConsumerLagRow(now_ns, group, topic, p, high, known, lag))
            rows.append({"partition": p, "committed": known, "end": high, "lag": lag})
        writer.flush()
        return rows
    finally:
        reader.close()
