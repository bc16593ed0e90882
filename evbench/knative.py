"""Importing the 2019 Knative Eventing performance results (formats in
../shared/reference/knative-2019.md, beside this repository) as evbench runs, so `analyze` and
the reports handle them.

2019 recorded samples, not events: a publish latency `pl` and a delivery latency `dl` per
accepted event, both at the event's SENT time, and a failure sample per failed one. Events are
rebuilt by pairing `pl` and `dl` samples with the same send time; a `pl` without its `dl` was
accepted and never delivered (lost). 2019 had no schedule, so `intended_ns = sent_ns`: corrected
latencies equal the uncorrected ones, which run.json says.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from contract.documents import PaceStepDoc, RunDoc
from contract.errors import EvbenchError
from contract.layout import SutDir, safe_component
from contract.records import (
    RECEIVED_FIELDS,
    RUN_JSON_VERSION,
    SENT_FIELDS,
    ReceivedRow,
    SentRow,
)
from contract.units import MS_PER_S, NS_PER_MS
from runtime.parquet import PartWriter
from runtime.runs import new_sut_dir

MAKO_COLUMNS = ["inputValue", "errorMessage", "pl", "pe", "st", "dl", "de", "dt", "pet", "det"]
STEP_GAP_MS = 1000.0  # 2019 paused ~2 s between steps; a longer silence starts a new step
IMPORTED_ERROR = "publish failure (imported from 2019 results)"
PACE_NAME = "knative-2019"  # imports go to runs/<run id>-knative-2019/<sut>/


@dataclass
class Samples:
    """What 2019 recorded, times in ms since the epoch, latencies in ms."""

    publish: list[tuple[float, float]] = field(default_factory=list)  # (sent, latency)
    delivery: list[tuple[float, float]] = field(default_factory=list)  # (sent, latency)
    send_failures: list[float] = field(default_factory=list)  # sent


def parse_mako_csv(text: str, source: str = "mako csv") -> Samples:
    """The mako-stub CSV: `#` header lines (the last naming the columns), one sample per row
    with only its metric's column filled, latencies in seconds, aggregates without inputValue."""
    columns = MAKO_COLUMNS
    samples = Samples()
    failure_rows: list[float] = []
    pet: list[float] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            names = [c.strip() for c in line.lstrip("#").split(",")]
            if "inputValue" in names:
                columns = names
            continue
        if not line.strip():
            continue
        row = dict(zip(columns, next(csv.reader([line])), strict=False))
        x = row.get("inputValue", "").strip()
        if not x:
            continue  # a run aggregate, not a sample
        try:
            x_ms = float(x)
            if (row.get("errorMessage") or "").strip():
                if "publish" in row["errorMessage"].lower():
                    failure_rows.append(x_ms)
                continue
            if row.get("pl", "").strip():
                samples.publish.append((x_ms, float(row["pl"]) * MS_PER_S))
            elif row.get("dl", "").strip():
                samples.delivery.append((x_ms, float(row["dl"]) * MS_PER_S))
            elif row.get("pet", "").strip():
                pet.append(x_ms)
        except ValueError as exc:
            raise EvbenchError(f"{source}:{number}: not a number in {line!r} ({exc})") from exc
    # Failures are error rows when the stub wrote them, else one pet sample per failure.
    samples.send_failures = failure_rows or pet
    return samples


def _two_column(path: Path) -> list[tuple[float, float]]:
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            x, y = line.split(",")[:2]
            rows.append((float(x), float(y)))
        except ValueError as exc:
            raise EvbenchError(f"{path}:{number}: expected x_ms,value, got {line!r}") from exc
    return rows


def parse_processed_dir(directory: Path) -> Samples:
    """The processed two-column files (`x_ms_since_epoch,value`, latencies already in ms)."""
    publish = directory / "points-publish-latency.csv"
    delivery = directory / "points-delivery-latency.csv"
    missing = [p.name for p in (publish, delivery) if not p.is_file()]
    if missing:
        raise EvbenchError(f"{directory}: missing {', '.join(missing)}")
    failures = directory / "send-failure-throughput.csv"
    return Samples(
        publish=_two_column(publish),
        delivery=_two_column(delivery),
        send_failures=[x for x, _ in _two_column(failures)] if failures.is_file() else [],
    )


def segments(sent_ms: list[float], gap_ms: float = STEP_GAP_MS) -> list[tuple[int, int]]:
    """Index ranges [start, end) of sorted send times separated by silences longer than gap_ms."""
    if not sent_ms:
        return []
    bounds = [0] + [i for i in range(1, len(sent_ms)) if sent_ms[i] - sent_ms[i - 1] > gap_ms]
    return list(zip(bounds, [*bounds[1:], len(sent_ms)], strict=True))


@dataclass(frozen=True)
class Event:
    sent_ms: float
    publish_ms: float | None  # None: a send failure
    delivery_ms: float | None  # None: not delivered


