"""The record contract shared by sender, receiver and analysis (docs/design.md §3).

Standard library only: every other schema (Arrow/Parquet here, Spark in the analysis) is derived
from the field tuples below, so there is exactly one place where a column is named, typed and
given its unit. Times are integer nanoseconds since the Unix epoch, taken from the same wall clock
(`time.time_ns()`) in every process of a run so that sender and receiver stamps can be subtracted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

FieldType = Literal["string", "int64", "int32", "float64", "bool"]


@dataclass(frozen=True)
class Field:
    name: str
    type: FieldType
    nullable: bool
    doc: str
    # A storage hint: few distinct values, so Parquet dictionary-encodes the column. Encoding
    # unique columns (ids, timestamps) that way only costs time before falling back.
    low_cardinality: bool = False
    # Added after runs were recorded: a file without the column reads as null in it, so a run
    # recorded before still analyses (runtime.parquet.read_parts). Only a nullable field may be.
    added_later: bool = False


SENT_FIELDS: tuple[Field, ...] = (
    Field(
        "event_id",
        "string",
        False,
        "run-unique id; travels as ce-id, ce-evbenchid and in the payload",
    ),
    Field("seq", "int64", False, "slot number in the whole schedule (warmup slots included)"),
    Field("step", "int32", False, "1-based pace step; 0 = warmup", low_cardinality=True),
    Field(
        "warmup",
        "bool",
        False,
        "true for warmup events, which no metric counts",
        low_cardinality=True,
    ),
    Field(
        "decoy",
        "bool",
        False,
        "sent with DECOY_EVENT_TYPE, which a trigger filter should drop: never lost, and a "
        "delivery is a filter leak",
        low_cardinality=True,
    ),
    Field("target_rate_per_s", "int32", False, "the step's pace", low_cardinality=True),
    Field("intended_ns", "int64", False, "the schedule slot: when the event should have been sent"),
    Field("sent_ns", "int64", True, "request start; null when never sent (in-flight cap, stop)"),
    Field("ack_ns", "int64", True, "response or produce ack; null when none arrived"),
    Field(
        "status",
        "int32",
        False,
        "HTTP status (Kafka produce: 200 on ack); 0 = transport error or no answer",
        low_cardinality=True,
    ),
    Field("error", "string", True, "error text, null on success", low_cardinality=True),
    Field(
        "worker",
        "int32",
        False,
        "sender worker index (a pace can be split across workers)",
        low_cardinality=True,
    ),
    Field("payload_bytes", "int32", False, "payload size as sent", low_cardinality=True),
)

RECEIVED_FIELDS: tuple[Field, ...] = (
    Field("event_id", "string", False, "ce-evbenchid, else the id in the payload, else ce-id"),
    Field("received_ns", "int64", False, "stamped when the request's first bytes were read"),
    Field("receiver", "string", False, "name of the receiver that got it", low_cardinality=True),
    Field("payload_bytes", "int32", False, "request body size", low_cardinality=True),
    Field("ce_id", "string", True, "ce-id as delivered (intermediaries may rewrite it)"),
    Field("ce_type", "string", True, "ce-type as delivered", low_cardinality=True),
    Field("ce_source", "string", True, "ce-source as delivered", low_cardinality=True),
    Field(
        "subscriber",
        "string",
        True,
        "the path it was delivered to: a subscription's or a trigger's own (fan-out), '/' for "
        "one subscriber; null in runs recorded before fan-out (read as one subscriber)",
        low_cardinality=True,
        added_later=True,
    ),
)

PROCESS_SAMPLE_FIELDS: tuple[Field, ...] = (
    Field("t_ns", "int64", False, "when the sample was taken"),
    Field(
        "process",
        "string",
        False,
        "role in the run: sender, receiver, or a SUT process",
        low_cardinality=True,
    ),
    Field("pid", "int32", False, "process id", low_cardinality=True),
    Field("rss_bytes", "int64", False, "resident set size"),
    Field("cpu_percent", "float64", False, "CPU since the previous sample; 100 = one core"),
)

# The machine as a whole, sampled in the same tick as the processes (same `t_ns`): whether
# anything outside the run took the CPU its instruments and its system needed
# (analysis.hostload, docs/definitions.md: host saturated).
HOST_SAMPLE_FIELDS: tuple[Field, ...] = (
    Field("t_ns", "int64", False, "when the sample was taken (as the processes' in that tick)"),
    Field("cpus", "int32", False, "logical CPUs of the host", low_cardinality=True),
    Field(
        "busy_percent",
        "float64",
        False,
        "the host's CPU in use since the previous sample, every process and steal; 100 = one "
        "core, so cpus x 100 is all of it",
    ),
    Field(
        "steal_percent",
        "float64",
        False,
        "CPU a hypervisor gave to others since the previous sample (0 on bare metal); 100 = "
        "one core",
    ),
    Field(
        "evbench_percent",
        "float64",
        False,
        "the CPU of the evbench process that runs the session (its samplers, scrapes, "
        "progress); 100 = one core",
    ),
)

# A Prometheus text endpoint scraped during a run (evbench.scrape): one row per sample, as the
# endpoint exposed it, plus two of the scraper's own per scrape, as Prometheus adds them: `up`
# (1 answered and parsed, 0 not) and `scrape_duration_seconds`.
METRIC_SAMPLE_FIELDS: tuple[Field, ...] = (
    Field("t_ns", "int64", False, "when the scrape began"),
    Field(
        "endpoint", "string", False, "the endpoint's name (--scrape NAME=URL)", low_cardinality=True
    ),
    Field(
        "metric",
        "string",
        False,
        "sample name as the Prometheus parser reads it (foo_total, foo_bucket; a counter exposed "
        "without _total gets it)",
        low_cardinality=True,
    ),
    Field(
        "kind",
        "string",
        False,
        "its family's type: counter, gauge, histogram, summary, info, stateset or unknown",
        low_cardinality=True,
    ),
    Field(
        "labels",
        "string",
        False,
        'canonical `{a="x",b="y"}` (sorted), "" without labels',
        low_cardinality=True,
    ),
    Field("value", "float64", False, "the sample's value"),
)

CONSUMER_LAG_FIELDS: tuple[Field, ...] = (
    Field("t_ns", "int64", False, "when the sample was taken"),
    Field("group", "string", False, "consumer group", low_cardinality=True),
    Field("topic", "string", False, "topic", low_cardinality=True),
    Field("partition", "int32", False, "partition", low_cardinality=True),
    Field("end_offset", "int64", False, "high watermark: the offset the next record will get"),
    Field("committed_offset", "int64", True, "the group's committed offset; null before any"),
    Field("lag", "int64", False, "records not yet committed (end - committed, or end - low)"),
)

MEMORY_SAMPLE_FIELDS: tuple[Field, ...] = (
    Field("t_ns", "int64", False, "when the sample was taken"),
    Field("process", "string", False, "consumer or broker", low_cardinality=True),
    Field("pid", "int32", False, "process id", low_cardinality=True),
    Field("rss_bytes", "int64", False, "resident set size (what kubectl top reports)"),
    Field("uss_bytes", "int64", True, "unique set size: pages only this process holds"),
    Field("rss_anon_bytes", "int64", True, "anonymous resident memory (/proc RssAnon): heaps"),
    Field("hwm_bytes", "int64", True, "the kernel's peak RSS so far (/proc VmHWM)"),
    Field("consumed", "int64", True, "messages the consumer had consumed (its last report)"),
    Field("py_traced_bytes", "int64", True, "Python heap (tracemalloc), Python clients only"),
    Field("fetchq_bytes", "int64", True, "librdkafka's fetch queue (its statistics)"),
)


# One named row type per record, for code that builds rows one at a time (the 2019 import, the
# samplers, tests): a row reads as names instead of positions. Field order and types are the
# field tuples' above, and tests/contract/test_records.py holds the two equal. The sender builds
# whole columns (loadgen/recorder.py) and the receiver's hot path a plain tuple in this order.
class SentRow(NamedTuple):
    event_id: str
    seq: int
    step: int
    warmup: bool
    decoy: bool
    target_rate_per_s: int
    intended_ns: int
    sent_ns: int | None
    ack_ns: int | None
    status: int
    error: str | None
    worker: int
    payload_bytes: int


class ReceivedRow(NamedTuple):
    event_id: str
    received_ns: int
    receiver: str
    payload_bytes: int
    ce_id: str | None
    ce_type: str | None
    ce_source: str | None
    subscriber: str | None = None


class ProcessSampleRow(NamedTuple):
    t_ns: int
    process: str
    pid: int
    rss_bytes: int
    cpu_percent: float


class MemorySampleRow(NamedTuple):
    t_ns: int
    process: str
    pid: int
    rss_bytes: int
    uss_bytes: int | None
    rss_anon_bytes: int | None
    hwm_bytes: int | None
    consumed: int | None
    py_traced_bytes: int | None
    fetchq_bytes: int | None


class MetricSampleRow(NamedTuple):
    t_ns: int
    endpoint: str
    metric: str
    kind: str
    labels: str
    value: float


class HostSampleRow(NamedTuple):
    t_ns: int
    cpus: int
    busy_percent: float
    steal_percent: float
    evbench_percent: float


class ConsumerLagRow(NamedTuple):
    t_ns: int
    group: str
    topic: str
    partition: int
    end_offset: int
    committed_offset: int | None
    lag: int


ROW_TYPES: dict[type[tuple[object, ...]], tuple[Field, ...]] = {
    SentRow: SENT_FIELDS,
    ReceivedRow: RECEIVED_FIELDS,
    ProcessSampleRow: PROCESS_SAMPLE_FIELDS,
    HostSampleRow: HOST_SAMPLE_FIELDS,
    ConsumerLagRow: CONSUMER_LAG_FIELDS,
    MetricSampleRow: METRIC_SAMPLE_FIELDS,
    MemorySampleRow: MEMORY_SAMPLE_FIELDS,
}

# Every event this suite sends carries its id three ways (docs/design.md §3): intermediaries such
# as a KafkaSource rewrite ce-id, so the extension attribute and the payload carry it too.
EVENT_ID_HEADER = "ce-evbenchid"
EVENT_TYPE = "dev.evbench.measure"
WARMUP_EVENT_TYPE = "dev.evbench.warmup"
# Sent now and then so a broker's trigger filter has something to drop (`--decoy-every`).
DECOY_EVENT_TYPE = "dev.evbench.decoy"
# What a Kafka produce ack is recorded as, so one `status` column serves HTTP and Kafka.
KAFKA_ACK_STATUS = 200
PAYLOAD_ID_PREFIX = b'{"evbenchid":"'


def event_id(run_tag: str, worker: int, seq: int) -> str:
    """A sent event's id: run-unique and readable (a receiver shared between runs can tell their
    events apart), and ending with `-<seq>`, its slot, which the analysis reads back
    (EVENT_ID_SEQ_PATTERN) to find a delivery's step without a join (analysis.routing)."""
    return f"{event_id_prefix(run_tag, worker)}{seq}"


def event_id_prefix(run_tag: str, worker: int) -> str:
    """What a worker's ids start with: the id is this plus the slot number in decimal."""
    return f"{run_tag}-{worker}-"


# The slot an id carries: its decimal tail after the last '-', canonical (no leading zero, at
# most 18 digits, so it fits an int64). An id without one carries none.
EVENT_ID_SEQ_PATTERN = r"-(?P<seq>0|[1-9][0-9]{0,17})$"

# `error` of a slot the sender refused because the in-flight cap was reached: the pacer handled
# it on time, so it counts against the system under test, not against the sender.
INFLIGHT_CAP_ERROR = "in-flight cap reached"

RUN_JSON_VERSION = 1
