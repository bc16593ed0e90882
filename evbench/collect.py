"""`evbench collect`: a run made elsewhere (senders and receivers in a cluster) brought home as
a normal run directory, which `evbench analyze` handles like a local run.

The records come over HTTP (runtime.recordshare): each receiver serves its own, each
sender's are served by `evbench serve-records` on its host. run.json is rebuilt from what the
senders left beside their records (`_sender-w<k>.json`: the summary, the settings as argv, the
host) and the receivers' final counters; nothing in it is guessed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import cast

from contract.documents import RunDoc, RunStatus, parse_receiver_stats
from contract.errors import EvbenchError
from contract.layout import SutDir
from contract.receiverlines import ReceiverStats
from contract.records import RUN_JSON_VERSION
from contract.senderlines import SenderDone, SenderRecord, parse_sender_line, parse_sender_record
from evbench.rundoc import (
    RECEIVER_ENGINE,
    clock_document,
    pace_document,
    sender_clocks,
    sender_document,
    write_run_json,
)
from loadgen.fleet.tally import merged_done
from loadgen.pace import resolve_pace
from loadgen.settings import SenderSettings, add_sender_arguments, settings_from_args
from runtime.recordshare import PeerError, fetch_all, fetch_json
from runtime.runs import new_sut_dir, next_run_id


def collect(
    senders: list[str],
    receivers: list[str],
    sut: str,
    runs_dir: Path,
    run_id: str | None,
    echo: Callable[[str], None],
) -> SutDir:
    """Fetch every sender's and receiver's records into a new SUT directory and write its
    run.json; returns the directory."""
    staging = runs_dir / f".collecting-{sut}"
    shutil.rmtree(staging, ignore_errors=True)  # what an earlier, failed collect left
    stats = _fetch_everything(senders, receivers, staging, echo)
    summaries = _summaries(staging, senders)
    settings = _settings(summaries[0]["argv"])
    pace = resolve_pace(settings.pace)
    run_id = run_id or next_run_id(runs_dir, pace.name)
    sut_dir = new_sut_dir(runs_dir, run_id, pace.name, sut)
    for records in ("sent", "received"):
        (staging / records).mkdir(parents=True, exist_ok=True)
        (staging / records).replace(sut_dir.root / records)
    staging.rmdir()
    write_run_json(sut_dir, collected_document(run_id, sut, summaries, stats, senders, receivers))
    return sut_dir


def collected_document(
    run_id: str,
    sut: str,
    summaries: list[SenderRecord],
    receiver_stats: list[ReceiverStats],
    sender_urls: list[str],
    receiver_urls: list[str],
) -> RunDoc:
    """run.json of a collected run, from the senders' summary files and the receivers' final
    counters. Pure."""
    settings = _settings(summaries[0]["argv"])
    knobs = settings.knobs
    pace = resolve_pace(settings.pace)
    summary = done_line(summaries[0]) if len(summaries) == 1 else merged_done(summaries)
    failures = []
    if failed := summary.get("failed_workers"):
        lost = "; ".join(f"worker {i}: {why}" for i, why in sorted(failed.items()))
        failures.append(f"sender fleet lost {len(failed)} of {summary['workers']} workers ({lost})")
    status: RunStatus = (
        "failed" if failures else "interrupted" if summary["interrupted"] else "completed"
    )
    sender_hosts = sorted({s.get("host", "?") for s in summaries})
    receiver_hosts = sorted({urllib.parse.urlsplit(u).hostname or "?" for u in receiver_urls})
    return {
        "version": RUN_JSON_VERSION,
        "run_id": run_id,
        "sut": sut,
        "sut_settings": {
            "topology": "collected over HTTP from senders and receivers that ran elsewhere",
            "settings": {"senders": sender_urls, "receivers": receiver_urls},
        },
        "decoy_every": knobs.decoy_every,
        "status": status,
        "interrupted": status == "interrupted",
        "instrument_failures": failures,
        "pace": pace_document(pace),
        "schedule": {
            "start_ns": summary["start_ns"],
            "step_gap_s": knobs.step_gap_s,
            "warmup": knobs.warmup,
        },
        "payload_bytes": knobs.payload_bytes,
        "sender": sender_document(knobs, summary["workers"], summary),
        "receiver": {"engine": RECEIVER_ENGINE, "stats": _summed(receiver_stats)},
        "hosts": {"sender": ", ".join(sender_hosts), "receiver": ", ".join(receiver_hosts)},
        # Whether they shared a host is not known here; the measured offsets say how far
        # their clocks disagreed, which is what the analysis uses.
        "clock": clock_document(sender_clocks(summary), 0, same_host=False),
    }


def done_line(record: SenderRecord) -> SenderDone:
    """The done line a sender printed, from the record it left beside its records (which adds
    where it ran and its settings): run.json keeps a sender's done line, as a fleet's."""
    beside = ("host", "argv")
    summary = {key: value for key, value in record.items() if key not in beside}
    line = parse_sender_line({"event": "done", **summary})
    assert line is not None and line["event"] == "done"
    return line


def _settings(argv: list[str]) -> SenderSettings:
    """A sender's settings from the argv it left beside its records; a ValueError (never an
    exit) when they do not parse."""
    parser = argparse.ArgumentParser(prog="a collected sender's settings", exit_on_error=False)
    add_sender_arguments(parser)
    try:
        return settings_from_args(parser.parse_args(argv))
    except (argparse.ArgumentError, SystemExit) as exc:  # argparse exits on some errors anyway
        raise ValueError(f"its settings {argv!r} do not parse") from exc


def _fetch_everything(
    senders: list[str], receivers: list[str], staging: Path, echo: Callable[[str], None]
) -> list[ReceiverStats]:
    """Every peer's records into `staging`, and the receivers' counters; every peer is tried,
    and a CollectError names each that failed and what is missing."""
    failures: list[str] = []
    for side, role, urls in (("sent", "sender", senders), ("received", "receiver", receivers)):
        taken: set[str] = set()  # two peers of a side must not give the same file
        for url in urls:
            try:
                echo(f"{url}: {len(fetch_all(url, staging / side, taken=taken))} files")
            except PeerError as exc:
                failures.append(f"{role} {_what_is_missing(exc)}")
    stats = []
    for url in receivers:
        try:
            stats.append(_receiver_stats(url))
        except (PeerError, EvbenchError) as exc:
            failures.append(f"receiver {exc}")
    if failures:
        kept = (
            f"what was is kept in {staging} (a new collect starts over)"
            if any(p.is_file() for p in staging.rglob("*"))
            else "nothing was fetched"
        )
        raise CollectError(
            f"not everything could be collected; {kept}:\n  " + "\n  ".join(failures)
        )
    return stats


def _summaries(staging: Path, senders: list[str]) -> list[SenderRecord]:
    """The senders' summaries (`_sender-w<k>.json`) fetched, each parsed and its settings read
    back: a peer's document that is not one is named as its failure."""
    found = []
    for path in sorted((staging / "sent").glob("_sender-w*.json")):
        try:
            record = parse_sender_record(json.loads(path.read_text()), str(path))
            # A pace this host cannot read is the peer's failure, not the user's bad input.
            resolve_pace(_settings(record["argv"]).pace)
        except (ValueError, KeyError, TypeError, EvbenchError) as exc:
            raise CollectError(f"{path}: not a sender's summary ({exc})") from None
        found.append(record)
    if not found:
        raise EvbenchError(
            f"no sender summary (_sender-w<k>.json) at {', '.join(senders)}: did the senders "
            "finish, and are their record directories what `evbench serve-records` serves?"
        )
    return found


