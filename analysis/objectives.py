"""Objectives (`--slo`): what the user asks of a run, judged after its analysis (pure,
table-tested). One grammar and one judge for `run`, `analyze` and `search`; terms separated by
commas:

    e2e-p99<=200ms  publish-p99.99<=50ms       a latency percentile (p50, p99, p99.9, p99.99 or
                                               max), in ms or s
    lost<=0  lost<=0.1%  duplicates<=0         a count of events, or a share of those acked
    send-failures<=1%                          (send failures: of those scheduled)
    breaking-point>=1500  max-sustainable>=1200   the run's capacity, in events/s

A term is asked of the whole run; `step:` before it asks it of every judged step (one that
held or broke: not a faulted step, judged by its fault, nor one the sender could not hold),
which has the e2e P99 and P99.99, lost, duplicates and send failures. A search asks every term
of each probe (a probe is one step): its e2e P99, lost and send failures.

A breaking point that never came (every judged step held) lies above the highest rate that
held, so it meets `breaking-point>=X` only when a step at X/s or more held; a figure the run
does not have (no judged step, no deliveries; every figure of a run whose instrument failed)
breaches its objective: an objective that cannot be shown met is not met.
"""

from __future__ import annotations

import html
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from analysis.verdicts import BREAKS, HOLDS
from contract.figures import MeasuredUnit, ObjectiveDoc, ObjectivesFrom
from contract.summarydocs import StepSummaryDoc, SummaryDoc

Scope = Literal["run", "step", "probe"]
_PERCENTILES = {"p50": "p50", "p99": "p99", "p99.9": "p999", "p99.99": "p9999", "max": "max"}
_LATENCIES = {f"{side}-{p}" for side in ("e2e", "publish") for p in _PERCENTILES}
_COUNTS = ("lost", "duplicates", "send-failures")
_CAPACITIES = ("breaking-point", "max-sustainable")
# What a step's row (and a probe's figures) keep.
_STEP_METRICS = {"e2e-p99", "e2e-p99.99", *_COUNTS}
_PROBE_METRICS = {"e2e-p99", "lost", "send-failures"}
_TERM = re.compile(
    r"^(?P<step>step:)?(?P<metric>[a-z0-9.-]+)(?P<op><=|>=)(?P<bound>\d+(?:\.\d+)?)"
    r"(?P<unit>ms|s|%|/s)?$"
)
USAGE = "e.g. e2e-p99<=200ms, step:lost<=0.1%, max-sustainable>=1200"


@dataclass(frozen=True)
class Objective:
    text: str  # as given
    metric: str  # e2e-p99, lost, breaking-point, ...
    per_step: bool
    op: Literal["<=", ">="]
    bound: float  # ms for latencies, events/s for capacities, a count or (share) a fraction
    share: bool  # lost<=0.1%: of the acked events (send failures: of the scheduled)

    def met_by(self, value: float) -> bool:
        return value <= self.bound if self.op == "<=" else value >= self.bound


def parse_objectives(text: str, scope: Scope = "run") -> tuple[Objective, ...]:
    """`--slo`'s terms; a bad one is a ValueError naming it and what to write. `scope`: the
    command's (`probe` for a search: every term a probe's). No term at all is one too: a CI
    job's `--slo "$SLO"` with SLO unset must not gate on nothing."""
    terms = [t.strip() for t in text.split(",") if t.strip()]
    if not terms:
        raise ValueError(f"--slo {text!r} holds no objective (an unset variable?): {USAGE}")
    return tuple(_term(term, scope) for term in terms)


def applied_objectives(
    given: Sequence[Objective], run: Mapping[str, Any]
) -> tuple[tuple[Objective, ...], ObjectivesFrom | None]:
    """What an analysis judges, and where from: the objectives given (`--slo`), else those the
    run was given (run.json's `objectives`: `evbench run --slo`'s terms), else none. A recorded
    term that no longer reads is a ValueError naming run.json."""
    if given:
        return tuple(given), "--slo"
    terms = run.get("objectives")
    if not terms:
        return (), None
    bad = "run.json's objectives"
    if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
        raise ValueError(f'{bad}: not a list of terms such as ["e2e-p99<=200ms"]')
    try:
        return parse_objectives(",".join(terms), "run"), "run.json"
    except ValueError as exc:
        raise ValueError(f"{bad}: {exc} (or give --slo to judge others)") from None


