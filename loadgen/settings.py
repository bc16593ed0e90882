"""What shapes one sender process, in one place: the fields with their defaults, the flags with
their help, and the argv that carries them to `python -m loadgen`.

`evbench send` and `python -m loadgen` parse these flags; `evbench run` offers the knobs (the
subset a user tunes per run) under the same names, and starts its sender with `command()`; the
benchmarks and the tests start senders the same way, so no flag is spelled twice and a value
that parses in one place parses in all of them.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from contract.senderlines import parse_sender_line
from loadgen.kafkaconfig import kafka_config_arg
from runtime.argtypes import (
    at_least_one,
    epoch_ns,
    http_url,
    non_negative,
    payload_bytes,
    port_number,
    positive_seconds,
    seconds,
)
from runtime.procs import Child

# A --start-at-ns this far past is refused: the sender would fire every slot since then at
# once. A fleet's master gives its workers a start 3 s ahead (loadgen.fleet.master); this leaves
# room for a worker host whose clock runs a little ahead.
START_PASSED_MAX_S = 10.0


@dataclass(frozen=True)
class SendKnobs:
    """The sending knobs `evbench run` and `evbench send` share; all of them land in run.json."""

    payload_bytes: int = 8192
    step_gap_s: float = 2.0
    warmup: str | None = None  # DURATION@RATE, e.g. 10s@100
    max_inflight: int = 4096
    request_timeout_s: float = 30.0
    drain_timeout_s: float = 10.0
    decoy_every: int = 0
    # Prometheus /metrics of the sender (a fleet's: its master's) on this port; 0 picks a free
    # one; None serves none. Loopback unless asked: the figures are nobody else's business.
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"


@dataclass(frozen=True)
class SenderSettings:
    """One sender process: where it sends, what pace, where its records go, and how."""

    target: str  # http(s)://... or kafka://host:port/topic
    pace: str  # a pace name from paces/ or an inline spec; the sender resolves it
    out: Path
    knobs: SendKnobs = field(default_factory=SendKnobs)
    # KEY=VALUE producer settings for kafka:// targets (a file's are read into items when the
    # flags are parsed: loadgen.kafkaconfig)
    kafka_config: tuple[str, ...] = ()
    run_tag: str | None = None
    start_at_ns: int | None = None
    start_delay_s: float = 0.5
    flush_interval_s: float = 1.0
    worker: int = 0
    workers: int = 1
    clock_url: str | None = None  # the receiver's /clock: offsets measured before and after
    latency_histograms: bool = False  # per-second latency counts in the progress lines
    metrics_lines: bool = False  # a `metrics` line every second (what a fleet master sums)
    first_step: int = 1  # a search's probes continue the step and slot numbers of the last
    first_seq: int = 0

    def argv(self) -> list[str]:
        """The flags that make `python -m loadgen` parse back exactly these settings."""
        args: list[str] = []
        for name, flag, _ in _FLAGS:
            value = _get(self, name)
            if name == "kafka_config":
                for item in value:
                    args += [flag, item]
            elif isinstance(value, bool):
                args += [flag] if value else []
            elif value is not None:
                args += [flag, str(value)]
        return args

    def command(self) -> list[str]:
        return [sys.executable, "-m", "loadgen", *self.argv()]

    def start(self, log: Path, name: str = "sender") -> Child:
        """The one way a sender process is started (runner, benchmarks, tests)."""
        return Child(name, self.command(), log)

    def start_fleet(
        self, workers: int, log_dir: Path, timeout_s: float = 30.0
    ) -> tuple[Child, list[Child]]:
        """A Locust fleet on this host: a master (whose lines are the fleet's, of the types one
        sender prints) and `workers` worker processes, each running a sender on every
        `workers`th slot. The master's Locust statistics go to log_dir/locust*."""
        fleet = [sys.executable, "-m", "loadgen.fleet"]
        master = Child(
            "sender",
            [
                *fleet,
                "master",
                *replace(self, workers=workers).argv(),
                "--bind-port",
                "0",
                "--expect-timeout",
                str(timeout_s),
                "--locust-csv",
                str(log_dir / "locust"),
                "--locust-html",
                str(log_dir / "locust.html"),
            ],
            log_dir / "fleet-master.log",
        )
        followers: list[Child] = []
        try:
            listening = parse_sender_line(master.wait_for("fleet_listening", timeout_s))
            assert listening is not None and listening["event"] == "fleet_listening"
            port = listening["port"]
            for index in range(workers):
                argv = [*fleet, "worker", "--master-port", str(port), "--log-dir", str(log_dir)]
                followers.append(
                    Child(f"fleet-worker-{index}", argv, log_dir / f"fleet-{index}.log")
                )
        except BaseException:
            for child in [master, *followers]:
                child.stop()
            raise
        return master, followers


