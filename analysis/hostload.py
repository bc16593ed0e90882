"""The host's load over a step (pure): how busy the machine was, and how much of that was not
the run's own processes (docs/definitions.md: host saturated).

evbench puts the instruments, and in the lab the system too, on one host by design, and
samples each of the run's processes every second (evbench.samples); beside them, in the same
tick, the host as a whole (`samples/host-*.parquet`). What the host used beyond the run's
processes (and the evbench process conducting it) is somebody else's: another heavy process on
the same cores starves the instruments and the system alike, and a step that falls short then
says nothing about the system's capacity. The rule that reads these figures is the step rule's
(analysis.verdicts.saturation); this module only measures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Row = Mapping[str, Any]


@dataclass(frozen=True)
class HostLoad:
    """Means over a step's samples, as shares of the whole host (1.0 = every CPU busy)."""

    cpus: int
    busy_ratio: float  # every process, and steal: time the run could not have had
    others_ratio: float  # busy, less the run's processes and evbench itself
    steal_ratio: float
    samples: int

    def text(self) -> str:
        """`host 97% busy, 48% by processes outside the run, of 2 CPUs` (steal when any)."""
        steal = f", steal {self.steal_ratio:.0%}" if self.steal_ratio >= 0.005 else ""
        return (
            f"host {self.busy_ratio:.0%} busy, {self.others_ratio:.0%} by processes outside "
            f"the run{steal}, of {self.cpus} CPUs"
        )


@dataclass(frozen=True)
class HostTicks:
    """A run's host samples, each with what the run's own processes used in the same tick
    (`ours_percent`: the processes sampled then, and evbench itself), in time order."""

    t_ns: Sequence[int]
    cpus: Sequence[int]
    busy_percent: Sequence[float]
    steal_percent: Sequence[float]
    ours_percent: Sequence[float]


def host_ticks(host_rows: Iterable[Row], process_rows: Iterable[Row]) -> HostTicks | None:
    """The host samples (contract.records.HOST_SAMPLE_FIELDS) met with the process samples of
    the same ticks (PROCESS_SAMPLE_FIELDS: the sampler stamps one tick's rows alike); None for
    a run recorded without host samples."""
    ours: dict[int, float] = {}
    for row in process_rows:
        ours[row["t_ns"]] = ours.get(row["t_ns"], 0.0) + float(row["cpu_percent"])
    rows = sorted(host_rows, key=lambda r: r["t_ns"])
    if not rows:
        return None
    return HostTicks(
        t_ns=[r["t_ns"] for r in rows],
        cpus=[r["cpus"] for r in rows],
        busy_percent=[float(r["busy_percent"]) for r in rows],
        steal_percent=[float(r["steal_percent"]) for r in rows],
        ours_percent=[ours.get(r["t_ns"], 0.0) + float(r["evbench_percent"]) for r in rows],
    )


def host_load(ticks: HostTicks | None, start_ns: int, end_ns: int) -> HostLoad | None:
    """The host's load over [start_ns, end_ns]: each sample covers the second before it (the
    sampler's tick), so the samples taken from a second after the start to half a second after
    the end: those at least half inside it; the one after covers the next step, or the drain,
    when a sender that exits takes its CPU out of the run's. None when there are none (no host
    samples, or a step shorter than a tick)."""
    if ticks is None:
        return None
    tick_ns = 1_000_000_000
    last_ns = end_ns + tick_ns // 2
    chosen = [i for i, t in enumerate(ticks.t_ns) if start_ns + tick_ns <= t <= last_ns]
    if not chosen:
        return None
    cpus = max(ticks.cpus[i] for i in chosen)
    whole = 100.0 * cpus * len(chosen)
    busy = sum(ticks.busy_percent[i] for i in chosen)
    others = sum(max(0.0, ticks.busy_percent[i] - ticks.ours_percent[i]) for i in chosen)
    return HostLoad(
        cpus=cpus,
        busy_ratio=min(1.0, busy / whole),
        others_ratio=min(1.0, others / whole),
        steal_ratio=min(1.0, sum(ticks.steal_percent[i] for i in chosen) / whole),
        samples=len(chosen),
    )
