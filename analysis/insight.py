"""What a run saw inside the system (docs/design.md §5, "Looking inside the system"): the Prometheus
samples scraped during it (samples/metrics/, contract.records.METRIC_SAMPLE_FIELDS) turned into
the series the report plots.

Pure functions on an Arrow table and lists, no Spark, on purpose: a run scrapes a few endpoints
about once a second, thousands of rows, which pyarrow reads and Python walks in milliseconds,
while one more Spark stage would cost the analysis seconds under its speed target (issue 27).

The rules:
- a counter (and a histogram's or summary's `_count` and `_sum`) is plotted as its per-second
  rate between consecutive scrapes (`per_second_rates`); gauges, untyped samples and a summary's
  quantiles as they were scraped; histogram buckets, `_created` stamps, info and stateset
  samples are not plotted (buckets would be dozens of lines per histogram, and the suite
  measures the latencies they approximate exactly);
- where scrapes were missed (an endpoint down), a line breaks instead of being drawn through
  time nobody saw, and no rate is averaged over the outage;
- what is plotted: the names `--plot-metric` matches (exactly or as a glob, on the family or the
  sample name), else every family whose name says consumed, dispatched, queue, lag or gc
  (`chosen_names`), within caps (`capped`) that the report states when they leave some out;
- the scraper's own `up` and `scrape_duration_seconds` for every endpoint that failed at least
  once, so a dead endpoint shows as its up=0 points.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from itertools import groupby, pairwise
from pathlib import Path
from statistics import median
from typing import Literal, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from contract.insight import GAUGES_THAT_COUNT, SCRAPE_DURATION_METRIC, UP_METRIC
from contract.records import METRIC_SAMPLE_FIELDS
from contract.units import NS_PER_S
from runtime.parquet import arrow_schema, check_parts

# The default choice: families whose names say how far behind the system is, how much it moved,
# or what its runtime's garbage collector did.
DEFAULT_PATTERN = re.compile(r"consumed|dispatched|queue|lag|gc", re.IGNORECASE)
SCRAPER_METRICS = (UP_METRIC, SCRAPE_DURATION_METRIC)
# A family's samples under other names, by family type (as the Prometheus text format names them).
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("_count", "_sum", "_created"),
    "info": ("_info",),
}

Plotted = Literal["rate", "value"]


def family_of(metric: str, kind: str) -> str:
    """The family a sample belongs to: `foo_total` of counter `foo`, `foo_bucket` of histogram
    `foo`; a gauge's sample is its family."""
    for suffix in _SUFFIXES.get(kind, ()):
        if metric.endswith(suffix) and len(metric) > len(suffix):
            return metric[: -len(suffix)]
    return metric


def plotted_as(metric: str, kind: str) -> Plotted | None:
    """How a sample is plotted: as a per-second rate, as its value, or not at all (None)."""
    if metric in SCRAPER_METRICS:
        return "value"
    if metric.endswith("_created"):  # when the series was created: a timestamp, not a quantity
        return None
    if kind == "counter":
        return "rate"
    if kind in ("histogram", "summary", "gaugehistogram"):
        if metric.endswith("_bucket"):
            return None
        # A histogram's or summary's _count and _sum only ever grow; a gauge histogram's _gcount
        # and _gsum and a summary's quantiles are values of the moment.
        grows = kind != "gaugehistogram" and metric.endswith(("_count", "_sum"))
        return "rate" if grows else "value"
    if kind in ("gauge", "unknown"):
        return "rate" if metric in GAUGES_THAT_COUNT else "value"
    return None  # info and stateset: labels naming a state, not a quantity over time


class Choice(NamedTuple):
    names: list[str]  # sample names to plot, sorted
    unmatched: list[str]  # --plot-metric patterns that matched nothing plotted


def chosen_names(names: Iterable[tuple[str, str]], patterns: Sequence[str]) -> Choice:
    """Of the (sample name, family type) pairs a run scraped, those to plot: the ones the
    `patterns` match (exactly or as a glob, on the family or the sample name), or without
    patterns the default families (DEFAULT_PATTERN). The scraper's own series are chosen only
    when asked for by name (the report adds them for failed endpoints anyway)."""
    plottable = sorted({(m, k) for m, k in names if plotted_as(m, k)})
    if not patterns:
        chosen = [
            m
            for m, k in plottable
            if m not in SCRAPER_METRICS and DEFAULT_PATTERN.search(family_of(m, k))
        ]
        return Choice(sorted(set(chosen)), [])
    matched: set[str] = set()
    unmatched = []
    for pattern in patterns:
        hits = {
            m
            for m, k in plottable
            if fnmatchcase(m, pattern) or fnmatchcase(family_of(m, k), pattern)
        }
        if not hits:
            unmatched.append(pattern)
        matched |= hits
    return Choice(sorted(matched), unmatched)


class Rates(NamedTuple):
    per_s: list[float | None]  # one per sample: the rate over the interval that ends there
    resets: int  # times the counter went down


