"""`evbench analyze`: a SUT directory's records -> analysis/{metrics.parquet, steps.csv,
digests.parquet, points.parquet, cumulative.parquet, summary.json}.

Reads (analysis.inputs, analysis.load), chains the transforms (analysis.transforms, whose step
stage applies analysis.steprule per step), writes; summary.json is the pure analysis.summary's.
Only aggregates reach the driver: per-second counts, per-step totals, per-step (compressed)
digests and the cumulative line's points.
"""

from __future__ import annotations

import csv
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.digests import cumulative_points, from_bytes, line_tasks
from analysis.export import export_knative
from analysis.inputs import (
    AnalyzeOptions,
    SutInputs,
    check_inputs,
    compacted,
    inputs_for,
    never_started,
    sut_dirs,
)
from analysis.load import load_records, with_run_columns
from analysis.steprule import StepTotals
from analysis.steps import POINTS_ARROW, StepContext, flat, merge_points, merge_seconds
from analysis.summary import Sketch, SutFindings, headline, strict_json, summary
from analysis.transforms import (
    counted,
    first_deliveries,
    join_deliveries,
    on_sender_clock,
    step_inputs,
    step_stats,
    with_rule_columns,
)
from contract.clocks import Correction, corrections_from, to_apply
from contract.documents import StepSummaryDoc, SummaryDoc
from contract.layout import SutDir
from contract.records import RECEIVED_FIELDS, SENT_FIELDS, Field

# What callers of the job (evbench analyze, the tests) take from here.
__all__ = [
    "AnalyzeOptions",
    "SutInputs",
    "analyze",
    "analyze_sut",
    "compacted",
    "from_steps",
    "inputs_for",
    "never_started",
    "strict_json",
    "sut_dirs",
]

# Points in the latency-points view per SUT; above it, time buckets keep each bucket's maxima.
POINTS_MAX = 100_000
# A row of an aggregate on the driver (a second's counts, a point of a line).
Row = dict[str, Any]


def analyze(
    spark: SparkSession,
    targets: Sequence[Path | SutInputs],
    opts: AnalyzeOptions,
    echo: Callable[[str], None] = lambda line: None,
) -> list[SummaryDoc]:
    """Analyse SUT directories together: one chain of Spark jobs for all of them. Reads, chains
    the transforms into per-SUT aggregates, then per SUT: a pure summary and its files."""
    # Inputs `evbench analyze` compacted while Spark started are taken as they are.
    checked = {
        f"s{i}": compacted(t if isinstance(t, SutInputs) else check_inputs(t))
        for i, t in enumerate(targets)
    }
    dirs = {key: inputs.path for key, inputs in checked.items()}
    measured_offsets = {key: corrections_from(i.run.get("clock")) for key, i in checked.items()}
    applied = {
        key: to_apply(offsets, opts.clock_correction) for key, offsets in measured_offsets.items()
    }
    sent = _load_all(spark, checked, "sent", SENT_FIELDS)
    received = _load_all(spark, checked, "received", RECEIVED_FIELDS)
    corrections = {(key, w): c for key, found in applied.items() for w, c in found.items()}
    found = _aggregate(spark, sent, received, opts, checked, corrections)
    summaries = []
    for key, path in dirs.items():
        doc = summary(
            checked[key], opts, found.findings(key), (measured_offsets[key], applied[key])
        )
        _write_sut(SutDir(path), key, found, doc)
        echo(headline(doc))
        summaries.append(doc)
    return summaries


@dataclass
class _Aggregates:
    """What the chain leaves on the driver, keyed by SUT key (`s0`, `s1`, ...): aggregates
    only, never raw events."""

    metrics: dict[str, list[Row]]  # per second
    totals: dict[str, list[StepTotals]]  # per step
    step_sketch: dict[tuple[str, str, int], Sketch]  # (sut, metric, step) -> (digest, top values)
    cumulative: dict[str, list[Row]]
    e2e_points: dict[str, list[Row]]
    foreign_counts: dict[str, int]
    points: dict[str, pa.Table]  # bucketed events per SUT for the latency scatter

    def findings(self, key: str) -> SutFindings:
        """What the summary of SUT `key` reads."""
        return SutFindings(
            totals=self.totals.get(key, []),
            foreign=self.foreign_counts.get(key, 0),
            sketches={(m, st): d for (k, m, st), d in self.step_sketch.items() if k == key},
            e2e_points=self.e2e_points.get(key, []),
        )


def _aggregate(
    spark: SparkSession,
    sent: DataFrame,
    received: DataFrame,
    opts: AnalyzeOptions,
    checked: dict[str, SutInputs],
    corrections: dict[tuple[str, int], Correction],
) -> _Aggregates:
    """The chain of transforms. The events cross to Python once, grouped by (sut, step), and come
    back as each step's aggregates and digests (analysis.steps): one Spark job. The per-second
    digests are written by the executors that made them (never through the JVM or the driver);
    the driver folds the cumulative lines from them, a step's file at a time."""
    # Every sent event (warmup too) meets the deliveries in one full join: foreign ids fall out.
    joined = join_deliveries(sent, first_deliveries(received))
    # Received stamps onto the sender's clock first: every figure after uses them.
    rows = on_sender_clock(counted(joined, opts.trim_s), corrections)
    dirs = {key: inputs.path for key, inputs in checked.items()}
    staging = Path(tempfile.mkdtemp(prefix=".evbench-digests-", dir=next(iter(dirs.values()))))
    try:
        context = StepContext(
            start_ns={key: inputs.start_ns for key, inputs in checked.items()},
            bucket_ns={key: _bucket_ns(inputs) for key, inputs in checked.items()},
            staging=str(staging),
        )
        # One job: the step stage's rows are what the driver needs (a few per step); the
        # per-second digests are in `staging`.
        found = from_steps(step_stats(step_inputs(rows), context).toArrow(), context.start_ns)
        order = {key: [t["step"] for t in steps] for key, steps in found.totals.items()}
        step_digest = {key: digest for key, (digest, _) in found.step_sketch.items()}
        pieces = line_tasks(step_digest, order, str(staging))
        found.cumulative = _by_sut(cumulative_points(pieces))
        _move_digests(staging, dirs)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if opts.export_knative:
        events = with_rule_columns(rows.where(F.col("is_sent").isNotNull()), ("sut", "seq"))
        export_knative(events, dirs)
    return found


