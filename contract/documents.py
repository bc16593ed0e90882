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
from contract.fanout import SubscriberDoc, SubscriberSummaryDoc
from contract.faults import FaultDoc
from contract.figures import IntervalDoc, ObjectiveDoc, ObjectivesFrom, SpectrumPointDoc, TailDoc
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


# summary.json --------------------------------------------------------------------------------
class CountsDoc(TypedDict):
    sent: int
    scheduled: int
    send_failures: int
    acked: int
    received: int
    lost: int
    duplicates: int
    foreign: int
    decoys: int
    filtered: int
    leaked: int


class DriftDoc(TypedDict):
    """A long step's drift (analysis.drift): the trend of its e2e P50 and P99 per window."""

    window_s: int
    windows: int
    ms_per_h: dict[str, float]  # p50, p99: the fitted slopes, per hour
    rise_ms: dict[str, float]  # p50, p99: fitted over the windows' span (negative: it fell)
    allowed_rise_ms: dict[str, float]  # p50, p99: what a stable step may rise
    verdict: str  # stable | drifting
    text: str  # "e2e P50 rose 10.1 ms per hour (2.04 -> 12.1 ms), ...: drifting"


class StepSummaryDoc(TypedDict):
    step: int
class HostLoadDoc(TypedDict):
    """The host's load over a step (analysis.hostload.HostLoad): shares of all its CPUs."""

    cpus: int
    busy_ratio: float
    others_ratio: float  # busy, less the run's own processes
    steal_ratio: float
    samples: int


    target_rate_per_s: int
    duration_s: int
    scheduled: int
    achieved_send_rate_per_s: float
    delivered_rate_per_s: float
    send_failures: int
    inflight_cap_refused: int
    lost: int
    duplicates: int
    filtered: int
    leaked: int
    sender_lag_p99_ms: float | None
    # absent in summaries analysed before `compare` called each step's P50
    p50_e2e_ms: NotRequired[float | None]
    p99_e2e_ms: float | None
    p9999_e2e_ms: float | None
    e2e_n: int
    p9999_is_max: bool
    # Which of the step's e2e tail figures are exact order statistics, and for the others
    # their rank-error bound (TailDoc's); absent in summaries from before they were said.
    e2e_exact: NotRequired[list[str]]
    e2e_rank_error: NotRequired[dict[str, float]]
    e2e_ci95: NotRequired[dict[str, IntervalDoc]]  # the e2e P99's and P99.99's (TailDoc's)
    e2e_rise_ms: float | None
    verdict: str
    reasons: list[str]
    # A step cut short (the run interrupted, the sender killed): the seconds its slots cover,
    # over which its rates are judged; absent for a step that ran its whole duration.
    ran_s: NotRequired[float]
    drift: NotRequired[DriftDoc | None]  # null: a step too short (absent: an older summary)


    host: NotRequired[HostLoadDoc | None]  # null: no host samples over it
class WorkerClockDoc(TypedDict):
    offset_ns: int  # the receiver's clock minus the worker's, before the run
    bound_ns: int  # the correction is right within ± this
    drift_ns: int  # how much the offset moved from before the run to after
    applied: bool


class ClockSummaryDoc(TypedDict):
    """What the analysis did about the sender's and receiver's clocks (`--clock-correction`)."""

    correction: str  # auto | on | off
    applied: bool
    note: str
    workers: dict[str, WorkerClockDoc]  # by worker index
    negative_e2e: int  # events received before they were due: a clock disagreement, counted


class DeathSummaryDoc(TypedDict):
    """A death as the summary tells it: when (seconds from the schedule start), in which step,
    and what was lost from that step on."""

    role: str
    at_s: float | None  # None: the schedule start is unknown
    step: int | None  # the step it died in (or after): None before the first or without steps
    lost_after: int


class FaultSummaryDoc(TypedDict):
    """A fault as the summary tells it (analysis.faultsteps): when it was done and its target
    back (seconds from the schedule start), and what its step lost."""

    spec: str
    step: int
    action: str
    target: str
    at_s: float | None  # None: not done (the run ended first), or the start unknown
    back_s: float | None
    error: str | None
    # its ledger (analysis.faultsteps, at one second's resolution): None when not done
    recovered_after_s: float | None  # None: not recovered within its step
    window_scheduled: int | None  # events due from its second to the one it recovered in
    window_send_failures: int | None
    window_lost: int | None
    # of the window's events, delivered late (analysis.steprule.LATE_AFTER_MS); summaries
    # analysed before it was counted lack it
    window_late: NotRequired[int | None]
    window_peak_e2e_p99_ms: float | None  # the highest per-second e2e P99 in the window
    band_ms: float | None  # the step's e2e P99 band before it (None: no second before)
    step_send_failures: int | None  # the whole step's: None without records of it
    step_lost: int | None
    step_duplicates: int | None
    text: str  # as the verdict says it


class SummaryDoc(TypedDict):
    """analysis/summary.json of one SUT."""

    run_id: str
    sut: str
    pace: str
    status: RunStatus | None
    verdict: str
    instrument_failures: list[str]
    schedule_start_ns: int
    schedule_start_from: str
    trim_s: float
    trimmed: str | None
    counts: CountsDoc
    latency_ms: dict[str, TailDoc]  # publish, e2e, ...
    steps: list[StepSummaryDoc]
    breaking_point_per_s: int | None
    max_sustainable_rate_per_s: int | None
    thresholds: dict[str, Any]
    clock: NotRequired[ClockSummaryDoc]  # absent in summaries written before clock offsets
    sut_deaths: NotRequired[list[DeathSummaryDoc]]  # the system's processes that died, if any
    faults: NotRequired[list[FaultSummaryDoc]]  # --fault, --fault-exec: each with its step's cost
    search: NotRequired[SearchDoc]  # `evbench search`: run.json's search, as found
    repeat: NotRequired[RepeatDoc]  # run.json's: one of N repeats of the pace
    objectives: NotRequired[list[ObjectiveDoc]]  # --slo: each met or breached
    objectives_from: NotRequired[ObjectivesFrom]  # the analysis' --slo, or the run's
    # A cool-down step that held after a break: where the system caught up (never a capacity).
    recovered_per_s: NotRequired[int | None]
    # The e2e P99 the standing-queue test compared steps with: the first clean step's; null
    # when no step was clean (each then held to the absolute bar).
    baseline_e2e_p99_ms: NotRequired[float | None]
    host_saturated_steps: NotRequired[list[int]]  # steps others saturated the host in
    spectrum: NotRequired[dict[str, dict[str, list[SpectrumPointDoc]]]]  # metric -> line -> points
    subscribers: NotRequired[list[SubscriberSummaryDoc]]  # a fan-out's, each on its own


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
