"""The JSON lines child processes print on stdout, one object a line, each typed once.

Every line has an `event` key naming its kind (a Literal: a union of line types narrows on it).
Writers build each line as its type, so the type checker holds their keys; readers parse a
child's line once where they read it (`parse_sender_line`, `parse_consumer_line`, ...) and work
on the typed union from there. The wire stays plain JSON: a line printed before reads the same
after (an older sender's `inflight_cap_hits` reads as `inflight_cap_refused`). Stdlib only.
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired[...] from the class
# body at definition time, and Python 3.11 cannot see it inside a string annotation.
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, cast, get_args, get_type_hints

from contract.errors import EvbenchError


# shared by several children ----------------------------------------------------------------
class OutputLine(TypedDict):
    """What runtime.procs.Child makes of a stdout line that is not a JSON object."""

    event: Literal["output"]
    text: str


class WarningLine(TypedDict):
    event: Literal["warning"]
    message: str


class OffsetDoc(TypedDict):  # runtime.clocks.OffsetEstimate: receiver's clock - sender's
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


class EngineSummary(SenderCounts, TransportStats):
    """What the engine reports at its end (loadgen.engine.Engine.summary)."""

    start_ns: int | None  # None only in a fleet whose every worker failed before it started
    worker: int
    workers: int
    interrupted: bool
    stop_reason: str | None
    steps: list[SenderStepSummary]
    precise_timer: bool | None


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


# the receiver (python -m receivers) and the lab's components (python -m suts) --------------
class ReceiverStats(TypedDict):
    """The receiver's counters: its GET /stats (with `buffered_bytes`, a level) and its
    stopped line; run.json keeps the last as receiver.stats."""

    received: int
    malformed: int  # 400s: not HTTP, not a CloudEvent, or an id that cannot be recorded
    invalid_ids: int  # of which: the id or an attribute was not a recordable string
    not_found: int
    refused: dict[str, int]  # status -> requests, beyond limits
    timed_out: int  # requests that stalled past their header or body timeout (408)
    idle_closed: int  # keep-alive connections closed after the idle timeout
    refused_connections: int  # over the connection cap (503)
    internal_errors: int  # 500s: a bug in the receiver, logged in one line each
    received_bytes: int
    connections: int
    open_connections: int
    rows_written: int
    parts_written: int
    quarantined: int  # rows that could not be encoded, kept in the quarantine file
    write_errors: int
    unwritten_rows: int  # rows still in memory when the receiver stopped (a failure)
    first_received_ns: int | None
    last_received_ns: int | None
    buffered_bytes: NotRequired[int]  # GET /stats only: event bytes being received now


class Listening(TypedDict):
    """A receiver's or a SUT component's first line, once its socket is bound."""

    event: Literal["listening"]
    host: NotRequired[str]
    port: int
    out: NotRequired[str]  # the receiver: where its records go
    limits: NotRequired[dict[str, float]]  # the receiver: receivers.limits.Limits
    clock_shift_ns: NotRequired[int]  # the receiver: added to every stamp (--clock-shift)


class ReceiverStopped(TypedDict):  # the receiver's last line: its final counters
    event: Literal["stopped"]
    stats: ReceiverStats


class ComponentStopped(TypedDict):
    """A lab component's last line: its counters (suts.serving.Component.stats_doc)."""

    event: Literal["stopped"]
    stats: dict[str, int]


class Assigned(TypedDict):  # a Kafka dispatcher's line when the group first gave it partitions
    event: Literal["assigned"]
    partitions: int
    after_s: float


ReceiverLine: TypeAlias = Listening | ReceiverStopped | OutputLine
ComponentLine: TypeAlias = Listening | ComponentStopped | Assigned | OutputLine


# the memory study's consumers (python -m suts.consumers) -----------------------------------
class ConsumerReady(TypedDict):
    event: Literal["ready"]
    pid: int
    client: str
    settings: dict[str, str]


class ConsumerQueue(TypedDict, total=False):  # librdkafka's fetch queue (confluent only)
    fetchq_bytes: int
    fetchq_messages: int
    replyq: int


class ConsumerProgress(ConsumerQueue):
    event: Literal["progress"]
    t_s: float
    consumed: int
    first_message_ns: int | None  # wall clock
    py_traced_bytes: NotRequired[int]  # with --tracemalloc: the Python heap
    py_peak_bytes: NotRequired[int]
    tracemalloc_overhead_bytes: NotRequired[int]


