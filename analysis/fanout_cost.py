"""What a fan-out costs (`--subscribers 1,10,50`, issue 38): per system, against N, its capacity
and what its own processes spent on it. Pure, but for the page's figure.

A system's cost grows with its subscribers because it delivers each event once per subscriber
(seed 003 sizes the Kafka dispatcher by exactly that). So besides the rate it sustains, each N
gets its processes' CPU per 1,000 deliveries, which stays flat while the cost is per delivery
and rises where N itself costs (a lane per subscriber, a filter per trigger). It also gets each
process's mean CPU over the run and its peak RSS. Only the system's processes count, not the
instruments: the sender and the receiver are the lab's, whatever N is.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.fanout import summary_fanout
from analysis.repeats import shown_name
from contract.summarydocs import SummaryDoc
from contract.units import NS_PER_S

# The instruments' roles in the process samples (evbench.session, evbench.follow): never the
# system's cost.
_INSTRUMENT_PREFIXES = ("sender", "receiver", "fleet-worker")


@dataclass(frozen=True)
class ProcessCost:
    """One of the system's processes (a role; its pid may change across restarts)."""

    cpu_s: float  # CPU over the samples, in core-seconds
    cpu_mean_percent: float  # cpu_s over the samples' span (100 = one core)
    rss_peak_bytes: int


@dataclass(frozen=True)
class CostRow:
    """A system at one fan-out."""

    sut: str
    shown: str  # as the index names it (analysis.repeats.shown_name): its repeat, if any
    fanout: int
    takers: int  # of the fanout, those that take the run's events
    capacity_per_s: int | None  # the search's answer, or the run's max sustainable rate
    deliveries: int  # every delivery the receiver got, to every subscriber
    processes: dict[str, ProcessCost]  # by role

    def cpu_s_per_1k(self, role: str) -> float | None:
        """`role`'s CPU per 1,000 deliveries (None: nothing delivered)."""
        if not self.deliveries:
            return None
        return self.processes[role].cpu_s * 1000 / self.deliveries


def deliveries(summary: SummaryDoc) -> int:
    """Every delivery received, duplicates included: each subscriber's, or the one's."""
    if subscribers := summary.get("subscribers"):
        return sum(s["counts"]["delivered"] + s["counts"]["duplicates"] for s in subscribers)
    return summary["counts"]["received"] + summary["counts"]["duplicates"]


def takers(summary: SummaryDoc) -> int:
    """The subscribers that take the run's events (a broker's matching triggers)."""
    if subscribers := summary.get("subscribers"):
        return sum(s["matches"] for s in subscribers)
    return 1


def capacity(summary: SummaryDoc) -> tuple[int | None, bool]:
    """(the rate the system sustained, whether a search found it)."""
    if search := summary.get("search"):
        result = search["result"]
        return (None if result is None else result["max_sustainable_per_s"]), True
    rate = summary["max_sustainable_rate_per_s"]
    return (None if rate is None else int(rate)), False


def process_costs(
    samples: Sequence[Mapping[str, Any]], from_ns: int | None = None
) -> dict[str, ProcessCost]:
    """Each system process's CPU and peak RSS from its samples (contract.records'
    PROCESS_SAMPLE_FIELDS: `cpu_percent` is since the previous sample, so a role's first
    sample opens its span and adds nothing), from `from_ns` on: the schedule's start, so that
    starting the system (joining N consumer groups) is not spread over the deliveries."""
    by_role: dict[str, list[Mapping[str, Any]]] = {}
    for row in samples:
        if from_ns is not None and row["t_ns"] < from_ns:
            continue
        if not row["process"].startswith(_INSTRUMENT_PREFIXES):
            by_role.setdefault(row["process"], []).append(row)
    costs = {}
    for role, rows in sorted(by_role.items()):
        rows.sort(key=lambda r: r["t_ns"])
        cpu_s = sum(
            r["cpu_percent"] / 100 * (r["t_ns"] - before["t_ns"]) / NS_PER_S
            for before, r in itertools.pairwise(rows)
        )
        span_s = (rows[-1]["t_ns"] - rows[0]["t_ns"]) / NS_PER_S
        costs[role] = ProcessCost(
            cpu_s=cpu_s,
            cpu_mean_percent=100 * cpu_s / span_s if span_s > 0 else 0.0,
            rss_peak_bytes=max(r["rss_bytes"] for r in rows),
        )
    return costs


