"""A step's rule, once: its events as Arrow columns -> outcomes, totals and the figures the
breaking-point rule reads (docs/design.md §4). Spark-free (pyarrow, numpy and fastdigest only).

Two callers, one rule: the Spark job's per-step pass (`analysis.steps.aggregate_step`, on an
executor, with the summary's `analysis.summary.step_row` finishing the figures on the driver)
and the capacity search's probe judge (`evbench.probejudge`, on a probe's records, in seconds
and without Spark). Both compute totals with `step_totals`, latency tails from the same
T-Digests and exact top values (`analysis.digests.digest_rows`, `tail_figures`), and the figures
with `step_figures`, so a probe and its step in the run's analysis get the same verdict.

The events of a step are the columns of `INPUT_COLUMNS`, one row per schedule slot; `sut`
and `step` are the group's own and not read here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.digests import digest_rows, empty_tail, from_bytes, tail_figures
from analysis.verdicts import StepFigures, slope_rise_ms
from contract.figures import TailDoc
from contract.units import NS_PER_MS, NS_PER_S
from runtime.failcause import added, failure_cause
from runtime.formulas import achieved_rate_per_s

# Latency metrics: name -> (end column, start column). Each is only defined where both exist and,
# for publish latencies, the answer was a 2xx.
LATENCIES_NS = {
    "publish": ("ack_ns", "sent_ns"),
    "publish_corrected": ("ack_ns", "intended_ns"),
    "e2e": ("received_ns", "intended_ns"),
    "e2e_uncorrected": ("received_ns", "sent_ns"),
    "sender_lag": ("sent_ns", "intended_ns"),
}
# The latencies the breaking-point rule reads.
JUDGED_LATENCIES = ("e2e", "sender_lag")
# A delivery is *late* when it arrived more than this after it was due (its e2e latency): an
# event a fault delayed rather than lost (the fault ledger's late deliveries). Eventing systems
# deliver in milliseconds, and a second is far past any band they keep when healthy.
LATE_AFTER_MS = 1000.0

# What the rule reads of an event (outcomes, latencies): the raw stamps and flags, nothing
# derived; outcomes and latencies are computed from them here, where they cost nothing.
RULE_INPUTS = (
    "intended_ns",
    "sent_ns",
    "ack_ns",
    "received_ns",
    "status",
    "decoy",
    "deliveries",
)
INPUT_COLUMNS = ("sut", "step", "target_rate_per_s", *RULE_INPUTS, "inflight_cap_refused", "error")

Outcomes = dict[str, np.ndarray]


class StepTotals(TypedDict):
    """A step's counts and the instants its achieved rates are measured between (as
    `runtime.formulas.achieved_rate_per_s` reads them)."""

    step: int
    target_rate_per_s: int
    scheduled: int
    sent: int
    inflight_cap_refused: int
    acked: int
    send_failures: int
    lost: int
    delivered: int
    duplicates: int
    decoys: int
    filtered: int
    leaked: int
    start_ns: int
    last_intended_ns: int
    last_sent_ns: int | None
    first_received_ns: int | None
    last_received_ns: int | None
    # Arrived before it was due: only a clock disagreement (or a wrong correction) does that, so
    # it is counted, never hidden.
    negative_e2e: int
    # The send failures by cause (runtime.failcause), the in-flight cap's among them.
    failures_by_cause: dict[str, int]


@dataclass(frozen=True)
class StepTails:
    """What the rule reads of a step's latencies: its end-to-end and sender-lag tails, and the
    end-to-end median of each second (seconds from the schedule start) in time order."""

    e2e: TailDoc
    sender_lag: TailDoc
    e2e_medians: Sequence[tuple[float, float]]


def outcomes(table: pa.Table) -> Outcomes:
    """docs/design.md §4, per event: ok = 2xx answer; send_failure = not ok; lost = ok but never
    received; duplicates. A decoy (a type the trigger should drop) is never lost: not arriving
    is `filtered`, arriving is `leaked`, a filter that let through what it should not have."""
    status = ints(table, "status")
    ok = (status >= 200) & (status < 300)
    _, delivered = present(table, "received_ns")
    decoy = flags(table, "decoy")
    missing = ~delivered
    return {
        "ok": ok,
        "send_failure": ~ok,
        "delivered": delivered,
        "lost": ok & missing & ~decoy,
        "filtered": ok & missing & decoy,
        "leaked": delivered & decoy,
        "duplicates": np.maximum(ints(table, "deliveries") - 1, 0),
    }


def latencies(
    table: pa.Table, ok: np.ndarray, names: Sequence[str] = tuple(LATENCIES_NS)
) -> dict[str, pa.Array]:
    """`<name>_ms` per event, null where undefined: publish latencies only for 2xx answers,
    end-to-end only for delivered events, sender lag for every event that was sent."""
    found = {}
    for name in names:
        end, start = LATENCIES_NS[name]
        end_ns, has_end = present(table, end)
        start_ns, has_start = present(table, start)
        defined = has_end & has_start
        if name.startswith("publish"):
            defined &= ok
        values = (end_ns - start_ns).astype(np.float64) / float(NS_PER_MS)
        found[f"{name}_ms"] = pa.array(values, mask=~defined)
    return found


def step_totals(table: pa.Table, found: Outcomes) -> StepTotals:
    """The step's counts (`found`: its `outcomes`) and the instants its rates are measured
    between."""
    intended = ints(table, "intended_ns")
    sent, was_sent = present(table, "sent_ns")
    received, delivered = present(table, "received_ns")
    return {
        "step": int(ints(table, "step")[0]),
        "target_rate_per_s": int(ints(table, "target_rate_per_s").max()),
        "scheduled": table.num_rows,
        "sent": int(was_sent.sum()),
        "inflight_cap_refused": int(flags(table, "inflight_cap_refused").sum()),
        "acked": int(found["ok"].sum()),
        "send_failures": int(found["send_failure"].sum()),
        "lost": int(found["lost"].sum()),
        "delivered": int(delivered.sum()),
        "duplicates": int(found["duplicates"].sum()),
        "decoys": int(flags(table, "decoy").sum()),
        "filtered": int(found["filtered"].sum()),
        "leaked": int(found["leaked"].sum()),
        "start_ns": int(intended.min()),
        "last_intended_ns": int(intended.max()),
        "last_sent_ns": _max_or_none(sent[was_sent]),
        "first_received_ns": _min_or_none(received[delivered]),
        "last_received_ns": _max_or_none(received[delivered]),
        "negative_e2e": int((received[delivered] < intended[delivered]).sum()),
        "failures_by_cause": failures_by_cause(table, found["send_failure"]),
    }


def failures_by_cause(table: pa.Table, failed: np.ndarray) -> dict[str, int]:
    """The failed events (`failed`) by cause, from their status and error as recorded: one
    group per distinct (status, error), each named once (runtime.failcause)."""
    if not failed.any():
        return {}
    errors = table.column("error") if "error" in table.column_names else pa.nulls(table.num_rows)
    rows = pa.table({"status": table.column("status"), "error": errors}).filter(pa.array(failed))
    groups = rows.group_by(["status", "error"], use_threads=False).aggregate([("status", "count")])
    found: dict[str, int] = {}
    for status, error, n in zip(*(groups.column(i).to_pylist() for i in range(3)), strict=True):
        cause = failure_cause(int(status), error) or "other"
        found[cause] = found.get(cause, 0) + int(n)
    return found


# How a step's totals are merged from its slices' (analysis.slices): counts add up, the
# instants are the earliest or the latest.
_EARLIEST = ("start_ns", "first_received_ns")
_LATEST = ("target_rate_per_s", "last_intended_ns", "last_sent_ns", "last_received_ns")


def merged_totals(parts: Sequence[StepTotals]) -> StepTotals:
    """One step's totals from its slices' (all of the same step)."""
    merged: dict[str, Any] = dict(parts[0])
    for part in parts[1:]:
        row: Mapping[str, Any] = part
        for name, value in row.items():
            if name == "step":
                continue
            held = merged[name]
            if name == "failures_by_cause":
                merged[name] = added(held or {}, value or {})
            elif name not in _EARLIEST and name not in _LATEST:
                merged[name] = held + value
            elif held is None or value is None:
                merged[name] = value if held is None else held
            else:
                merged[name] = min(held, value) if name in _EARLIEST else max(held, value)
    return cast(StepTotals, merged)


def step_figures(
    totals: StepTotals, tails: StepTails, duration_s: float, baseline_e2e_p99_ms: float | None
) -> StepFigures:
    """The figures `analysis.verdicts.judge` reads. The sender's pace counts handled slots (sent
    or refused by the in-flight cap, each at its own time); delivered excludes leaked decoys,
    and the expected delivery rate excludes every decoy. The delivered rate is over the seconds
    the step's slots cover (`covered_s`): `--trim` may have left its first ones out."""
    rate = totals["target_rate_per_s"]
    last_handled_ns = max(totals["last_sent_ns"] or 0, totals["last_intended_ns"] or 0)
    handled = totals["sent"] + totals["inflight_cap_refused"]
    sender_rate = achieved_rate_per_s(handled, totals["start_ns"], last_handled_ns, rate)
    medians = tails.e2e_medians
    return StepFigures(
        step=totals["step"],
        target_rate_per_s=rate,
        scheduled=totals["scheduled"],
        acked=totals["acked"],
        send_failures=totals["send_failures"],
        lost=totals["lost"],
        sender_ratio=sender_rate / rate if rate else 0.0,
        sender_lag_p99_ms=tails.sender_lag["p99"],
        delivered_rate_per_s=(totals["delivered"] - totals["leaked"])
        / covered_s(totals, duration_s),
        expected_delivery_rate_per_s=rate * (1 - totals["decoys"] / max(totals["scheduled"], 1)),
        e2e_median_ms=tails.e2e["p50"],
        e2e_rise_ms=slope_rise_ms([s for s, _ in medians], [m for _, m in medians]),
        e2e_p99_ms=tails.e2e["p99"],
        baseline_e2e_p99_ms=baseline_e2e_p99_ms,
        inflight_cap_refused=totals["inflight_cap_refused"],
        failures_by_cause=totals.get("failures_by_cause") or {},
    )