class ConsumerTrimmed(TypedDict):
    event: Literal["trimmed"]
    released: bool
    consumed: int


class ConsumerDone(TypedDict):
    event: Literal["done"]
    stop: str  # the signal's name
    consumed: int
    first_message_ns: int | None
    per_partition: dict[str, int]
    errors: list[str]


ConsumerLine: TypeAlias = (
    ConsumerReady | ConsumerProgress | ConsumerTrimmed | ConsumerDone | OutputLine
)


# parsing -----------------------------------------------------------------------------------
def _by_event(*kinds: type) -> dict[str, type]:
    """Each line type by its `event` Literal, read from the type itself."""
    table: dict[str, type] = {}
    for kind in kinds:
        (event,) = get_args(get_type_hints(kind)["event"])
        table[event] = kind
    return table


_SENDER_KINDS = _by_event(*get_args(SenderLine))
_RECEIVER_KINDS = _by_event(*get_args(ReceiverLine))
_COMPONENT_KINDS = _by_event(*get_args(ComponentLine))
_CONSUMER_KINDS = _by_event(*get_args(ConsumerLine))
# Keys older writers used, by their name now: a line printed before reads the same after.
_RENAMED = {"inflight_cap_hits": "inflight_cap_refused"}


def renamed_keys(doc: Mapping[str, Any]) -> dict[str, Any]:
    """`doc` with keys an older writer named otherwise under today's names, at any depth."""
    return {_RENAMED.get(key, key): _renamed_in(value) for key, value in doc.items()}


def _renamed_in(value: object) -> object:
    if isinstance(value, dict):
        return renamed_keys(value)
    if isinstance(value, list):
        return [_renamed_in(item) for item in value]
    return value


def _checked(doc: Mapping[str, Any], kind: type, what: str) -> dict[str, Any]:
    """`doc` with today's key names, once it has every key `kind` requires (an EvbenchError
    names the missing ones)."""
    line = renamed_keys(doc) if _RENAMED.keys() & doc.keys() else dict(doc)
    required: frozenset[str] = vars(kind)["__required_keys__"]
    if missing := sorted(required - line.keys()):
        raise EvbenchError(f"{what} without {', '.join(missing)}")
    return line


def _parse(doc: Mapping[str, Any], kinds: dict[str, type], who: str) -> dict[str, Any] | None:
    """`doc` checked against the line type its `event` names; None for a kind `kinds` does not
    hold."""
    kind = kinds.get(str(doc.get("event")))
    if kind is None:
        return None
    return _checked(doc, kind, f"{who} printed a '{doc['event']}' line")


def parse_sender_line(doc: Mapping[str, Any]) -> SenderLine | None:
    """A sender's (or a fleet master's) line as its type; None for an unknown event."""
    return cast(SenderLine | None, _parse(doc, _SENDER_KINDS, "the sender"))


def parse_receiver_line(doc: Mapping[str, Any]) -> ReceiverLine | None:
    """A receiver's line as its type; None for an unknown event."""
    return cast(ReceiverLine | None, _parse(doc, _RECEIVER_KINDS, "the receiver"))


def parse_component_line(doc: Mapping[str, Any]) -> ComponentLine | None:
    """A lab component's line (python -m suts) as its type; None for an unknown event."""
    return cast(ComponentLine | None, _parse(doc, _COMPONENT_KINDS, "a lab component"))


def parse_consumer_line(doc: Mapping[str, Any]) -> ConsumerLine | None:
    """A memory-study consumer's line (python -m suts.consumers) as its type; None for an
    unknown event."""
    return cast(ConsumerLine | None, _parse(doc, _CONSUMER_KINDS, "the consumer"))


def parse_sender_record(doc: Mapping[str, Any], where: str = "a sender record") -> SenderRecord:
    """A `_sender-w<i>.json` as its type (an older one's renamed keys read as today's)."""
    return cast(SenderRecord, _checked(doc, SenderRecord, where))


def parse_sender_summary(doc: Mapping[str, Any], where: str = "a sender summary") -> SenderSummary:
    """A sender's summary (a done line, a `_sender-w<i>.json`) as its type, other keys left in."""
    return cast(SenderSummary, _checked(doc, SenderSummary, where))
