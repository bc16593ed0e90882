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


# The busiest few seconds of a step are judged as well as its mean: a burst of someone else's
# work at a system's edge (a test suite, a build, a cron job taking a core for 8 s) starts a
# queue the rest of the step cannot drain, while the step's mean stays a few percent.
WINDOW_SAMPLES = 5


@dataclass(frozen=True)
class HostLoad:
    """A step's host, as shares of the whole host (1.0 = every CPU busy): its means over the
    step, and the same over its busiest `WINDOW_SAMPLES` seconds (`peak_*`: the window whose
    others' share was highest while the host was busy; None: as the means)."""

    cpus: int
    busy_ratio: float  # every process, and steal: time the run could not have had
    others_ratio: float  # busy, less the run's processes and evbench itself
    steal_ratio: float
    samples: int
    peak_busy_ratio: float | None = None
    peak_others_ratio: float | None = None

    @property
    def peak(self) -> tuple[float, float]:
        """(busy, others) of the busiest seconds."""
        busy = self.busy_ratio if self.peak_busy_ratio is None else self.peak_busy_ratio
        others = self.others_ratio if self.peak_others_ratio is None else self.peak_others_ratio
        return busy, others

    def text(self) -> str:
        """`host 97% busy, 48% by processes outside the run, of 2 CPUs`: over its busiest
        seconds, with the step's mean where they differ (steal when any)."""
        busy, others = self.peak
        steal = f", steal {self.steal_ratio:.0%}" if self.steal_ratio >= 0.005 else ""
        where = ""
        if self.peak_others_ratio is not None and self.samples > WINDOW_SAMPLES:
            where = f" in its busiest {WINDOW_SAMPLES} s"
            if f"{others:.0%}" != f"{self.others_ratio:.0%}":
                where += f" ({self.others_ratio:.0%} over the step)"
        return (
            f"host {busy:.0%} busy, {others:.0%} by processes outside the run{where}{steal}, "
            f"of {self.cpus} CPUs"
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


def host_load(
    ticks: HostTicks | None, start_ns: int, end_ns: int, busy_floor: float = 0.9
) -> HostLoad | None:
    """The host's load over [start_ns, end_ns]: each sample covers the second before it (the
    sampler's tick), so the samples taken from a second after the start to half a second after
    the end: those at least half inside it; the one after covers the next step, or the drain,
    when a sender that exits takes its CPU out of the run's. None when there are none (no host
    samples, or a step shorter than a tick). The peak is the window of `WINDOW_SAMPLES`
    samples whose others' share was highest among those at least `busy_floor` busy (the host
    rule's: others on an idle host take nothing from the run), or of all if none was."""
    if ticks is None:
        return None
    tick_ns = 1_000_000_000
    last_ns = end_ns + tick_ns // 2
    chosen = [i for i, t in enumerate(ticks.t_ns) if start_ns + tick_ns <= t <= last_ns]
    if not chosen:
        return None
    cpus = max(ticks.cpus[i] for i in chosen)
    whole = 100.0 * cpus * len(chosen)
    busy = [min(1.0, ticks.busy_percent[i] / (100.0 * cpus)) for i in chosen]
    others = [
        min(1.0, max(0.0, ticks.busy_percent[i] - ticks.ours_percent[i]) / (100.0 * cpus))
        for i in chosen
    ]
    peak_busy, peak_others = _peak(busy, others, busy_floor)
    return HostLoad(
        cpus=cpus,
        busy_ratio=sum(busy) / len(busy),
        others_ratio=sum(others) / len(others),
        steal_ratio=min(1.0, sum(ticks.steal_percent[i] for i in chosen) / whole),
        samples=len(chosen),
        peak_busy_ratio=peak_busy,
        peak_others_ratio=peak_others,
    )


def _peak(busy: list[float], others: list[float], busy_floor: float) -> tuple[float, float]:
    """(busy, others) means of the window of `WINDOW_SAMPLES` samples (all, if fewer) with the
    highest others' share among those `busy_floor` busy, or among all if none is."""
    n = min(WINDOW_SAMPLES, len(busy))
    windows = [
        (sum(busy[i : i + n]) / n, sum(others[i : i + n]) / n) for i in range(len(busy) - n + 1)
    ]
    crowded = [w for w in windows if w[0] >= busy_floor] or windows
    return max(crowded, key=lambda w: w[1])