def _term(term: str, scope: Scope) -> Objective:
    found = _TERM.match(term.replace(" ", ""))
    bad = f"--slo term '{term}'"
    if not found:
        raise ValueError(f"{bad}: write NAME<=VALUE or NAME>=VALUE, {USAGE}")
    metric, op, unit = found["metric"], found["op"], found["unit"]
    bound = float(found["bound"])
    if not math.isfinite(bound):  # 400 digits read as infinity, which no count can be
        raise ValueError(f"{bad}: its bound is too large: at most {sys.float_info.max:.3g}")
    per_step = bool(found["step"]) or scope == "probe"
    if metric in _LATENCIES and op == "<=" and unit in ("ms", "s"):
        bound = bound * 1000 if unit == "s" else bound
    elif metric in _COUNTS and op == "<=" and unit in (None, "%"):
        if unit is None and bound != int(bound):
            raise ValueError(f"{bad}: a count is a whole number of events (or a share: 0.5%)")
        bound = bound / 100 if unit == "%" else bound
    elif metric in _CAPACITIES and op == ">=" and unit in (None, "/s") and not per_step:
        pass
    else:
        raise ValueError(f"{bad}: {_what_fits(metric, per_step)}")
    kept = _PROBE_METRICS if scope == "probe" else _STEP_METRICS
    if per_step and metric not in kept:
        where = "a probe" if scope == "probe" else "a step"
        raise ValueError(f"{bad}: {where} keeps only {', '.join(sorted(kept))}")
    return Objective(term, metric, per_step, op, bound, unit == "%")  # type: ignore[arg-type]


def _what_fits(metric: str, per_step: bool) -> str:
    if metric in _LATENCIES:
        return f"a latency is at most so many ms or s: {metric}<=200ms"
    if metric in _COUNTS:
        return f"a count is at most so many events or a share: {metric}<=0 or {metric}<=0.1%"
    if metric in _CAPACITIES:
        if per_step:
            return "a capacity is the whole run's, not a step's"
        return f"a capacity is at least so many events/s: {metric}>=1200"
    names = ", ".join([*sorted(_LATENCIES), *_COUNTS, *_CAPACITIES])
    return f"'{metric}' is not one of {names}"


def judge(objectives: Sequence[Objective], summary: SummaryDoc) -> list[ObjectiveDoc]:
    """Each objective met or breached by the analysed run, with the figure that decided it."""
    judged = [s for s in summary["steps"] if s["verdict"] in (HOLDS, BREAKS)]
    found = []
    for objective in objectives:
        if summary["instrument_failures"]:  # no figure of the run speaks for the system
            found.append(_decided(objective, None, "the run: an instrument failed"))
        elif objective.metric == "breaking-point" and summary["breaking_point_per_s"] is None:
            found.append(_never_broke(objective, judged))
        elif objective.per_step:
            values = [(_step_value(objective, step), _where(step)) for step in judged]
            found.append(_worst(objective, values) if values else _unmeasured(objective, "step"))
        else:
            found.append(_decided(objective, _run_value(objective, summary), "the run"))
    return found


def judge_values(
    objectives: Sequence[Objective], values: Mapping[str, float | None], where: str
) -> list[ObjectiveDoc]:
    """Each objective on one step's (a probe's) figures: `values` by metric, a count's share
    as `<metric>%`."""
    return [
        _decided(o, values.get(f"{o.metric}%" if o.share else o.metric), where) for o in objectives
    ]


def breached(results: Sequence[ObjectiveDoc]) -> list[ObjectiveDoc]:
    return [r for r in results if not r["met"]]


def share(count: int, whole: int) -> float | None:
    """A count as a share of its whole (lost of acked, send failures of scheduled): None for
    some of nothing, which no bound can be said to hold."""
    return count / whole if whole > 0 else (0.0 if count == 0 else None)


