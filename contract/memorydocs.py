"""The documents of `evbench memory` (seeds 000/001): each scenario's scenario.json and the run's
memory.json, written by evbench.memory and read by the analysis (analysis.memory_job). Standard
library only, like the rest of the floor."""

# No `from __future__ import annotations`: TypedDict reads NotRequired[...] at definition time.
from typing import Any, NotRequired, TypedDict

from contract.insight import ScrapeDoc


class PartitionLagDoc(TypedDict):
    """One partition after the drain, as `kafka-consumer-groups --describe` shows it."""

    partition: int
    committed: int | None  # None: the group committed nothing there
    end: int
    lag: int


class MemoryFiguresDoc(TypedDict):
    """analysis.memory.MemoryFigures."""

    idle_bytes: int | None
    peak_bytes: int
    plateau_bytes: int | None
    returned_to_idle: bool | None
    tolerance_bytes: int | None


class BacklogKafkaDoc(TypedDict):
    bootstrap: str
    broker: str  # "Tansu (fresh for this scenario)" or "given with --kafka-bootstrap"
    topic: str
    group: str


class ScenarioDoc(TypedDict):
    """scenario.json: one consumer draining one backlog."""

    consumer: str  # as the user named it
    client: str  # suts.consumers' client, or the lab's source/dispatcher
    settings: dict[str, str]
    partitions: int
    produced: int
    consumed: int | None  # every subscription's group's together (the dispatcher's fan-out)
    consumer_started_ns: int  # every time of the scenario counts from here
    first_message_s: float | None
    drained_s: float | None
    exit: str  # "exit N" or "died during the run"
    exit_code: int
    errors: list[str]
    per_partition: dict[str, int] | None  # records read per partition, as the consumer counted
    log_tail: str | None  # what a consumer that died or failed logged last
    logged_errors: list[str]
    trimmed: dict[str, Any] | None  # --trim-after-drain: what malloc_trim(0) gave back
    figures: MemoryFiguresDoc | None
    predicted_buffer_bytes: int
    predicted_formula: str
    # `--subscriptions`: the dispatcher's consumer groups, and seed 003's rule for the 2019
    # dispatcher at as many (partitions x subscriptions x 256 messages x event); absent in
    # scenarios recorded before.
    folder: NotRequired[str]  # its directory: <consumer>-p<P>, with .fanout-S under fan-out
    subscriptions: NotRequired[int]
    seed_rule_bytes: NotRequired[int]
    seed_rule_formula: NotRequired[str]
    memory_limit_bytes: int | None  # None where it did not apply (the lab's consumers)
    malloc_arena_max: int | None
    fill_s: float
    lag: list[PartitionLagDoc]
    never_consumed: list[int]
    kafka: NotRequired[BacklogKafkaDoc]
    receiver_url: NotRequired[str | None]  # the lab's consumers deliver there
    instrument_failures: NotRequired[list[str]]
    scrapes: NotRequired[list[ScrapeDoc]]  # --scrape: the endpoints scraped while it ran


class FailedScenarioDoc(TypedDict):
    scenario: str
    reason: str


class CutScenarioDoc(TypedDict):
    """The scenario under way when the matrix was interrupted: its folder keeps what it wrote
    (samples, logs), but it has no scenario.json and is not analysed."""

    scenario: str
    after_s: float  # from the scenario's start (its broker, its backlog) to the interrupt
    reason: str


class MemoryDoc(TypedDict):
    """memory.json: the scenarios finished so far (rewritten after each), those that failed,
    and whether the matrix was interrupted, with the scenario that cut short."""

    scenarios: list[ScenarioDoc]
    failed: list[FailedScenarioDoc]
    interrupted: bool
    cut_short: NotRequired[list[CutScenarioDoc]]  # absent: written before it was kept


class MemorySummaryRowDoc(ScenarioDoc):
    """memory-summary.json's row: a scenario with its figures from the series the analysis
    made of its samples."""

    scenario: str  # its folder (ScenarioDoc's `folder`; <consumer>-p<partitions> before)


class MemorySummaryDoc(TypedDict):
    scenarios: list[MemorySummaryRowDoc]
