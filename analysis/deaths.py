"""A process of the system that died mid-run, and the steps it spoiled (pure, table-tested).

A dispatcher killed at 12 s loses every event after it: read by the breaking-point rule alone,
that is a system that "breaks at 500/s", a crash read as a capacity limit. So the one rule
here: a death spoils the step under way when it was seen (or the gap after it: events still in
flight are lost with it) and every later step, up to a restart (a search restarts a system that
died before its next probe). A spoiled step that did not hold is judged *system-died*, never
*breaks*: the breaking point and the sustainable rate come from the steps before the death.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from analysis.steprule import StepTotals
from analysis.verdicts import HOLDS, Verdict
from contract.documents import RunDoc, SutDeathDoc
from contract.summarydocs import DeathSummaryDoc
from contract.units import NS_PER_S

SYSTEM_DIED = "system-died"


def death_step(noticed_ns: int, step_starts_ns: Sequence[tuple[int, int]]) -> int | None:
    """The step a death spoils first: the last one that began before it was seen (steps as
    (step, first slot's intended_ns) in run order); None if it came before every step."""
    found = None
    for step, start_ns in step_starts_ns:
        if start_ns <= noticed_ns:
            found = step
    return found


def spoiled_steps(
    deaths: Sequence[SutDeathDoc],
    step_starts_ns: Sequence[tuple[int, int]],
    restarted: Collection[int] = (),
) -> dict[int, SutDeathDoc]:
    """Step -> the death that spoiled it: from the step it died in, on, until a step the system
    was restarted before (`restarted`)."""
    steps = [step for step, _ in step_starts_ns]
    spoiled: dict[int, SutDeathDoc] = {}
    for death in sorted(deaths, key=lambda d: d["noticed_ns"]):
        first = death_step(death["noticed_ns"], step_starts_ns)
        start = steps.index(first) if first is not None else 0
        for index, step in enumerate(steps[start:]):
            if index and step in restarted:
                break
            spoiled.setdefault(step, death)
    return spoiled


def death_text(death: SutDeathDoc, schedule_start_ns: int | None) -> str:
    """`dispatcher died at 12.4 s (exit -9)`: when, counted from the schedule start."""
    when = ""
    if schedule_start_ns is not None:
        when = f" at {(death['noticed_ns'] - schedule_start_ns) / NS_PER_S:.1f} s"
    code = death["exit_code"]
    return f"{death['role']} died{when}" + (f" (exit {code})" if code is not None else "")


def after_deaths(
    verdicts: Sequence[Verdict],
    spoiled: Mapping[int, SutDeathDoc],
    lost: Mapping[int, int],
    schedule_start_ns: int | None,
) -> list[Verdict]:
    """Each spoiled step that did not hold judged *system-died* with the death named; a step
    that held, held (say, a broker that died after everything was delivered)."""
    judged = []
    for v in verdicts:
        death = spoiled.get(v.step)
        if death is None or v.verdict == HOLDS:
            judged.append(v)
            continue
        why = (
            f"{death_text(death, schedule_start_ns)}: {lost.get(v.step, 0)} lost in this step; "
            "a crash, not a capacity limit"
        )
        judged.append(replace(v, verdict=SYSTEM_DIED, reasons=(why, *v.reasons)))
    return judged


def death_summaries(
    deaths: Sequence[SutDeathDoc],
    spoiled: Mapping[int, SutDeathDoc],
    lost: Mapping[int, int],
    schedule_start_ns: int | None,
) -> list[DeathSummaryDoc]:
    """summary.json's `sut_deaths`: each death, its first step and what was lost from it on."""
    found: list[DeathSummaryDoc] = []
    for death in sorted(deaths, key=lambda d: d["noticed_ns"]):
        steps = sorted(step for step, d in spoiled.items() if d is death)
        at_s = None
        if schedule_start_ns is not None:
            at_s = round((death["noticed_ns"] - schedule_start_ns) / NS_PER_S, 3)
        found.append(
            {
                "role": death["role"],
                "at_s": at_s,
                "step": steps[0] if steps else None,
                "lost_after": sum(lost.get(step, 0) for step in steps),
            }
        )
    return found


def deaths_text(found: Sequence[DeathSummaryDoc], rates: Mapping[int, int]) -> str:
    """The verdict's first words when the system died: `the dispatcher died at 12.4 s in step
    2 (500/s): 7269 lost from then on`."""
    parts = []
    for d in found:
        when = f" at {d['at_s']:.1f} s" if d["at_s"] is not None else ""
        where = f" in step {d['step']} ({rates.get(d['step'], 0)}/s)" if d["step"] else ""
        parts.append(f"{d['role']} died{when}{where}: {d['lost_after']} lost from then on")
    return "; ".join(parts)


@dataclass(frozen=True)
class RunDeaths:
    """A run's deaths: the steps they spoiled, each step's lost, and the summary's rows."""

    spoiled: Mapping[int, SutDeathDoc]
    lost: Mapping[int, int]
    found: list[DeathSummaryDoc]


def run_deaths(run: RunDoc, totals: Sequence[StepTotals], start_ns: int | None) -> RunDeaths:
    """The system's processes that died (run.json's `sut_deaths`) and the steps they spoiled
    (analysis.deaths): a search restarts a dead system before its next probe."""
    deaths = run.get("sut_deaths") or []
    ordered = sorted(totals, key=lambda t: t["step"])
    starts = [(t["step"], t["start_ns"]) for t in ordered]
    search = run.get("search")
    probes = search.get("probes") or [] if search else []
    restarted = {p["step"] for p in probes if p.get("restarted")}
    spoiled = spoiled_steps(deaths, starts, restarted)
    lost = {t["step"]: t["lost"] for t in ordered}
    return RunDeaths(spoiled, lost, death_summaries(deaths, spoiled, lost, start_ns))
