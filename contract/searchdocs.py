"""What `evbench search` records: run.json's `search` section (and summary.json's, as found) and
the search's sender summary, its probes' done lines with their sums."""

# No `from __future__ import annotations`: TypedDict reads NotRequired[...] at definition time.

from typing import Any, NotRequired, TypedDict

from contract.senderlines import SenderDone


class SearchSenderSummary(TypedDict):
    """`evbench search`'s sender summary: its probes' done lines and their sums."""

    start_ns: int | None
    sent: int
    ok: int
    failures: int
    probes: list[SenderDone]


class SearchProbeDoc(TypedDict):
    """One probe of `evbench search`: a step of the run, with the verdict the search acted on."""

    step: int
    rate_per_s: int
    hold_s: int
    confirm: bool  # the long hold that confirms an answer
    start_ns: int
    verdict: str  # holds | breaks | sender-limited | not-judged: cut short (analysis.verdicts)
    reasons: list[str]
    e2e_p99_ms: float | None  # exact, from the probe's records
    sender_ratio: float
    restarted: NotRequired[str | None]  # why the system started afresh before it (None: warm)
    # The search was interrupted during it: its records are the run's, its verdict not-judged,
    # its e2e_p99_ms None. Absent: a whole probe.
    cut_short: NotRequired[bool]


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
    # --slo's terms ({"terms": [...]}; before one grammar served every command, the two figures
    # it had: {"e2e_p99_ms", "lost_ratio"})
    objective: dict[str, Any]
    probes: list[SearchProbeDoc]
    result: SearchResultDoc | None  # None: interrupted or failed
    minutes: float