def rebuild_events(samples: Samples) -> tuple[list[Event], int]:
    """Pair each publish sample with a delivery sample of the same send time.

    Returns the events and the number of delivery samples left without a publish sample (2019
    wrote `dl` only for accepted events, so any left over are reported, not guessed at)."""
    deliveries: dict[float, list[float]] = {}
    for sent, latency in samples.delivery:
        deliveries.setdefault(sent, []).append(latency)
    events = []
    for sent, publish in samples.publish:
        waiting = deliveries.get(sent)
        events.append(Event(sent, publish, waiting.pop() if waiting else None))
    events += [Event(sent, None, None) for sent in samples.send_failures]
    events.sort(key=lambda e: e.sent_ms)
    return events, sum(len(v) for v in deliveries.values())


def import_knative(
    source: Path, runs_dir: Path, run_id: str, sut: str, pace_rates: list[int] | None = None
) -> Path:
    """Write a run directory from 2019 results; returns the SUT directory."""
    # Checked again where the directory is made; here so a bad name fails before a long parse.
    safe_component("run id", run_id)
    safe_component("SUT name", sut)
    events, unpaired = rebuild_events(read_samples(source))
    if not events:
        raise EvbenchError(f"{source}: no publish samples or failures found")
    spans = segments([e.sent_ms for e in events])
    steps = pace_steps(events, spans, pace_rates, source)
    sut_dir = new_sut_dir(runs_dir, run_id, PACE_NAME, sut)
    _write_records(sut_dir, events, spans, steps)
    run: RunDoc = {
        "version": RUN_JSON_VERSION,
        "run_id": run_id,
        "sut": sut,
        "status": "completed",
        "imported_from": str(source),
        "notes": "2019 results: no schedule, so intended = sent and corrected latencies equal "
        "the uncorrected ones; events rebuilt by pairing publish and delivery samples on send "
        "time; steps found from pauses in sending",
        "pace": {
            "name": PACE_NAME,
            "spec": ",".join(f"{s['rate_per_s']}:{s['duration_s']}" for s in steps),
            "steps": steps,
        },
        "schedule": {"start_ns": round(events[0].sent_ms * NS_PER_MS), "step_gap_s": None},
        "payload_bytes": None,
        "unpaired_delivery_samples": unpaired,
        "imported_at_ns": time.time_ns(),
    }
    sut_dir.run_json.write_text(json.dumps(run, indent=2) + "\n")
    return sut_dir.root


def read_samples(source: Path) -> Samples:
    """A processed directory or a mako-stub CSV, whichever `source` is."""
    if source.is_dir():
        return parse_processed_dir(source)
    if source.is_file():
        return parse_mako_csv(source.read_text(errors="replace"), str(source))
    raise EvbenchError(f"{source}: no such file or directory")


def pace_steps(
    events: list[Event], spans: list[tuple[int, int]], rates: list[int] | None, source: Path
) -> list[PaceStepDoc]:
    """One step per span of sending: its whole seconds, and its rate from the pace when given
    (which must have as many steps), else the span's events over its seconds."""
    if rates is not None and len(rates) != len(spans):
        raise EvbenchError(
            f"{source}: the pace has {len(rates)} steps but the data has {len(spans)} "
            f"(send times separated by more than {STEP_GAP_MS / MS_PER_S:g} s); "
            "omit --pace to infer"
        )
    steps: list[PaceStepDoc] = []
    for i, (start, end) in enumerate(spans):
        duration_s = max(1, round((events[end - 1].sent_ms - events[start].sent_ms) / MS_PER_S))
        rate = rates[i] if rates else max(1, round((end - start) / duration_s))
        steps.append({"rate_per_s": rate, "duration_s": duration_s})
    return steps


def _write_records(
    sut_dir: SutDir, events: list[Event], spans: list[tuple[int, int]], steps: list[PaceStepDoc]
) -> None:
    """sent/ and received/ as a run writes them, one part of each per step."""
    sent_w = PartWriter(sut_dir.sent, SENT_FIELDS, prefix="sent-imported")
    recv_w = PartWriter(sut_dir.received, RECEIVED_FIELDS, prefix="imported")
    for number, ((start, end), step) in enumerate(zip(spans, steps, strict=True), start=1):
        for seq in range(start, end):
            e = events[seq]
            sent_w.append(_sent_row(e, seq, number, step["rate_per_s"]))
            if e.publish_ms is not None and e.delivery_ms is not None:
                recv_w.append(
                    ReceivedRow(
                        event_id=f"knative-{seq}",
                        received_ns=round(e.sent_ms * NS_PER_MS) + round(e.delivery_ms * NS_PER_MS),
                        receiver="knative-2019",
                        payload_bytes=0,
                        ce_id=None,
                        ce_type=None,
                        ce_source=None,
                    )
                )
        sent_w.flush()
        recv_w.flush()


def _sent_row(e: Event, seq: int, step: int, rate: int) -> SentRow:
    sent_ns = round(e.sent_ms * NS_PER_MS)
    answered = e.publish_ms is not None
    return SentRow(
        event_id=f"knative-{seq}",
        seq=seq,
        step=step,
        warmup=False,
        decoy=False,
        target_rate_per_s=rate,
        intended_ns=sent_ns,  # 2019 had no schedule: intended is sent
        sent_ns=sent_ns,
        ack_ns=sent_ns + round(e.publish_ms * NS_PER_MS) if e.publish_ms is not None else None,
        status=202 if answered else 0,
        error=None if answered else IMPORTED_ERROR,
        worker=0,
        payload_bytes=0,  # not recorded in 2019
    )
