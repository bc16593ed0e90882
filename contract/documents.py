"""The JSON documents a run writes, each typed once: run.json and summary.json (the lines child
processes print are in contract.lines).

They stay plain dicts on disk (a run written before reads the same after); the types say which
keys exist, which every writer must fill and what they hold. `read_document` reads one into its
type, `problems` checks a document against its type, and the tests run it over what real runs
write. Standard library only.
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired[...] from the class
# body at definition time, and Python 3.11 cannot see it inside a string annotation (every key
# would count as required).
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, TypeVar, cast, get_type_hints, is_typeddict

from contract.errors import EvbenchError
from contract.fanout import SubscriberDoc
from contract.faults import FaultDoc
from contract.insight import ProfileDoc, ScrapeDoc
from contract.lines import SenderClock, renamed_keys
from contract.receiverlines import ReceiverStats
from contract.searchdocs import SearchDoc, SearchSenderSummary
from contract.senderlines import SenderDone

RunStatus = Literal["running", "completed", "interrupted", "failed"]


# run.json ------------------------------------------------------------------------------------
class PaceStepDoc(TypedDict):
    rate_per_s: int
    duration_s: int


class PaceDoc(TypedDict):
    name: str
    spec: str
    steps: list[PaceStepDoc]
    duration_s: NotRequired[int]
    events: NotRequired[int]


class ScheduleDoc(TypedDict):
    start_ns: int | None  # slot 0 of the schedule; analysis falls back to the earliest slot
    step_gap_s: float | None  # None for imported 2019 runs, which had no schedule
    warmup: NotRequired[str | None]


class NotReported(TypedDict):
    """{}: what was not reported (a sender that never finished, a receiver never asked)."""


class SenderDoc(TypedDict):
    engine: str
    max_inflight: int
    request_timeout_s: float
    drain_timeout_s: float
    workers: NotRequired[int]  # sender processes; above 1 a Locust fleet (loadgen.fleet)
    summary: SenderDone | SearchSenderSummary | NotReported  # {} if it never finished


class ReceiverDoc(TypedDict):
    engine: str
    stats: ReceiverStats | NotReported  # its final counters
    url: NotRequired[str]  # where the system was to deliver (its base URL)


class ClockDoc(TypedDict):
    """How sender and receiver stamps relate; `senders` holds each worker's measured offsets
    (runtime.clocks), which the analysis uses to correct end-to-end latency."""

    sender_receiver_same_host: bool
    offset_ns: int
    source: str
    senders: NotRequired[dict[str, SenderClock]]  # by worker index
    receiver_shift_ns: NotRequired[int]  # the receiver's --clock-shift (a simulated skew)


class KafkaDescription(TypedDict):
    bootstrap: str | None
    broker: str  # Tansu's binary, fresh for the run, or "given with --kafka-bootstrap"
    topic: str | None
    group: str | None


class ComponentDescription(TypedDict):
    url: str
    pid: int


class ConsumerLagDescription(TypedDict):
    interval_s: float
    last_total: int | None  # the last sample's lag over every partition
    sample_errors: int


class SutDescription(TypedDict, total=False):
    """run.json's `sut_settings`: what suts.driver.Sut.describe() says of the system (the lab's
    settings, its Kafka topic, its processes, their readiness and final counters), and whether
    one of its processes died during the run. `evbench collect` writes topology and settings
    only."""

    topology: str
    settings: dict[str, object]  # suts.settings.LabSettings as a dict, where they shape results
    kafka: KafkaDescription
    components: dict[str, ComponentDescription]  # by role
    readiness: dict[str, object]  # each role's /ready answer, and the wait as `waited_s`
    final_stats: dict[str, dict[str, int]]  # each role's stopped line's counters
    died: list[str]  # the roles whose processes exited during the run
    consumer_lag: ConsumerLagDescription  # a system on a topic: how its lag was sampled
    subscribers: list[SubscriberDoc]  # a fan-out's, in order (contract.fanout); else absent


class SutDeathDoc(TypedDict):
    """A process of the system (or its broker) that exited while it should have been running:
    written by the session's watch (evbench.session), read by the analysis, which judges the
    steps from then on by the crash, never as the system's capacity."""

    role: str  # dispatcher, ingress, kafka (the lab's broker), ...
    noticed_ns: int  # when the watch saw it gone (it died at most one watch interval before)
    exit_code: int | None  # None: unknown (not a child of this evbench)


class RecordsOnDiskDoc(TypedDict):
    """What the run's record files hold as it ended, counted from their footers: the account
    that a killed sender's or a cut probe's summary cannot give."""

    sent_rows: int
    sent_files: int
    received_rows: int
    received_files: int


class RepeatDoc(TypedDict):
    """`evbench run --repeat N`: which of the N runs of the whole pace this system's is."""

    index: int  # 1 .. of
    of: int