def tails_of(digests: pa.Table) -> StepTails:
    """A step's `StepTails` from its digest rows (`analysis.digests.digest_rows`): the step rows'
    digests and top values, and the per-second rows' e2e medians."""
    step_rows = digests.filter(pc.is_null(digests.column("second"))).to_pylist()
    whole = {
        row["metric"]: tail_figures(from_bytes(row["digest"]), np.asarray(row["top_ms"]))
        for row in step_rows
    }
    seconds = digests.filter(
        pc.and_(pc.is_valid(digests.column("second")), pc.equal(digests.column("metric"), "e2e"))
    ).sort_by("second")
    medians = zip(
        seconds.column("second").to_pylist(), seconds.column("p50_ms").to_pylist(), strict=True
    )
    return StepTails(
        e2e=whole.get("e2e", empty_tail()),
        sender_lag=whole.get("sender_lag", empty_tail()),
        e2e_medians=[(float(s), float(m)) for s, m in medians],
    )


def judged_figures(
    table: pa.Table,
    *,
    start_ns: int,
    duration_s: float,
    baseline_e2e_p99_ms: float | None,
) -> StepFigures:
    """One step's events (`INPUT_COLUMNS`) straight to its figures, as the Spark job would
    compute them: `start_ns` is the schedule start its seconds count from."""
    found = outcomes(table)
    latency = latencies(table, found["ok"], JUDGED_LATENCIES)
    step = int(ints(table, "step")[0])
    seconds = seconds_since(ints(table, "intended_ns"), start_ns)
    tails = tails_of(digest_rows("", step, seconds, latency))
    return step_figures(step_totals(table, found), tails, duration_s, baseline_e2e_p99_ms)


