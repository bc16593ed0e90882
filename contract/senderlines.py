"""The lines the sender (python -m loadgen) and a fleet's master (python -m loadgen.fleet
master) print, and the sender's summary and record files, each typed once (contract.lines).
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired[...] from the class
# body at definition time, and Python 3.11 cannot see it inside a string annotation.
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, cast, get_args

from contract.lines import (
    OutputLine,
    SenderClock,
    WarningLine,
    by_event,
    checked,
    parse_line,
)


# the sender (python -m loadgen) and a fleet's master (python -m loadgen.fleet master) -------
class PlannedStepDoc(TypedDict):  # loadgen.schedule.PlannedStep as a dict
    number: int
    rate_per_s: int
    duration_s: int
    warmup: bool
    start_offset_ns: int
    first_seq: int


class SenderStart(TypedDict):
    event: Literal["start"]
    pid: int
    start_ns: int
    run_tag: str
    pace: str
    spec: str
    max_inflight: int
    steps: list[PlannedStepDoc]
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
    inflight_cap_refused: int
    rows_written: int
    # the step's failures so far by cause (runtime.failcause); absent from older senders
    failures_by_cause: NotRequired[dict[str, int]]
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


# A step's summary in three parts, by how a fleet combines its workers' (loadgen.fleet.tally):
class StepIdentity(TypedDict):
    """The same for every worker of a fleet: the first one's stands."""

    step: int
    warmup: bool
    target_rate_per_s: int
    duration_s: int
    worker_target_rate_per_s: float


class StepCounts(TypedDict):
    """Counts: a fleet's are its workers' summed."""

    scheduled: int
    sent: int
    ok: int
    failures: int
    inflight_cap_refused: int  # slots refused by the in-flight cap (also counted in failures)
    gc_collected: int | None
    failures_by_cause: NotRequired[dict[str, int]]  # runtime.failcause; absent: older senders


class StepTimings(TypedDict):
    """Quantiles and times: a fleet's are its slowest worker's (an upper bound)."""

    lag_p50_ms: float | None  # quantiles: nearest rank, within 0.39 % (loadgen.loghist)
    lag_p99_ms: float | None
    lag_max_ms: float | None  # maxima: exact
    wake_jitter_p99_ms: float | None
    wake_jitter_max_ms: float | None
    gc_ms: float | None  # the collection after the step; below, the longest in it
    gc_step_max_ms: NotRequired[float | None]


class SenderStepSummary(StepIdentity, StepCounts, StepTimings):
    """One step as a sender saw it (loadgen.stepstate); achieved rate: its share x workers."""

    achieved_send_rate_per_s: float


class TransportStats(TypedDict, total=False):
    """HTTP or Kafka keys of `step_end`, `done`: a fleet sums counts, takes the slowest quantile."""

    connections_open: int
    connections_opened: int
    connections_peak: int  # HTTP: most open at once in the run; a fleet's sum bounds its own
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


class SenderCounts(TypedDict):
    """The run's counts in the done line: a fleet's are its workers' summed."""

    sent: int
    ok: int
    failures: int
    inflight_cap_refused: int
    unanswered_at_end: int
    timed_out: int
    rows_written: int
    parts_written: int
    flush_errors: int
    failures_by_cause: NotRequired[dict[str, int]]  # runtime.failcause; absent: older senders
    # Rows the last flush could not write either (a full disk): lost, so the sender failed
    # (exit 1). Absent when none, and from older senders.
    unwritten_rows: NotRequired[int]


class EngineSummary(SenderCounts, TransportStats):
    """What the engine reports at its end (loadgen.engine.Engine.summary)."""

    start_ns: int | None  # None only in a fleet whose every worker failed before it started
    worker: int
    workers: int
    interrupted: bool
    stop_reason: str | None
    steps: list[SenderStepSummary]
    precise_timer: bool | None
    records_error: NotRequired[str]  # with unwritten_rows: the last write's error


class SenderSummary(EngineSummary):
    """The engine's summary with the sender's run tag and wall time: the done line without its
    `event` (what a sender writes beside its records, and a fleet makes of its workers')."""

    run_tag: str | None  # None only as start_ns is
    wall_s: float
    clock: NotRequired[SenderClock]  # with --clock-url
    clocks: NotRequired[dict[str, SenderClock]]  # a fleet: each worker's, by index
    failed_workers: NotRequired[dict[str, str]]  # a fleet: index -> why it failed


class SenderDone(SenderSummary):
    """The sender's last line; run.json keeps it as sender.summary."""

    event: Literal["done"]


class SenderRecord(SenderSummary):
    """`_sender-w<i>.json` beside a sender's records: its summary, where it ran and its
    settings as argv, for `evbench collect` to rebuild run.json from the records alone."""

    host: str
    argv: list[str]


class Draining(TypedDict):
    """After the last slot, when answers are slow to come: how many, and how long it waits."""

    event: Literal["draining"]
    inflight: int
    timeout_s: float


class FleetListening(TypedDict):  # a fleet master's first line: where its workers connect
    event: Literal["fleet_listening"]
    host: str
    port: int


class FleetWorker(TypedDict):
    """A fleet master's line once a worker started its sender: where it runs."""

    event: Literal["fleet_worker"]
    index: int
    pid: int
    host: str


class FleetError(TypedDict):  # a fleet master that could not start (workers did not connect)
    event: Literal["error"]
    message: str


SenderLine: TypeAlias = (
    SenderStart
    | StepStart
    | SenderProgress
    | SenderAnswers
    | StepEnd
    | SenderDone
    | Draining
    | WarningLine
    | OutputLine
    | FleetListening
    | FleetWorker
    | FleetError
)


_SENDER_KINDS = by_event(*get_args(SenderLine))


def parse_sender_line(doc: Mapping[str, Any]) -> SenderLine | None:
    """A sender's (or a fleet master's) line as its type; None for an unknown event."""
    return cast(SenderLine | None, parse_line(doc, _SENDER_KINDS, "the sender"))


def parse_sender_record(doc: Mapping[str, Any], where: str = "a sender record") -> SenderRecord:
    """A `_sender-w<i>.json` as its type (an older one's renamed keys read as today's)."""
    return cast(SenderRecord, checked(doc, SenderRecord, where))


def parse_sender_summary(doc: Mapping[str, Any], where: str = "a sender summary") -> SenderSummary:
    """A sender's summary (a done line, a `_sender-w<i>.json`) as its type, other keys left in."""
    return cast(SenderSummary, checked(doc, SenderSummary, where))