# (field, flag, argparse keywords): the one place a sender flag is spelled. Knob fields are
# named `knobs.<name>`. Defaults come from the dataclasses above.
_FLAGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "target",
        "--target",
        dict(
            required=True,
            help="ingress URL, e.g. http://127.0.0.1:8080/, or kafka://host:port/topic to "
            "produce records straight to a topic",
        ),
    ),
    (
        "pace",
        "--pace",
        dict(required=True, help="pace name from paces/ or a spec like 500:10,1000:10"),
    ),
    ("out", "--out", dict(type=Path, required=True, help="directory for sent/*.parquet")),
    (
        "knobs.decoy_every",
        "--decoy-every",
        dict(
            type=non_negative,
            metavar="N",
            help="every Nth event gets a type no trigger matches, to test filters "
            "(default %(default)s: none)",
        ),
    ),
    (
        "kafka_config",
        "--kafka-config",
        dict(
            action="extend",
            type=kafka_config_arg,
            metavar="KEY=VALUE|FILE",
            help="producer setting for kafka:// targets (repeatable), e.g. linger.ms=0, or a "
            "file of them: a properties file (KEY=VALUE lines, # comments), as Kafka's "
            "client.properties, or a JSON object; read before the sender starts",
        ),
    ),
    ("run_tag", "--run-tag", dict(help="prefix of event ids (default: random)")),
    (
        "knobs.payload_bytes",
        "--payload-bytes",
        dict(
            type=payload_bytes,
            help="event payload size in bytes, 64 to 1048576 (default %(default)s)",
        ),
    ),
    (
        "knobs.step_gap_s",
        "--step-gap",
        dict(
            type=seconds,
            metavar="S",
            help="pause between steps, where the sender collects garbage (default %(default)s)",
        ),
    ),
    (
        "knobs.warmup",
        "--warmup",
        dict(
            metavar="DURATION@RATE",
            help="warm the system first, e.g. 10s@100; marked in the records, not counted",
        ),
    ),
    (
        "knobs.max_inflight",
        "--max-inflight",
        dict(
            type=at_least_one,
            help="unanswered-request cap; slots over it are recorded as failures "
            "(default %(default)s)",
        ),
    ),
    (
        "knobs.request_timeout_s",
        "--request-timeout",
        dict(
            type=positive_seconds,
            metavar="S",
            help="per-request timeout (default %(default)s)",
        ),
    ),
    (
        "knobs.drain_timeout_s",
        "--drain-timeout",
        dict(
            type=seconds,
            metavar="S",
            help="after the last slot, wait this long for answers (default %(default)s)",
        ),
    ),
    (
        "knobs.metrics_port",
        "--sender-metrics-port",
        dict(
            type=port_number,
            metavar="PORT",
            help="serve the sender's live figures at http://HOST:PORT/metrics for Prometheus: "
            "events sent, acked, failed and refused by the in-flight cap, in flight, the step "
            "and its target rate, and histograms of sender lag and publish latency; 0 picks a "
            "free port, announced in a `metrics_listening` line; a fleet's master serves the "
            "fleet's (default: not served)",
        ),
    ),
    (
        "knobs.metrics_host",
        "--sender-metrics-host",
        dict(
            metavar="HOST",
            help="address the sender's /metrics listens on (default %(default)s: this host "
            "only; 0.0.0.0 for a Prometheus elsewhere)",
        ),
    ),
    (
        "start_at_ns",
        "--start-at-ns",
        dict(
            type=epoch_ns,
            help="epoch ns of the schedule start (lets several workers share one); not more "
            f"than {START_PASSED_MAX_S:g} s past",
        ),
    ),
    (
        "start_delay_s",
        "--start-delay",
        dict(
            type=seconds,
            metavar="S",
            help="without --start-at-ns, start this long after launch (default %(default)s)",
        ),
    ),
    (
        "flush_interval_s",
        "--flush-interval",
        dict(
            type=positive_seconds,
            metavar="S",
            help="seconds between record flushes (default %(default)s)",
        ),
    ),
    ("worker", "--worker", dict(type=non_negative, help="this worker's index (default 0)")),
    (
        "workers",
        "--workers",
        dict(type=at_least_one, help="workers sharing the pace (default %(default)s)"),
    ),
    (
        "clock_url",
        "--clock-url",
        dict(
            type=http_url,
            metavar="URL",
            help="the receiver's clock endpoint (http://HOST:PORT/clock): before the first slot "
            "and after the last, measure this host's clock offset to it, so that the analysis "
            "can correct end-to-end latency across hosts (default: not measured)",
        ),
    ),
    (
        "first_step",
        "--first-step",
        dict(type=at_least_one, help="number the pace's steps from this (default %(default)s)"),
    ),
    (
        "first_seq",
        "--first-seq",
        dict(type=non_negative, help="number the slots from this (default %(default)s)"),
    ),
    (
        "latency_histograms",
        "--latency-histograms",
        dict(
            action="store_true",
            help="print an `answers` line every second: the answers since the last by whole ms "
            "from their intended time, and the failures by error (what a Locust fleet worker "
            "feeds Locust's statistics from)",
        ),
    ),
    (
        "metrics_lines",
        "--metrics-lines",
        dict(
            action="store_true",
            help="print a `metrics` line every second and before the done line: the figures "
            "--sender-metrics-port serves (what a Locust fleet worker's sender gives its master "
            "to add up)",
        ),
    ),
)

