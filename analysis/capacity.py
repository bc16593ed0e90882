"""A run's capacity from its steps' verdicts (docs/design.md §4), pure and table-tested: the
breaking point, the max sustainable rate, a cool-down's recovery, the baseline each step is
judged against, and the one-line verdicts.

Breaking point = the lowest-rate step that breaks on its own. A breaking step that follows a
breaking step of equal or higher rate, with no holding step between, inherits that overload (a
cool-down step draining a backlog) and is not a candidate. Max sustainable rate = the highest
rate of a holding step *on the way up* below the breaking point (or of all of them if nothing
broke): a cool-down step (a rate below the step before it, as 1k-2k's 100/s after 1500/s) that
holds after a break is the system's *recovery*, said as such, never its capacity.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from analysis.hostload import HostLoad
from analysis.verdicts import (
    BREAKS,
    HOLDS,
    HOST_SATURATED,
    StepFigures,
    Thresholds,
    Verdict,
    clean_baseline,
    judge_against,
    saturation,
)
from contract.searchdocs import SearchResultDoc
from contract.summarydocs import HostLoadDoc, StepSummaryDoc


@dataclass(frozen=True)
class Capacity:
    breaking_point_per_s: int | None
    max_sustainable_rate_per_s: int | None
    # The first cool-down step that held after a break: the system caught up at this rate.
    recovered_per_s: int | None = None


def judge_steps(
    figures: Sequence[StepFigures], t: Thresholds, may_set_baseline: Sequence[bool]
) -> tuple[list[Verdict], float | None]:
    """Each step judged in run order against the latency baseline so far (analysis.verdicts
    `judge_against`), and the baseline the run settled on (None: no clean step). A step may
    set the baseline only where `may_set_baseline` says (not one a fault was injected into).
    A capacity search judges its probes the same way, one at a time."""
    baseline: float | None = None
    verdicts = []
    for fig, eligible in zip(figures, may_set_baseline, strict=True):
        v = judge_against(fig, t, baseline)
        verdicts.append(v)
        if baseline is None and eligible:
            baseline = clean_baseline(fig, v, t)
    return verdicts, baseline


def capacity(verdicts: Sequence[Verdict]) -> Capacity:
    """The run's capacity from its step verdicts in run order. Only a step on the way up can be
    the breaking point, as only one can be the capacity: a cool-down step measures what an
    earlier step left behind, broken or inconclusive (a host others saturated may have left a
    backlog too), never what the system takes at its own rate."""
    rising = _rising(verdicts)
    candidates = []
    overload_rate: int | None = None  # rate of the overloaded step whose backlog may linger
    for v, up in zip(verdicts, rising, strict=True):
        if v.verdict in (BREAKS, HOST_SATURATED):
            inherited = overload_rate is not None and v.target_rate_per_s <= overload_rate
            if up and v.verdict == BREAKS and not inherited:
                candidates.append(v.target_rate_per_s)
            overload_rate = max(overload_rate or 0, v.target_rate_per_s)
        elif v.verdict == HOLDS:
            overload_rate = None
    point = min(candidates) if candidates else None
    holding = [
        v.target_rate_per_s
        for v, up in zip(verdicts, rising, strict=True)
        if up and v.verdict == HOLDS and (point is None or v.target_rate_per_s < point)
    ]
    return Capacity(point, max(holding) if holding else None, _recovered(verdicts, rising))


def breaking_point(verdicts: Sequence[Verdict]) -> tuple[int | None, int | None]:
    """(breaking point, max sustainable rate) from step verdicts in run order."""
    found = capacity(verdicts)
    return found.breaking_point_per_s, found.max_sustainable_rate_per_s


def _rising(verdicts: Sequence[Verdict]) -> list[bool]:
    """Whether each step is on the way up: not below the rate of the step before it."""
    rates = [v.target_rate_per_s for v in verdicts]
    return [i == 0 or rate >= rates[i - 1] for i, rate in enumerate(rates)]


def _recovered(verdicts: Sequence[Verdict], rising: Sequence[bool]) -> int | None:
    broke = False
    for v, up in zip(verdicts, rising, strict=True):
        if not up and broke and v.verdict == HOLDS:
            return v.target_rate_per_s
        broke = broke or v.verdict == BREAKS
    return None


def verdict_text(
    breaking_point_per_s: int | None,
    max_sustainable_rate_per_s: int | None,
    failures: Sequence[str] = (),
    recovered_per_s: int | None = None,
    at_least: bool = False,
) -> str:
    """The one-line verdict every report and summary line uses; an instrument failure (see
    analysis.instrumentfail) outranks every figure. `at_least`: the max sustainable rate held
    only on a host others saturated, a lower bound."""
    if failures:
        return "instrument failed: " + "; ".join(failures)
    bound = "at least " if at_least else ""
    sustainable = (
        f"max sustainable {bound}{max_sustainable_rate_per_s}/s"
        if max_sustainable_rate_per_s
        else "no step held below it on the way up"
    )
    recovered = f"; recovered at {recovered_per_s}/s" if recovered_per_s else ""
    if breaking_point_per_s:
        return f"breaks at {breaking_point_per_s}/s; {sustainable}{recovered}"
    if max_sustainable_rate_per_s:
        return f"held every judged step; {sustainable}{recovered}"
    return "no step could be judged (sender-limited, host saturated or too few events)"


def search_verdict_text(result: SearchResultDoc | None, status: str | None = "completed") -> str:
    """The one-line verdict of a capacity search (`evbench search`), from its result
    (run.json's search.result, empty when it did not finish): the bracket it found, or why it
    found none."""
    if not result:
        return f"searched: the search did not finish ({status}), no rate confirmed"
    found, broke = result.get("max_sustainable_per_s"), result.get("lowest_break_per_s")
    held = result.get("highest_hold_per_s")
    if found and broke:
        return f"searched: max sustainable {found}/s (held {found}/s, broke {broke}/s)"
    if found:
        return f"searched: max sustainable {found}/s (the highest rate probed; nothing broke)"
    if result.get("workers_needed"):
        return (
            f"searched: the sender was the limit, not the system (held {held or '-'}/s; "
            f"about {result['workers_needed']} sender workers needed)"
        )
    return f"searched: no rate confirmed ({result.get('why', '')})"


def saturated_steps(steps: Sequence[StepSummaryDoc], t: Thresholds) -> list[int]:
    """The steps whose host others saturated (analysis.verdicts.saturation), in run order."""
    return [s["step"] for s in steps if saturation(_load(s.get("host")), t) is not None]


def host_verdict_text(steps: Sequence[StepSummaryDoc], saturated: Collection[int]) -> str:
    """What the run's verdict adds when others saturated the host: which steps, the worst
    load, and what became of them ("host saturated by other processes in steps 3, 4 (host 99%
    busy, 52% by processes outside the run, of 2 CPUs, at most): 1 inconclusive, 1 held as a
    lower bound"); empty when nobody did. `saturated`: those steps (`saturated_steps`)."""
    crowded = [s for s in steps if s["step"] in saturated]
    if not crowded:
        return ""
    worst = max((_load(s.get("host")) for s in crowded), key=lambda h: h.others_ratio if h else 0)
    held = sum(s["verdict"] == HOLDS for s in crowded)
    inconclusive = sum(s["verdict"] == HOST_SATURATED for s in crowded)
    said = [f"{inconclusive} inconclusive"] if inconclusive else []
    said += [f"{held} held as a lower bound"] if held else []
    if other := len(crowded) - held - inconclusive:  # judged by a fault or a death instead
        said.append(f"{other} judged otherwise (see their reasons)")
    return (
        f"host saturated by other processes in step{'s' if len(crowded) > 1 else ''} "
        f"{', '.join(str(s['step']) for s in crowded)} ({worst.text() if worst else ''}, at "
        f"most): {', '.join(said)}"
    )


def _load(doc: HostLoadDoc | None) -> HostLoad | None:
    return HostLoad(**doc) if doc else None