class RunDoc(TypedDict):
    """run.json: everything that shaped a run (docs/design.md §3). Written by `evbench run` (at the
    schedule start with status "running", again at the end) and by `evbench import-knative`.
    The type is what today's writers write; the analysis reads older documents that lack keys
    (a run.json from before `schedule` existed still analyses)."""

    version: int
    run_id: str
    sut: str
    status: RunStatus
    pace: PaceDoc
    schedule: ScheduleDoc
    payload_bytes: int | None
    # `evbench run`
    sut_settings: NotRequired[SutDescription]
    sut_deaths: NotRequired[list[SutDeathDoc]]  # across restarts (a search's), in time order
    faults: NotRequired[list[FaultDoc]]  # --fault, --fault-exec: what was done, and when
    repeat: NotRequired[RepeatDoc]  # --repeat N, N > 1
    objectives: NotRequired[list[str]]  # --slo's terms, judged again by a re-analysis
    decoy_every: NotRequired[int]
    interrupted: NotRequired[bool]
    reason: NotRequired[str]  # why it ended as it did, when nothing else in it says
    records: NotRequired[RecordsOnDiskDoc]  # the final copy's count of the files on disk
    instrument_failures: NotRequired[list[str]]
    sender: NotRequired[SenderDoc]
    receiver: NotRequired[ReceiverDoc]
    grace: NotRequired[dict[str, Any]]
    hosts: NotRequired[dict[str, str]]
    clock: NotRequired[ClockDoc]
    peak_rss_bytes: NotRequired[dict[str, int]]
    versions: NotRequired[dict[str, str]]
    platform: NotRequired[dict[str, Any]]
    command: NotRequired[list[str]]
    started_ns: NotRequired[int]
    ended_ns: NotRequired[int]
    # what was seen inside the system: Prometheus endpoints scraped, profiles taken
    scrapes: NotRequired[list[ScrapeDoc]]
    profiles: NotRequired[list[ProfileDoc]]
    # `evbench search`: its plan, every probe with its verdict, and the result
    search: NotRequired[SearchDoc]
    # `evbench import-knative`
    imported_from: NotRequired[str]
    notes: NotRequired[str]
    unpaired_delivery_samples: NotRequired[int]
    imported_at_ns: NotRequired[int]


# Readers of any run.json, older ones included: what is missing reads as None or {}.
def schedule_start_ns(run: Mapping[str, Any]) -> int | None:
    start: int | None = (run.get("schedule") or {}).get("start_ns")
    return start


def sender_summary(run: Mapping[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = (run.get("sender") or {}).get("summary") or {}
    return summary


def receiver_stats(run: Mapping[str, Any]) -> dict[str, Any]:
    stats: dict[str, Any] = (run.get("receiver") or {}).get("stats") or {}
    return stats


# reading --------------------------------------------------------------------------------------
Doc = TypeVar("Doc")


def parse_receiver_stats(doc: object, where: str = "the receiver's counters") -> ReceiverStats:
    """The receiver's counters (its GET /stats, its stopped line's, run.json's receiver.stats)
    as their type; an EvbenchError names what is missing."""
    if not isinstance(doc, Mapping):
        raise EvbenchError(f"{where}: not a JSON object")
    if missing := sorted(ReceiverStats.__required_keys__ - doc.keys()):
        raise EvbenchError(f"{where} without {', '.join(missing)}")
    return cast(ReceiverStats, dict(doc))


def read_document(path: Path, doc_type: type[Doc]) -> Doc:
    """The JSON object in `path` as a `doc_type` (RunDoc, SummaryDoc, ...). Keys renamed since
    it was written read by today's names; keys it lacks are left to the reader (an older
    run.json still reads). An EvbenchError names the file when it cannot be read or holds no
    JSON object."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise EvbenchError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise EvbenchError(f"{path} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise EvbenchError(f"{path} holds a JSON {type(doc).__name__}, not an object")
    return cast(Doc, renamed_keys(doc))


def problems(doc: object, doc_type: type, where: str = "") -> list[str]:
    """What keeps `doc` from being a `doc_type` (a TypedDict): missing or unknown keys, and the
    same for nested TypedDicts and lists of them (of a union of TypedDicts, the closest one).
    Empty when it conforms. Values' own types are left to the writers' type hints; this catches
    the drift of keys between writer and type."""
    where = where or doc_type.__name__
    if not isinstance(doc, dict):
        return [f"{where}: expected an object, got {type(doc).__name__}"]
    found = []
    hints = get_type_hints(doc_type)
    required: frozenset[str] = vars(doc_type)["__required_keys__"]
    missing = sorted(required - doc.keys())
    unknown = sorted(doc.keys() - hints.keys())
    found += [f"{where}: missing key '{key}'" for key in missing]
    found += [f"{where}: unknown key '{key}'" for key in unknown]
    for key, hint in hints.items():
        if key in doc and doc[key] is not None:
            found += _nested_problems(doc[key], hint, f"{where}.{key}")
    return found


def _nested_problems(value: object, hint: object, label: str) -> list[str]:
    inner = _typed_dict_in(hint)
    if isinstance(inner, tuple):  # list[SomeDoc] or dict[str, SomeDoc]
        container, item_type = inner
        items = (
            enumerate(value)
            if container is list and isinstance(value, list)
            else value.items()
            if container is dict and isinstance(value, dict)
            else None
        )
        if items is None:
            return [f"{label}: expected a {container.__name__}"]
        return [
            p for index, item in items for p in problems(item, item_type, f"{label}[{index!r}]")
        ]
    if inner:  # the alternative it comes closest to
        return min((problems(value, alternative, label) for alternative in inner), key=len)
    return []


def _typed_dict_in(hint: object) -> list[type] | tuple[type, type]:
    """The TypedDicts a hint holds: itself or a union's (`X | None`, `X | Y`), or the container
    and item of `list[X]` or `dict[str, X]`."""
    if is_typeddict(hint):
        return [cast(type, hint)]
    origin = getattr(hint, "__origin__", None)
    args: tuple[object, ...] = getattr(hint, "__args__", ())
    if origin in (list, dict) and args and is_typeddict(args[-1]):
        return cast(type, origin), cast(type, args[-1])
    # a union (NotRequired is unwrapped by get_type_hints)
    return [cast(type, arg) for arg in args if is_typeddict(arg)]