KNOB_FIELDS = tuple(f.name for f in fields(SendKnobs))


def _get(settings: SenderSettings, name: str) -> Any:
    if name.startswith("knobs."):
        return getattr(settings.knobs, name.removeprefix("knobs."))
    return getattr(settings, name)


def _default(name: str) -> Any:
    if name.startswith("knobs."):
        return getattr(SendKnobs(), name.removeprefix("knobs."))
    if name == "kafka_config":
        return None  # argparse appends to a fresh list
    spec = {f.name: f for f in fields(SenderSettings)}[name]
    return spec.default


def _options(name: str, flag: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    options = {**kwargs, "dest": _dest(name)}
    if "action" not in options:
        options.setdefault("metavar", flag.removeprefix("--").upper().replace("-", "_"))
    if not options.get("required"):
        options["default"] = _default(name)
    return options


def _dest(name: str) -> str:
    return name.replace(".", "__")


def add_sender_arguments(parser: argparse.ArgumentParser) -> None:
    """Every flag of one sender process (`evbench send`, `python -m loadgen`)."""
    for name, flag, kwargs in _FLAGS:
        parser.add_argument(flag, **_options(name, flag, kwargs))


def add_knob_arguments(parser: argparse.ArgumentParser) -> None:
    """The knobs only (`evbench run`, which picks target, pace and output itself)."""
    for name, flag, kwargs in _FLAGS:
        if name.startswith("knobs."):
            parser.add_argument(flag, **_options(name, flag, kwargs))


def knobs_from_args(args: argparse.Namespace) -> SendKnobs | None:
    """The sender's knobs as the flags give them; None for a command without them."""
    if not hasattr(args, _dest("knobs." + KNOB_FIELDS[0])):
        return None
    return SendKnobs(**{n: getattr(args, _dest("knobs." + n)) for n in KNOB_FIELDS})


def settings_from_args(args: argparse.Namespace) -> SenderSettings:
    values = {
        name: getattr(args, _dest(name)) for name, _, _ in _FLAGS if not name.startswith("knobs.")
    }
    values["kafka_config"] = tuple(values["kafka_config"] or ())
    return SenderSettings(**values, knobs=knobs_from_args(args) or SendKnobs())