def per_second_rates(
    t_ns: Sequence[int],
    values: Sequence[float],
    max_interval_ns: int | None = None,
    min_interval_ns: int = 0,
) -> Rates:
    """A counter's samples (in time order) as the per-second rate over each interval between
    consecutive scrapes, placed at the interval's end; the first sample has none.

    A counter that goes down was reset (its process restarted): when in the interval that
    happened is unknown, so the interval gets no rate (a gap in the line, never a negative
    rate), and the next interval starts afresh from the value after the reset. An interval
    without a finite value at both ends, without time between them, or longer than
    `max_interval_ns` (scrapes were missed: an average over an outage is no reading of any
    second) or shorter than `min_interval_ns` (two scrapes close together, as a session's
    last one can be: a counter that grows in batches would read as a spike) gets none
    either."""
    per_s: list[float | None] = [None] * len(values)
    resets = 0
    for i in range(1, len(values)):
        dt_ns = t_ns[i] - t_ns[i - 1]
        before, after = values[i - 1], values[i]
        if dt_ns <= 0 or not (math.isfinite(before) and math.isfinite(after)):
            continue
        if after < before:
            resets += 1
            continue
        if dt_ns < min_interval_ns:
            continue
        if max_interval_ns is None or dt_ns <= max_interval_ns:
            per_s[i] = (after - before) / (dt_ns / NS_PER_S)
    return Rates(per_s, resets)


# Samples of a series further apart than this many of its usual intervals (the median) are
# separated by missed scrapes: the line breaks there rather than draw through unseen time.
GAP_INTERVALS = 2.5
# Closer than this many usual intervals, two samples make no rate (see per_second_rates).
SHORT_INTERVALS = 0.5


def short_limit_ns(t_ns: Sequence[int]) -> int:
    """The shortest interval a rate is taken over (0: too few samples to say)."""
    intervals = [b - a for a, b in pairwise(t_ns) if b > a]
    return int(SHORT_INTERVALS * median(intervals)) if intervals else 0


def gap_limit_ns(t_ns: Sequence[int]) -> int | None:
    """The longest interval a series' line is drawn across (None: too few samples to say)."""
    intervals = [b - a for a, b in pairwise(t_ns) if b > a]
    return int(GAP_INTERVALS * median(intervals)) if intervals else None


