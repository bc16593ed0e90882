"""summary.json, typed once: what `evbench analyze` writes for each system (analysis.summary)
and every reader reads (the report, compare, collect, the objectives, the tests). Its reading
helpers are contract.documents' (`read_document`, `problems`). Standard library only.
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired[...] from the class
# body at definition time (see contract.documents).
from typing import Any, NotRequired, TypedDict

from contract.documents import RepeatDoc, RunStatus
from contract.fanout import SubscriberSummaryDoc
from contract.figures import IntervalDoc, ObjectiveDoc, ObjectivesFrom, SpectrumPointDoc, TailDoc
from contract.searchdocs import SearchDoc


class CountsDoc(TypedDict):
    sent: int
    scheduled: int
    send_failures: int
    acked: int
    received: int
    lost: int
    duplicates: int
    foreign: int  # received, never sent by this run (another id, another run's)
    # received, this run's own ids, their sent rows lost with the sender (a kill, a full disk)
    unrecorded_sends: NotRequired[int]
    decoys: int
    filtered: int
    leaked: int
    # send_failures by cause (runtime.failcause), the in-flight cap's refusals among them
    failures_by_cause: NotRequired[dict[str, int]]


class DriftDoc(TypedDict):
    """A long step's drift (analysis.drift): the trend of its e2e P50 and P99 per window."""

    window_s: int
    windows: int
    ms_per_h: dict[str, float]  # p50, p99: the fitted slopes, per hour
    rise_ms: dict[str, float]  # p50, p99: fitted over the windows' span (negative: it fell)
    allowed_rise_ms: dict[str, float]  # p50, p99: what a stable step may rise
    verdict: str  # stable | drifting
    text: str  # "e2e P50 rose 10.1 ms per hour (2.04 -> 12.1 ms), ...: drifting"


class HostLoadDoc(TypedDict):
    """The host's load over a step (analysis.hostload.HostLoad): shares of all its CPUs."""

    cpus: int
    busy_ratio: float
    others_ratio: float  # busy, less the run's own processes
    steal_ratio: float
    samples: int
    # the same over its busiest 5 seconds, which the host rule reads too
    peak_busy_ratio: float | None
    peak_others_ratio: float | None


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
    failures_by_cause: NotRequired[dict[str, int]]  # send_failures by cause, as the counts'


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
    # A cool-down step that held after a break: where the system caught up (never a capacity).
    recovered_per_s: NotRequired[int | None]
    # The e2e P99 the standing-queue test compared steps with: the first clean step's; null
    # when no step was clean (each then held to the absolute bar).
    baseline_e2e_p99_ms: NotRequired[float | None]
    host_saturated_steps: NotRequired[list[int]]  # steps others saturated the host in
    thresholds: dict[str, Any]
    clock: NotRequired[ClockSummaryDoc]  # absent in summaries written before clock offsets
    sut_deaths: NotRequired[list[DeathSummaryDoc]]  # the system's processes that died, if any
    faults: NotRequired[list[FaultSummaryDoc]]  # --fault, --fault-exec: each with its step's cost
    search: NotRequired[SearchDoc]  # `evbench search`: run.json's search, as found
    repeat: NotRequired[RepeatDoc]  # run.json's: one of N repeats of the pace
    objectives: NotRequired[list[ObjectiveDoc]]  # --slo: each met or breached
    objectives_from: NotRequired[ObjectivesFrom]  # the analysis' --slo, or the run's
    spectrum: NotRequired[dict[str, dict[str, list[SpectrumPointDoc]]]]  # metric -> line -> points
    subscribers: NotRequired[list[SubscriberSummaryDoc]]  # a fan-out's, each on its own
    # record files left out, each a copy of one read (runtime.parquet.checked_parts), as said
    ignored_files: NotRequired[list[str]]