def from_steps(head: pa.Table, start_ns: Mapping[str, int]) -> _Aggregates:
    """The step rows and step digests of `step_stats` into per-SUT aggregates: per-second
    counts and point buckets merged across steps (analysis.steps)."""
    step_sketch: dict[tuple[str, str, int], Sketch] = {}
    totals: dict[str, list[StepTotals]] = {}
    seconds: dict[str, list[Row]] = {}
    points: dict[str, list[pa.Table]] = {}
    foreign: dict[str, int] = {}
    medians = head.filter(pc.is_valid(head.column("second")))
    e2e_points = _by_sut(medians.select(["sut", "step", "second", "p50_ms"]).to_pylist())
    head = head.filter(pc.is_null(head.column("second")))
    digests = head.filter(pc.is_valid(head.column("metric")))
    for sut, metric, step, data, top in zip(
        *(digests.column(n).to_pylist() for n in ("sut", "metric", "step", "digest", "top_ms")),
        strict=True,
    ):
        step_sketch[(sut, metric, step)] = (from_bytes(data), np.asarray(top, dtype=float))
    steps = head.filter(pc.is_null(head.column("metric")))
    for i in range(steps.num_rows):
        sut, step = steps.column("sut")[i].as_py(), steps.column("step")[i].as_py()
        if step is None:
            foreign[sut] = steps.column("foreign")[i].as_py()
            continue
        totals.setdefault(sut, []).append(steps.column("totals")[i].as_py())
        seconds.setdefault(sut, []).extend(steps.column("seconds")[i].as_py())
        points.setdefault(sut, []).append(flat(steps.column("points").slice(i, 1)))
    return _Aggregates(
        metrics={sut: merge_seconds(parts, start_ns[sut]) for sut, parts in seconds.items()},
        totals={sut: sorted(rows, key=lambda t: t["step"]) for sut, rows in totals.items()},
        step_sketch=step_sketch,
        cumulative={},
        e2e_points=e2e_points,
        foreign_counts=foreign,
        points={sut: merge_points(pa.concat_tables(parts)) for sut, parts in points.items()},
    )


def _write_sut(out: SutDir, key: str, found: _Aggregates, summary: SummaryDoc) -> None:
    """One SUT's analysis files (its digests were moved into place by `_move_digests`)."""
    out.analysis.mkdir(exist_ok=True)
    _write_table(out.metrics_parquet, found.metrics.get(key, []))
    pq.write_table(found.points.get(key, POINTS_ARROW.empty_table()), out.points_parquet)
    cumulative = sorted(found.cumulative.get(key, []), key=lambda r: (r["metric"], r["second"]))
    _write_table(out.cumulative_parquet, cumulative)
    _write_steps_csv(out.steps_csv, summary["steps"])
    out.summary_json.write_text(strict_json(summary) + "\n")


def analyze_sut(
    spark: SparkSession,
    sut_dir: Path,
    opts: AnalyzeOptions,
    echo: Callable[[str], None] = lambda line: None,
) -> SummaryDoc:
    return analyze(spark, [sut_dir], opts, echo)[0]


def _bucket_ns(inputs: SutInputs) -> int:
    """Time-bucket width that gives a run at most POINTS_MAX buckets for the points view: its
    schedule, from the start to the last slot in sent/ (from the part files' footers)."""
    span_ns = max(0, (inputs.last_intended_ns or inputs.start_ns) - inputs.start_ns)
    return max(1, -(-span_ns // POINTS_MAX))


def _load_all(
    spark: SparkSession, checked: dict[str, SutInputs], name: str, fields: Sequence[Field]
) -> DataFrame:
    """One record directory of every SUT, tagged with its SUT key and schedule start."""
    return _union(
        with_run_columns(
            load_records(spark, inputs.path / name, fields, inputs.readable(name)),
            key,
            inputs.start_ns,
        )
        for key, inputs in checked.items()
    )


def _union(frames: Iterable[DataFrame]) -> DataFrame:
    return reduce(lambda a, b: a.unionByName(b), frames)


def _by_sut(rows: Iterable[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row.pop("sut"), []).append(row)
    return grouped


def _write_table(path: Path, rows: list[Row]) -> None:
    pq.write_table(pa.Table.from_pylist(rows), path)


def _move_digests(staging: Path, dirs: dict[str, Path]) -> None:
    """Each SUT's per-second digests, written by the step stage, into its digests.parquet."""
    for key, path in dirs.items():
        target = SutDir(path).digests_parquet
        target.parent.mkdir(exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        source = staging / "digests" / f"sut={key}"
        if source.exists():
            shutil.move(str(source), target)


def _write_steps_csv(path: Path, steps: list[StepSummaryDoc]) -> None:
    columns = [k for k in steps[0] if k != "reasons"] + ["reasons"] if steps else []
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for step in steps:
            writer.writerow({**step, "reasons": "; ".join(step["reasons"])})