def fanned_systems(summaries: Sequence[SummaryDoc]) -> set[str]:
    """The systems measured at more than one fan-out: those the index draws a cost for."""
    seen: dict[str, set[int]] = {}
    for summary in summaries:
        seen.setdefault(summary["sut"], set()).add(summary_fanout(summary))
    return {sut for sut, fanouts in seen.items() if len(fanouts) > 1}


def cost_row(
    summary: SummaryDoc, samples: Sequence[Mapping[str, Any]], from_ns: int | None = None
) -> CostRow:
    rate, _ = capacity(summary)
    return CostRow(
        sut=summary["sut"],
        shown=shown_name(summary),
        fanout=summary_fanout(summary),
        takers=takers(summary),
        capacity_per_s=rate,
        deliveries=deliveries(summary),
        processes=process_costs(samples, from_ns),
    )


def cost_lines(row: CostRow) -> list[str]:
    """A row as the page's table cells: N, capacity, deliveries, then per process."""
    rate = "none held" if row.capacity_per_s is None else f"{row.capacity_per_s:,}/s"
    if row.capacity_per_s is not None and row.takers > 1:
        rate += f" ({row.capacity_per_s * row.takers:,} deliveries/s)"
    per_process = "; ".join(
        f"{role}: {_per_1k(row.cpu_s_per_1k(role))} CPU s per 1,000 deliveries, mean "
        f"{cost.cpu_mean_percent:.0f} % of a core, peak RSS {cost.rss_peak_bytes / 2**20:.1f} MiB"
        for role, cost in row.processes.items()
    )
    return [row.shown, str(row.fanout), rate, f"{row.deliveries:,}", per_process or "not sampled"]


def _per_1k(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def cost_figure(rows: Sequence[CostRow]) -> Any:
    """Capacity, CPU per 1,000 deliveries and peak RSS against N: a line per system (and per
    system process), its points in order of N."""
    from plotly.subplots import make_subplots

    figure = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
        subplot_titles=(
            "sustained rate (events/s)", "CPU s per 1,000 deliveries", "peak RSS (MiB)",
        ),
    )  # fmt: skip
    for sut in sorted({r.sut for r in rows}):
        mine = [r for r in rows if r.sut == sut]
        line = dict(mode="lines+markers", col=1)
        figure.add_scatter(**_by_n(mine, lambda r: r.capacity_per_s), name=sut, row=1, **line)
        for role in sorted({role for r in mine for role in r.processes}):
            have = [r for r in mine if role in r.processes]
            name = f"{sut} {role}"
            figure.add_scatter(
                **_by_n(have, _cpu_per_1k(role)), name=name, row=2,
                legendgroup=name, **line,
            )  # fmt: skip
            figure.add_scatter(
                **_by_n(have, _rss_peak_mib(role)),
                name=name, row=3, legendgroup=name, showlegend=False, **line,
            )  # fmt: skip
    figure.update_xaxes(title_text="subscribers (N)", type="log", row=3, col=1)
    figure.update_layout(height=720, title="The cost of fan-out")
    return figure


def _by_n(rows: Sequence[CostRow], value: Callable[[CostRow], float | None]) -> dict[str, list]:
    """A line's points in order of N: each N's value, the middle one of its repeats'."""
    by_n: dict[int, list[float]] = {}
    for row in rows:
        if (found := value(row)) is not None:
            by_n.setdefault(row.fanout, []).append(found)
    ns = sorted(by_n)
    return {"x": ns, "y": [statistics.median_low(sorted(by_n[n])) for n in ns]}


def _cpu_per_1k(role: str) -> Callable[[CostRow], float | None]:
    return lambda row: row.cpu_s_per_1k(role)


def _rss_peak_mib(role: str) -> Callable[[CostRow], float | None]:
    return lambda row: row.processes[role].rss_peak_bytes / 2**20