def broken_at_gaps(
    t_ns: Sequence[int], values: Sequence[float | None], limit_ns: int | None
) -> tuple[list[int], list[float | None]]:
    """The samples with a point without a value amid every interval longer than `limit_ns`:
    Plotly breaks a line at a missing value."""
    times: list[int] = []
    shown: list[float | None] = []
    for i, (t, value) in enumerate(zip(t_ns, values, strict=True)):
        if i and limit_ns is not None and t - t_ns[i - 1] > limit_ns:
            times.append((t + t_ns[i - 1]) // 2)
            shown.append(None)
        times.append(t)
        shown.append(value)
    return times, shown


@dataclass(frozen=True)
class Series:
    """One line: a sample name at one endpoint with one label set, on the run's time axis."""

    name: str  # the sample name plotted (foo_total, foo_count, queue_depth)
    kind: str  # its family's type
    endpoint: str
    labels: str  # canonical `{a="x"}`, "" without labels
    plotted: Plotted
    seconds: list[float]  # since the schedule start
    values: list[float | None]  # rates per second, or the values
    resets: int = 0

    @property
    def peak(self) -> float:
        return max((abs(v) for v in self.values if v is not None), default=0.0)


def read_samples(directory: Path) -> pa.Table:
    """Every part file of samples/metrics/ (none: an empty table). Footers are checked first,
    so a damaged file is named (runtime.parquet.check_parts); the parts are then read as one
    dataset, on pyarrow's threads: a long run writes many small files."""
    schema = arrow_schema(METRIC_SAMPLE_FIELDS)
    paths = check_parts(directory, METRIC_SAMPLE_FIELDS) if directory.is_dir() else []
    if not paths:
        return schema.empty_table()
    return ds.dataset([str(p) for p in paths], schema=schema, format="parquet").to_table()


def distinct_names(table: pa.Table) -> list[tuple[str, str]]:
    """The (sample name, family type) pairs in the samples."""
    pairs = table.select(["metric", "kind"]).group_by(["metric", "kind"]).aggregate([])
    return list(zip(pairs["metric"].to_pylist(), pairs["kind"].to_pylist(), strict=True))


def series_of(
    table: pa.Table, names: Collection[str], start_ns: int, endpoints: Collection[str] = ()
) -> list[Series]:
    """The lines of the named samples (only at `endpoints`, when given), one per sample name,
    endpoint and label set, in that order."""
    wanted = pc.is_in(table["metric"], value_set=pa.array(sorted(names), pa.string()))
    if endpoints:
        at = pc.is_in(table["endpoint"], value_set=pa.array(sorted(endpoints), pa.string()))
        wanted = pc.and_(wanted, at)
    keys = ["metric", "endpoint", "labels", "kind"]
    rows = table.filter(wanted).sort_by([(k, "ascending") for k in (*keys, "t_ns")])
    columns = [rows[name].to_pylist() for name in (*keys, "t_ns", "value")]
    found = []
    for key, group in groupby(zip(*columns, strict=True), key=lambda row: row[:4]):
        samples = list(group)
        found.append(_series(key, [s[4] for s in samples], [s[5] for s in samples], start_ns))
    return found


def _series(
    key: tuple[str, str, str, str], t_ns: list[int], values: list[float], start_ns: int
) -> Series:
    metric, endpoint, labels, kind = key
    plotted = plotted_as(metric, kind) or "value"
    limit_ns = gap_limit_ns(t_ns)
    resets = 0
    shown: list[float | None]
    if plotted == "rate":
        shown, resets = per_second_rates(t_ns, values, limit_ns, short_limit_ns(t_ns))
    else:
        shown = [v if math.isfinite(v) else None for v in values]
    times, shown = broken_at_gaps(t_ns, shown, limit_ns)
    seconds = [(t - start_ns) / NS_PER_S for t in times]
    return Series(metric, kind, endpoint, labels, plotted, seconds, shown, resets)


@dataclass(frozen=True)
class Caps:
    plots: int
    lines_per_plot: int


# Readable without scrolling through pages of plots; a user who names metrics gets more room.
DEFAULT_CAPS = Caps(plots=8, lines_per_plot=8)
CHOSEN_CAPS = Caps(plots=30, lines_per_plot=20)


def within_plots(names: Sequence[str], caps: Caps) -> tuple[list[str], list[str]]:
    """The first names (one plot each) within `caps`, and what was left out, said. Applied
    before any series is built: an hour of a hundred metrics is a million rows."""
    left = list(names[caps.plots :])
    if not left:
        return list(names), []
    shown = ", ".join(left[:10]) + (", …" if len(left) > 10 else "")
    return list(names[: caps.plots]), [
        f"{len(left)} more metrics not plotted (at most {caps.plots} plots): {shown}; "
        "choose with --plot-metric NAME"
    ]


def capped(series: Sequence[Series], caps: Caps) -> tuple[list[list[Series]], list[str]]:
    """The lines grouped into plots (one per sample name, in name order), each within the
    caps' lines, and what was left out, said. A plot with too many lines keeps those with the
    highest peaks: of a hundred partitions' lag, the ones that fell behind."""
    plots: dict[str, list[Series]] = {}
    for line in series:
        plots.setdefault(line.name, []).append(line)
    kept, notes = [], []
    for name in sorted(plots):
        lines = plots[name]
        if len(lines) > caps.lines_per_plot:
            ranked = sorted(lines, key=lambda s: s.peak, reverse=True)
            top = {id(line) for line in ranked[: caps.lines_per_plot]}
            notes.append(
                f"{name}: {caps.lines_per_plot} of {len(lines)} lines shown, those with the "
                "highest peaks"
            )
            lines = [line for line in lines if id(line) in top]
        kept.append(lines)
    return kept, notes


def failed_endpoints(table: pa.Table) -> set[str]:
    """Endpoints with at least one failed scrape (an `up` sample of 0)."""
    down = table.filter(
        pc.and_(pc.equal(table["metric"], UP_METRIC), pc.equal(table["value"], 0.0))
    )
    return set(down["endpoint"].to_pylist())


@dataclass(frozen=True)
class SystemMetrics:
    plots: list[list[Series]]  # one list of lines per plot
    notes: list[str]  # what was left out, and why
    failed: list[str]  # endpoints with a failed scrape, whose `up` is plotted


def system_metrics(
    table: pa.Table, start_ns: int, patterns: Sequence[str], failed: Collection[str] = ()
) -> SystemMetrics:
    """What the report plots of the scraped samples: the chosen series within the caps, then
    `up` and `scrape_duration_seconds` of the endpoints that failed (those in the samples and
    those in `failed`), unless a pattern already chose them."""
    choice = chosen_names(distinct_names(table), patterns)
    caps = CHOSEN_CAPS if patterns else DEFAULT_CAPS
    names, left_out = within_plots(choice.names, caps)
    plots, notes = capped(series_of(table, names, start_ns), caps)
    notes += left_out
    notes += [f"--plot-metric {p} matched no plotted metric" for p in choice.unmatched]
    down = failed_endpoints(table) | set(failed)
    scraper = [m for m in SCRAPER_METRICS if m not in choice.names]
    if down and scraper:
        lines = series_of(table, scraper, start_ns, down)
        by_name = {name: list(group) for name, group in groupby(lines, key=lambda s: s.name)}
        plots += [by_name[name] for name in scraper if name in by_name]  # up first
    if not patterns and not choice.names:
        notes.append(
            "no scraped metric is named like consumed, dispatched, queue, lag or gc: choose "
            "some with --plot-metric NAME (a name or a glob such as 'kafka_*')"
        )
    return SystemMetrics(plots, notes, sorted(down))