def seconds_since(instants: np.ndarray, start_ns: int) -> np.ndarray:
    """Whole seconds from `start_ns`: the per-second series' and digests' keys."""
    return (instants - start_ns) // NS_PER_S


def ints(table: pa.Table, name: str) -> np.ndarray:
    """A non-null integer column (the record contract's) as numpy; a null is named, not taken
    for a number."""
    column = table.column(name)
    if column.null_count:
        raise ValueError(f"records: {column.null_count} null {name} value(s) in a step's events")
    return column.to_numpy()


def flags(table: pa.Table, name: str) -> np.ndarray:
    """A non-null boolean column (the record contract's) as numpy; a null is named."""
    return np.asarray(ints(table, name), dtype=bool)


def present(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A nullable integer column: (values with nulls as 0, mask of the present ones)."""
    column = table.column(name)
    return column.fill_null(0).to_numpy(), ~np.asarray(column.is_null())


def _max_or_none(values: np.ndarray) -> int | None:
    return int(values.max()) if len(values) else None


def _min_or_none(values: np.ndarray) -> int | None:
    return int(values.min()) if len(values) else None


def duration_of(totals: StepTotals, durations: Mapping[int, int]) -> int:
    """The step's duration as the pace gave it, else as its slots imply."""
    rate = totals["target_rate_per_s"]
    return durations.get(totals["step"], max(1, totals["scheduled"] // max(rate, 1)))


def covered_s(totals: StepTotals, duration_s: float) -> float:
    """The seconds a step's slots in the analysis cover: its duration (or, cut short, the time
    it ran), less what `--trim` left out of its start. Its slots are at 1/rate apart, so those
    kept cover `scheduled / rate` seconds: a 10 s step trimmed to its last 6 delivering its pace
    reads 100 %, not 60 % (issue 51, item 9.1)."""
    rate = totals["target_rate_per_s"]
    if rate <= 0 or totals["scheduled"] <= 0:
        return duration_s
    return min(duration_s, totals["scheduled"] / rate)


def cut_short_s(totals: StepTotals, duration_s: float) -> float | None:
    """The seconds a step's slots cover when it was cut short (an interrupt, a sender killed:
    fewer slots than its duration holds by more than half a second's), else None. Its rates
    are then measured over the time it ran: over the whole duration, a step cut at 6 s of 20
    would read as delivering 30 % of its pace."""
    rate = totals["target_rate_per_s"]
    if rate <= 0:
        return None
    ran_s = totals["scheduled"] / rate
    return ran_s if ran_s < duration_s - 0.5 else None