class CollectError(Exception):
    """Some peer could not be collected from: what was fetched is kept, the rest named."""


def _what_is_missing(exc: PeerError) -> str:
    missing = exc.missing[:5] + ([f"{len(exc.missing) - 5} more"] if len(exc.missing) > 5 else [])
    fetched = f"{len(exc.fetched)} files fetched"
    return f"{exc}; {fetched}" + (f", missing: {', '.join(missing)}" if missing else "")


def _receiver_stats(url: str) -> ReceiverStats:
    found = fetch_json(url.rstrip("/") + "/stats")
    return parse_receiver_stats(found, f"the receiver's counters at {url}")


def _summed(stats: list[ReceiverStats]) -> ReceiverStats:
    """Several receivers' counters as one: counts add up, first and last stamps are the
    earliest and latest, a longest (`*_max_ms`) the longest; anything else is the first
    receiver's."""
    if len(stats) == 1:
        return stats[0]
    out: dict[str, object] = dict(stats[0])
    for key, value in stats[0].items():
        values = [v for s in stats if isinstance(v := s.get(key), int)]
        if key.startswith("first_") and values:
            out[key] = min(values)
        elif key.startswith("last_") and values:
            out[key] = max(values)
        elif key.endswith("_max_ms"):
            out[key] = max(v for s in stats if isinstance(v := s.get(key), int | float))
        elif isinstance(value, int) and not isinstance(value, bool):
            out[key] = sum(values)
    # The first receiver's keys, each holding what it held: still its counters' type.
    return cast(ReceiverStats, out)
