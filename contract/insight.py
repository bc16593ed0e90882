"""What a run saw inside the system (docs/design.md §5, "Looking inside the system"), as run.json
records it: the Prometheus endpoints it scraped and the profiles it took. The samples themselves
are records (contract.records.METRIC_SAMPLE_FIELDS, under samples/metrics/); profiles are files
under profiles/step-<N>/ (contract.layout.SutDir.step_profiles), stored as they came.

Written by evbench.scrape and evbench.profiles, read by the analysis' report."""

# No `from __future__ import annotations`: TypedDict reads NotRequired[...] at definition time.
from typing import Literal, NotRequired, TypedDict

# eventing-kafka's consumed count per partition (seeds 003, 004): exposed as a gauge, as Knative
# does, though it only ever grows; the lab's Kafka dispatcher serves it under this name and the
# report plots it as the per-second rate it is read for.
CONSUMED_METRIC = "eventing_kafka_consumed_msg_count"
GAUGES_THAT_COUNT = frozenset({CONSUMED_METRIC})

# The scraper's own series per scrape, beside the endpoint's samples (as Prometheus adds them).
UP_METRIC = "up"
SCRAPE_DURATION_METRIC = "scrape_duration_seconds"


class ScrapeDoc(TypedDict):
    """One endpoint scraped during the run: how the scraping went."""

    name: str  # --scrape NAME=URL, or the lab component's role
    url: str
    interval_s: float
    origin: Literal["user", "lab"]  # --scrape, or the lab's own
    scrapes: int  # attempts
    failures: int  # no answer in time, an HTTP error, or a body the parser refused
    samples: int  # rows written (the endpoint's samples, the scraper's own not counted)
    slowest_s: float  # the longest an attempt took
    # The first and the last failure, as said (None when every scrape answered).
    first_error: str | None
    last_error: str | None


ProfileKind = Literal["py-spy", "pprof-cpu", "pprof-heap"]


class ProfileDoc(TypedDict):
    """One profile taken during a step."""

    step: int
    kind: ProfileKind
    target: str  # the lab process's role, or the --pprof NAME
    started_ns: int
    duration_s: float  # what was asked (a heap profile is a snapshot: 0)
    wall_s: float  # what taking it cost in time, start to file written
    # Paths relative to the system's directory (the SUT dir); empty when it failed.
    files: list[str]
    error: str | None
    pid: NotRequired[int]  # py-spy: the process profiled
    samples: NotRequired[int]  # py-spy: stacks sampled
    # py-spy: the CPU seconds it used itself (read every 0.2 s while it ran: a lower bound),
    # taken from the cores the lab's processes run on
    profiler_cpu_s: NotRequired[float]
    url: NotRequired[str]  # pprof: what was fetched
    open_with: NotRequired[str]  # the command that opens it, e.g. `go tool pprof -http=: F`
