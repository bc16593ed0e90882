"""The JSON documents that cross a process boundary, each typed once: run.json, summary.json and
the progress lines the sender and receiver print on stdout.

They stay plain dicts on the wire and on disk (a run written before reads the same after); the
types say which keys exist, which every writer must fill and what they hold. `problems` checks a
document against its type, and the tests run it over what real runs write. Standard library only.
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired[...] from the class
# body at definition time, and Python 3.11 cannot see it inside a string annotation (every key
# would count as required).
from typing import Any, Literal, NotRequired, TypedDict, get_type_hints, is_typeddict

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


class SenderDoc(TypedDict):
    engine: str
    max_inflight: int
    request_timeout_s: float
    drain_timeout_s: float
    workers: NotRequired[int]  # sender processes; above 1 a Locust fleet (loadgen.fleet)
    summary: dict[str, Any]  # the sender's `done` line (SenderDone), {} if it never finished


class ReceiverDoc(TypedDict):
    engine: str
    stats: dict[str, Any]  # the receiver's final counters (receivers.server.ReceiverStats)


class OffsetDoc(TypedDict):
    """contract.clocks.OffsetEstimate: the receiver's clock minus the sender's."""

    at_ns: int
    offset_ns: int
    bound_ns: int
    exchanges: int
    kept: int
    min_delay_ns: int


class SenderClock(TypedDict):
    """A sender's offsets to the receiver's clock (`--clock-url`), before and after its run;
    None where it could not be measured, and why in `errors`."""

    url: str
    before: OffsetDoc | None
    after: OffsetDoc | None
    errors: list[str]


class ClockDoc(TypedDict):
    """How sender and receiver stamps relate; `senders` holds each worker's measured offsets
    (contract.clocks), which the analysis uses to correct end-to-end latency."""

    sender_receiver_same_host: bool
    offset_ns: int
    source: str
    senders: NotRequired[dict[str, SenderClock]]  # by worker index
    receiver_shift_ns: NotRequired[int]  # the receiver's --clock-shift (a simulated skew)


class SearchProbeDoc(TypedDict):
    """One probe of `evbench search`: a step of the run, with the verdict the search acted on."""

    step: int
    rate_per_s: int
    hold_s: int
    confirm: bool  # the long hold that confirms an answer
    start_ns: int
    verdict: str  # holds | breaks | sender-limited (analysis.verdicts)
    reasons: list[str]
    e2e_p99_ms: float | None  # exact, from the probe's records
    sender_ratio: float
    restarted: NotRequired[str | None]  # why the system started afresh before it (None: warm)


class SearchResultDoc(TypedDict):
    """What the search found (evbench.searchplan.Result)."""

    max_sustainable_per_s: int | None  # None: nothing confirmed, or the instrument was the limit
    highest_hold_per_s: int | None
    lowest_break_per_s: int | None
    why: str
    symptom: list[str]  # the lowest break's reasons
    workers_needed: int | None  # when the sender was the limit
    probes: int


class SearchDoc(TypedDict):
    """run.json's `search` (and summary.json's, as found): how `evbench search` probed."""

    plan: dict[str, Any]  # evbench.searchplan.SearchPlan
    fresh: bool  # the system restarted before every probe
    settle_s: float | None  # quiet time between warm probes
    workers: NotRequired[int]
    objective: dict[str, Any]  # evbench.probejudge.Objective
    probes: list[SearchProbeDoc]
    result: SearchResultDoc | None  # None: interrupted or failed
    minutes: float


class RunDoc(TypedDict):
    """run.json: everything that shaped a run (DESIGN §3). Written by `evbench run` (at the
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
    sut_settings: NotRequired[dict[str, Any]]  # the driver's describe(): topology, settings, ...
    decoy_every: NotRequired[int]
    interrupted: NotRequired[bool]
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
    # `evbench search`: its plan, every probe with its verdict, and the result
    search: NotRequired[SearchDoc]
    # `evbench import-knative`
    imported_from: NotRequired[str]
    notes: NotRequired[str]
    unpaired_delivery_samples: NotRequired[int]
    imported_at_ns: NotRequired[int]


def schedule_start_ns(run: RunDoc | dict) -> int | None:
    return (run.get("schedule") or {}).get("start_ns")


def sender_summary(run: RunDoc | dict) -> dict[str, Any]:
    return (run.get("sender") or {}).get("summary") or {}


def receiver_stats(run: RunDoc | dict) -> dict[str, Any]:
    return (run.get("receiver") or {}).get("stats") or {}


# summary.json --------------------------------------------------------------------------------
class TailDoc(TypedDict):
    """Latency tail figures in ms (analysis.digests.tail_figures)."""

    p50: float | None
    p99: float | None
    p999: float | None
    p9999: float | None
    max: float | None
    n: int
    p9999_is_max: bool
    exact: list[str]


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


class StepSummaryDoc(TypedDict):
    step: int
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
    p99_e2e_ms: float | None
    p9999_e2e_ms: float | None
    e2e_n: int
    p9999_is_max: bool
    e2e_rise_ms: float | None
    verdict: str
    reasons: list[str]


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
    search: NotRequired[SearchDoc]  # `evbench search`: run.json's search, as found


# progress lines (JSON, one per line on stdout) ---------------------------------------------
class SenderStart(TypedDict):
    event: Literal["start"]
    pid: int
    start_ns: int
    run_tag: str
    pace: str
    spec: str
    max_inflight: int
    steps: list[dict[str, Any]]  # loadgen.schedule.PlannedStep as a dict
    clock: NotRequired[SenderClock]  # with --clock-url: "before" measured
    # a fleet (loadgen.fleet.tally): how many workers, and each one's clock by index
    workers: NotRequired[int]
    clocks: NotRequired[dict[str, SenderClock]]


class StepStart(TypedDict):
    event: Literal["step_start"]
    step: int
    warmup: bool
    target_rate_per_s: int
    duration_s: int
    start_ns: int


class SenderProgress(TypedDict):
    event: Literal["progress"]
    step: int
    target_rate_per_s: int
    window_sent: int
    lag_p99_ms: float | None
    sent: int
    ok: int
    failures: int
    inflight: int
    inflight_cap_hits: int
    rows_written: int
    # a fleet: its slowest worker by lag p99 (whose figure lag_p99_ms is), and the failed ones
    workers_reporting: NotRequired[int]
    slowest_worker: NotRequired[int | None]
    failed_workers: NotRequired[dict[str, str]]


class SenderAnswers(TypedDict):
    """With --latency-histograms, every second and at the end: the answers since the last such
    line by whole ms from their intended time, and the failures by error (a fleet worker feeds
    Locust's statistics from them)."""

    event: Literal["answers"]
    step: int  # the step under way (or the last one) when the line was printed
    latency_ms_counts: dict[str, int]
    errors: dict[str, int]


class SenderStepSummary(TypedDict):
    """One step as the sender saw it (loadgen.engine.StepState.summary)."""

    step: int
    warmup: bool
    target_rate_per_s: int
    duration_s: int
    worker_target_rate_per_s: float
    scheduled: int
    sent: int
    ok: int
    failures: int
    inflight_cap_hits: int
    achieved_send_rate_per_s: float
    lag_p50_ms: float | None
    lag_p99_ms: float | None
    lag_max_ms: float | None
    wake_jitter_p99_ms: float | None
    wake_jitter_max_ms: float | None
    gc_ms: float | None
    gc_collected: int | None


class TransportStats(TypedDict, total=False):
    """What the transport adds to `step_end` and `done` (HTTP or Kafka keys)."""

    connections_open: int
    connections_opened: int
    connect_ms_p99: float | None
    connect_failures: int
    connection_waits: int
    producer_queue_full: int
    producer_poll_yields: int


class StepEnd(SenderStepSummary, TransportStats):
    event: Literal["step_end"]
    inflight_at_step_end: int
    workers_reported: NotRequired[int]  # a fleet: workers whose step this sums
    failed_workers: NotRequired[dict[str, str]]  # a fleet: index -> why it failed


class SenderDone(TransportStats):
    """The sender's last line (loadgen.engine.Engine.summary, plus its run tag and wall time);
    run.json keeps it as sender.summary."""

    event: Literal["done"]
    start_ns: int
    worker: int
    workers: int
    interrupted: bool
    stop_reason: str | None
    steps: list[SenderStepSummary]
    sent: int
    ok: int
    failures: int
    inflight_cap_hits: int
    unanswered_at_end: int
    timed_out: int
    precise_timer: bool | None
    rows_written: int
    parts_written: int
    flush_errors: int
    run_tag: str
    wall_s: float
    clock: NotRequired[SenderClock]  # with --clock-url
    clocks: NotRequired[dict[str, SenderClock]]  # a fleet: each worker's, by index
    failed_workers: NotRequired[dict[str, str]]  # a fleet: index -> why it failed


class Listening(TypedDict):
    """A receiver's or a SUT component's first line, once its socket is bound."""

    event: Literal["listening"]
    host: NotRequired[str]
    port: int
    out: NotRequired[str]  # the receiver: where its records go
    limits: NotRequired[dict[str, Any]]  # the receiver: receivers.limits.Limits
    clock_shift_ns: NotRequired[int]  # the receiver: added to every stamp (--clock-shift)


class Stopped(TypedDict):
    """The last line of a receiver or SUT component: its final counters."""

    event: Literal["stopped"]
    stats: dict[str, Any]


def problems(doc: object, doc_type: type, where: str = "") -> list[str]:
    """What keeps `doc` from being a `doc_type` (a TypedDict): missing or unknown keys, and the
    same for nested TypedDicts and lists of them. Empty when it conforms. Values' own types are
    left to the writers' type hints; this catches the drift of keys between writer and type."""
    where = where or doc_type.__name__
    if not isinstance(doc, dict):
        return [f"{where}: expected an object, got {type(doc).__name__}"]
    found = []
    hints = get_type_hints(doc_type)
    missing = sorted(doc_type.__required_keys__ - doc.keys())
    unknown = sorted(doc.keys() - hints.keys())
    found += [f"{where}: missing key '{key}'" for key in missing]
    found += [f"{where}: unknown key '{key}'" for key in unknown]
    for key, hint in hints.items():
        if key not in doc or doc[key] is None:
            continue
        inner = _typed_dict_in(hint)
        if inner is None:
            continue
        value, label = doc[key], f"{where}.{key}"
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
                found.append(f"{label}: expected a {container.__name__}")
                continue
            for index, item in items:
                found += problems(item, item_type, f"{label}[{index!r}]")
        else:
            found += problems(value, inner, label)
    return found


def _typed_dict_in(hint: Any) -> type | tuple[type, type] | None:
    """The TypedDict a hint holds: itself, `X | None`, `list[X]` or `dict[str, X]`."""
    if is_typeddict(hint):
        return hint
    origin = getattr(hint, "__origin__", None)
    args = getattr(hint, "__args__", ())
    if origin in (list, dict) and args and is_typeddict(args[-1]):
        return origin, args[-1]
    for arg in args:  # a union such as `X | None` (NotRequired is unwrapped by get_type_hints)
        if is_typeddict(arg):
            return arg
    return None