def _never_broke(objective: Objective, judged: Sequence[StepSummaryDoc]) -> ObjectiveDoc:
    """`breaking-point>=X` of a run that never broke: its breaking point lies above the highest
    rate that held, so the bound is shown met only when that rate reaches it."""
    held = [s["target_rate_per_s"] for s in judged if s["verdict"] == HOLDS]
    if not held:
        return _decided(objective, None, "the run: no judged step")
    found = _decided(objective, max(held), "the run")
    verdict = "met" if found["met"] else "BREACHED"
    found["text"] = (
        f"{objective.text}: {verdict} (the run: no breaking point up to {max(held):,}/s)"
    )
    return found


def _run_value(objective: Objective, summary: SummaryDoc) -> float | None:
    metric = objective.metric
    if metric in _LATENCIES:
        side, percentile = metric.split("-", 1)
        return summary["latency_ms"][side][_PERCENTILES[percentile]]  # type: ignore[literal-required]
    if metric == "breaking-point":
        return summary["breaking_point_per_s"]  # one that never came: _never_broke
    if metric == "max-sustainable":
        return summary["max_sustainable_rate_per_s"]
    counts = summary["counts"]
    count = {"lost": counts["lost"], "duplicates": counts["duplicates"],
             "send-failures": counts["send_failures"]}[metric]  # fmt: skip
    whole = counts["scheduled"] if metric == "send-failures" else counts["acked"]
    return share(count, whole) if objective.share else count


def _step_value(objective: Objective, step: StepSummaryDoc) -> float | None:
    metric = objective.metric
    if metric == "e2e-p99":
        return step["p99_e2e_ms"]
    if metric == "e2e-p99.99":
        return step["p9999_e2e_ms"]
    count = {"lost": step["lost"], "duplicates": step["duplicates"],
             "send-failures": step["send_failures"]}[metric]  # fmt: skip
    acked = step["scheduled"] - step["send_failures"]
    whole = step["scheduled"] if metric == "send-failures" else acked
    return share(count, whole) if objective.share else count


def _where(step: StepSummaryDoc) -> str:
    return f"step {step['step']} ({step['target_rate_per_s']}/s)"


def _worst(objective: Objective, values: list[tuple[float | None, str]]) -> ObjectiveDoc:
    """Every judged step's: the first that breaches it, or met by all (the worst of them said)."""
    for value, where in values:
        if value is None or not objective.met_by(value):
            return _decided(objective, value, where)
    pick = max if objective.op == "<=" else min  # the first of the worst, if several
    worst = pick(values, key=lambda found: found[0])  # type: ignore[arg-type, return-value]
    return _decided(objective, worst[0], f"every judged step (worst: {worst[1]})")


def _unmeasured(objective: Objective, what: str) -> ObjectiveDoc:
    return _decided(objective, None, f"no judged {what}")


def _decided(objective: Objective, value: float | None, where: str) -> ObjectiveDoc:
    met = value is not None and objective.met_by(value)
    shown = "not measured" if value is None else _shown(objective, value)
    return {
        "objective": objective.text,
        "met": met,
        "measured": value,
        "unit": _unit(objective),
        "where": where,
        "text": f"{objective.text}: {'met' if met else 'BREACHED'} ({where}: {shown})",
    }


def _unit(objective: Objective) -> MeasuredUnit:
    if objective.metric in _LATENCIES:
        return "ms"
    if objective.metric in _CAPACITIES:
        return "per_s"
    return "share" if objective.share else "events"


def _shown(objective: Objective, value: float) -> str:
    if objective.metric in _LATENCIES:
        return f"{value:.3g} ms" if value < 100 else f"{value:,.0f} ms"
    if objective.metric in _CAPACITIES:
        return f"{value:,.0f}/s"
    return f"{value:.3%}" if objective.share else f"{value:,.0f} events"


def objectives_section(summary: SummaryDoc) -> str:
    """The report's list of objectives, each met or breached (nothing without `--slo`)."""
    judged = summary.get("objectives") or []
    if not judged:
        return ""
    missed = len(breached(judged))
    title = f"{missed} of {len(judged)} breached" if missed else "every one met"
    items = "".join(
        f"<li class='{'holds' if o['met'] else 'breaks'}'>{html.escape(o['text'])}</li>"
        for o in judged
    )
    source = ""
    if summary.get("objectives_from") == "run.json":
        source = "<p>The run's own (<code>--slo</code>, kept in run.json).</p>"
    return f"<h2>Objectives: {title}</h2>{source}<ul>{items}</ul>"
