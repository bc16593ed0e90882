"""`evbench analyze`: a SUT directory's records -> analysis/{metrics.parquet, steps.csv,
digests.parquet, points.parquet, cumulative.parquet, summary.json}.

Checks and compacts the inputs (analysis.inputs, analysis.compact), plans a task per system and
step (analysis.tasks), runs them in one Spark job, folds what they return on the driver, writes;
summary.json is the pure analysis.summary's. Only aggregates reach the driver: per-second
counts, per-step totals, per-step (compressed) digests and the cumulative line's points.
"""

from __future__ import annotations

import csv
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fastdigest import TDigest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from analysis.compact import Copy
from analysis.digests import cumulative_points, from_bytes, line_tasks, merged, merged_top
from analysis.export import export_knative
from analysis.fanout import fanout_of
from analysis.fanout_summary import subscriber_docs
from analysis.hdr import HDR_ROWS
from analysis.hdr_export import Written, export_hdr
from analysis.inputs import (
    AnalyzeOptions,
    SutInputs,
    check_inputs,
    compacted,
    inputs_for,
    never_started,
    sut_dirs,
)
from analysis.objectives import applied_objectives
from analysis.objectives import judge as judge_objectives
from analysis.spectrum import spectrum_doc
from analysis.stepjudge import Sketch
from analysis.steprule import StepTotals, merged_totals
from analysis.steps import (
    POINTS_ARROW,
    STEP_ARROW,
    StepContext,
    e2e_seconds,
    flat,
    merge_points,
    merge_seconds,
)
from analysis.summary import SutFindings, headline, strict_json, summary
from analysis.tasks import RULE_EVENTS_ARROW, StepTask, binned, hdr_rows, plan, rule_events, run
from analysis.unrecorded import own_ids, run_tags
from contract.layout import SutDir
from contract.summarydocs import StepSummaryDoc, SummaryDoc
from contract.units import NS_PER_S
from runtime.clocks import Correction, corrections_from, to_apply
from runtime.files import write_text_atomically

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

STEP_SCHEMA = from_arrow_schema(STEP_ARROW)
# Points in the latency-points view per SUT; above it, time buckets keep each bucket's maxima.
POINTS_MAX = 100_000
# A row of an aggregate on the driver (a second's counts, a point of a line).
Row = dict[str, Any]
# The counts a task's row of deliveries that met no sent event carries (analysis.steps).
_UNMET = ("foreign", "strays", "unrecorded")


def analyze(
    spark: SparkSession,
    targets: Sequence[Path | SutInputs],
    opts: AnalyzeOptions,
    echo: Callable[[str], None] = lambda line: None,
) -> list[SummaryDoc]:
    """Analyse SUT directories together: one Spark job for all of them, its tasks' rows folded
    into per-SUT aggregates, then per SUT: a pure summary and its files."""
    # Inputs `evbench analyze` compacted while Spark started are taken as they are.
    checked = {
        f"s{i}": compacted(t if isinstance(t, SutInputs) else check_inputs(t), opts.slice_events)
        for i, t in enumerate(targets)
    }
    dirs = {key: inputs.path for key, inputs in checked.items()}
    measured_offsets = {key: corrections_from(i.run.get("clock")) for key, i in checked.items()}
    applied = {
        key: to_apply(offsets, opts.clock_correction) for key, offsets in measured_offsets.items()
    }
    found = _aggregate(spark, opts, checked, applied)
    summaries = []
    for key, path in dirs.items():
        doc = summary(
            checked[key], opts, found.findings(key), (measured_offsets[key], applied[key])
        )
        doc["spectrum"] = spectrum_doc(found.findings(key).sketches)
        if fanout := fanout_of(checked[key].run):
            doc["subscribers"] = subscriber_docs(
                fanout, found.findings(key), doc, opts.thresholds, checked[key].host
            )
        objectives, source = applied_objectives(opts.objectives, checked[key].run)
        if source is not None:
            doc["objectives"] = judge_objectives(objectives, doc)
            doc["objectives_from"] = source
        if ignored := checked[key].ignored:  # copies of record files read once
            doc["ignored_files"] = list(ignored)
        _write_sut(SutDir(path), key, found, doc)
        for said in ignored:
            echo(f"{doc['sut']}: {said}")
        echo(headline(doc))
        if key in found.hdr_logs:
            for line in found.hdr_logs[key].lines():
                echo(f"  -> {line}")
        summaries.append(doc)
    return summaries


@dataclass
class _Aggregates:
    """What the job leaves on the driver, keyed by SUT key (`s0`, `s1`, ...): aggregates
    only, never raw events."""

    metrics: dict[str, list[Row]]  # per second
    totals: dict[str, list[StepTotals]]  # per step
    step_sketch: dict[tuple[str, str, int], Sketch]  # (sut, metric, step) -> (digest, top values)
    slice_digest: dict[tuple[str, str, int, int], TDigest]  # (sut, metric, step, slice)
    slice_order: dict[str, list[tuple[int, int]]]  # each SUT's (step, slice) in time order
    cumulative: dict[str, list[Row]]
    e2e_points: dict[str, list[Row]]
    foreign_counts: dict[str, int]
    points: dict[str, pa.Table]  # bucketed events per SUT for the latency scatter
    # A fan-out's: each subscriber's totals per step, by SUT key and subscriber number.
    subscriber_totals: dict[str, dict[int, list[StepTotals]]] = field(default_factory=dict)
    stray_counts: dict[str, int] = field(default_factory=dict)  # to no subscriber's path
    # the run's own ids never sent: their records died with their sender (analysis.unrecorded)
    unrecorded_counts: dict[str, int] = field(default_factory=dict)
    hdr_logs: dict[str, Written] = field(default_factory=dict)  # --export-hdr: where they went

    def findings(self, key: str) -> SutFindings:
        """What the summary of SUT `key` reads."""
        return SutFindings(
            totals=self.totals.get(key, []),
            foreign=self.foreign_counts.get(key, 0),
            sketches={(m, st): d for (k, m, st), d in self.step_sketch.items() if k == key},
            e2e_points=self.e2e_points.get(key, []),
            seconds=self.metrics.get(key, []),
            subscriber_totals=self.subscriber_totals.get(key, {}),
            strays=self.stray_counts.get(key, 0),
            unrecorded=self.unrecorded_counts.get(key, 0),
        )


def _aggregate(
    spark: SparkSession,
    opts: AnalyzeOptions,
    checked: dict[str, SutInputs],
    corrections: dict[str, dict[int, Correction]],
) -> _Aggregates:
    """One Spark job: a partition per bin of tasks (analysis.tasks: a system's step, read from
    its compacted records), each task returning its step's aggregates and digests
    (analysis.steps). The per-second digests are written by the executors that made them
    (never through the JVM or the driver); the driver folds the cumulative lines from them, a
    step's file at a time."""
    dirs = {key: inputs.path for key, inputs in checked.items()}
    staging = Path(tempfile.mkdtemp(prefix=".evbench-digests-", dir=next(iter(dirs.values()))))
    try:
        context = StepContext(
            start_ns={key: inputs.start_ns for key, inputs in checked.items()},
            bucket_ns={key: _bucket_ns(inputs) for key, inputs in checked.items()},
            staging=str(staging),
            trim_ns=int(opts.trim_s * NS_PER_S),
            corrections=corrections,
            fanout={key: fans for key, i in checked.items() if (fans := fanout_of(i.run))},
            own_ids={key: own for key, i in checked.items() if (own := _own_ids(i))},
        )
        tasks = plan({key: _copies(inputs) for key, inputs in checked.items()})
        with _without_codegen(spark):
            head = _each_task(spark, tasks, context).toArrow()
        kept = {(t.sut, step): t.top_k for t in tasks for step in t.steps}
        found = from_steps(head, context.start_ns, kept)
        pieces = line_tasks(found.slice_digest, found.slice_order, str(staging))
        found.cumulative = _by_sut(cumulative_points(pieces))
        _move_digests(staging, dirs)
        if opts.export_knative:
            export_knative(_task_events(spark, tasks, context), dirs)
        if opts.export_hdr:
            intervals = _binned(
                spark, tasks, lambda task: hdr_rows(task, context), from_arrow_schema(HDR_ROWS)
            )
            # Every measured step's logs (step 0 is the warmup, which no figure counts).
            steps = {
                key: {s for t in tasks if t.sut == key for s in t.steps if s > 0} for key in dirs
            }
            found.hdr_logs = export_hdr(intervals, dirs, context.start_ns, steps)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return found


def _copies(inputs: SutInputs) -> tuple[Copy, Copy]:
    if inputs.sent_copy is None or inputs.received_copy is None:
        raise ValueError(f"{inputs.path}: analysed before its records were compacted")
    return inputs.sent_copy, inputs.received_copy


def _each_task(spark: SparkSession, tasks: list[StepTask], context: StepContext) -> DataFrame:
    """The tasks' STEP_ARROW rows, from a few partitions that each run a bin of tasks."""
    return _binned(spark, tasks, lambda task: run(task, context), STEP_SCHEMA)


def _task_events(spark: SparkSession, tasks: list[StepTask], context: StepContext) -> DataFrame:
    """Every measured event with its outcomes and latencies, for the 2019 export, which plots
    every event (analysis.tasks.rule_events): still on the executors, never on the driver."""
    schema = from_arrow_schema(RULE_EVENTS_ARROW)
    return _binned(spark, tasks, lambda task: rule_events(task, context), schema)


def _binned(
    spark: SparkSession,
    tasks: list[StepTask],
    work: Callable[[StepTask], pa.Table],
    schema: StructType,
) -> DataFrame:
    """`work`'s tables for every task: a partition per bin of tasks (analysis.tasks.binned)."""
    bins = binned(tasks, _slots(spark, len(tasks)))

    def each(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for number in batch.column(0).to_pylist():
                for task in bins[number]:
                    yield from work(task).to_batches()

    return spark.range(0, len(bins), 1, len(bins)).mapInArrow(each, schema)


@contextmanager
def _without_codegen(spark: SparkSession) -> Iterator[None]:
    """Whole-stage code generation off while the tasks run: their plan is a range of a few
    numbers into Python, and compiling its Java took 0.2 s of each analysis (measured, first
    job of a session)."""
    key = "spark.sql.codegen.wholeStage"
    before = spark.conf.get(key) or "true"
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        spark.conf.set(key, before)


def _slots(spark: SparkSession, tasks: int) -> int:
    """How many tasks run at once: locally, this machine's cores (Spark pays ~70 ms per Python
    task, so a few bins per core beat a partition per step); on a cluster, whose executors may
    not have registered yet when the first job starts, `spark.default.parallelism` where it is
    set, else as many as there are tasks. Spark Connect does not say which it is: as many as
    there are tasks."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext on this side
        return max(tasks, 1)
    if (context.master or "").startswith("local"):
        return int(context.defaultParallelism)
    return int(context.getConf().get("spark.default.parallelism", str(max(tasks, 1))))


def from_steps(
    head: pa.Table, start_ns: Mapping[str, int], top_k: Mapping[tuple[str, int], int] | None = None
) -> _Aggregates:
    """The tasks' slice rows and slice digests (analysis.tasks.run) into per-SUT aggregates:
    each step's totals, digests and exact top values (its `top_k` largest, as its tasks kept;
    all its slices kept where not given) merged from its slices', per-second counts and point
    buckets merged across slices and steps (analysis.steps)."""
    totals: dict[tuple[str, int], list[StepTotals]] = {}
    seconds: dict[str, list[Row]] = {}
    points: dict[str, list[pa.Table]] = {}
    unmet: dict[str, dict[str, int]] = {}  # UNMET's counts, each by SUT
    order: dict[str, list[tuple[int, int]]] = {}
    # Each kind of row takes only its columns before it is filtered: the step rows' lists
    # (seconds, points) are most of the table, and a filter copies every column it keeps.
    per_second = pc.is_valid(head.column("second"))
    e2e_points = _by_sut(e2e_seconds(head, per_second))
    has_metric = pc.is_valid(head.column("metric"))
    step_rows = pc.and_(pc.invert(per_second), pc.invert(has_metric))
    columns = [
        "sut", "step", "slice", "totals", "seconds", "points", "subscribers", *_UNMET
    ]  # fmt: skip
    steps = head.select(columns).filter(step_rows)
    theirs: dict[tuple[str, int, int], list[StepTotals]] = {}
    names, numbers = steps.column("sut").to_pylist(), steps.column("step").to_pylist()
    parts = steps.column("slice").to_pylist()
    for i, (sut, step, part) in enumerate(zip(names, numbers, parts, strict=True)):
        if step is None:  # each task's counts of its deliveries never sent or astray
            for name in _UNMET:
                held = unmet.setdefault(name, {})
                held[sut] = held.get(sut, 0) + (steps.column(name)[i].as_py() or 0)
            continue
        order.setdefault(sut, []).append((step, part))
        totals.setdefault((sut, step), []).append(_totals(steps.column("totals")[i].as_py()))
        for mine in steps.column("subscribers")[i].as_py() or ():
            theirs.setdefault((sut, mine["number"], step), []).append(_totals(mine["totals"]))
        seconds.setdefault(sut, []).extend(steps.column("seconds")[i].as_py())
        points.setdefault(sut, []).append(flat(steps.column("points").slice(i, 1)))
    by_sut: dict[str, list[StepTotals]] = {}
    for (sut, _), rows in sorted(totals.items()):
        by_sut.setdefault(sut, []).append(merged_totals(rows))
    by_subscriber: dict[str, dict[int, list[StepTotals]]] = {}
    for (sut, number, _), rows in sorted(theirs.items()):
        by_subscriber.setdefault(sut, {}).setdefault(number, []).append(merged_totals(rows))
    digests = head.filter(pc.and_(pc.invert(per_second), has_metric))
    step_sketch, slice_digest = _sketches(digests, top_k or {})
    return _Aggregates(
        metrics={sut: merge_seconds(rows, start_ns[sut]) for sut, rows in seconds.items()},
        totals=by_sut,
        step_sketch=step_sketch,
        slice_digest=slice_digest,
        slice_order={sut: sorted(keys) for sut, keys in order.items()},
        cumulative={},
        e2e_points=e2e_points,
        foreign_counts=unmet.get("foreign", {}),
        unrecorded_counts=unmet.get("unrecorded", {}),
        points={sut: merge_points(pa.concat_tables(rows)) for sut, rows in points.items()},
        subscriber_totals=by_subscriber,
        stray_counts=unmet.get("strays", {}),
    )


def _sketches(
    digests: pa.Table, top_k: Mapping[tuple[str, int], int]
) -> tuple[dict[tuple[str, str, int], Sketch], dict[tuple[str, str, int, int], TDigest]]:
    """Each (sut, metric, step)'s digest and exact top values, merged from its slices' (a
    slice keeps as many top values as its whole step needs: the step's top are among them),
    so a step's figures do not depend on how it was sliced; and each slice's digest, for the
    cumulative lines."""
    slices: dict[tuple[str, str, int, int], TDigest] = {}
    tops: dict[tuple[str, str, int], list[np.ndarray]] = {}
    names = ("sut", "metric", "step", "slice", "digest", "top_ms")
    for sut, metric, step, part, data, top in zip(
        *(digests.column(n).to_pylist() for n in names), strict=True
    ):
        slices[(sut, metric, step, part)] = from_bytes(data)
        tops.setdefault((sut, metric, step), []).append(np.asarray(top, dtype=float))
    merged_digests: dict[tuple[str, str, int], list[TDigest]] = {}
    for (sut, metric, step, _), digest in sorted(slices.items()):
        merged_digests.setdefault((sut, metric, step), []).append(digest)
    sketches = {}
    for key, found in merged_digests.items():
        k = top_k.get((key[0], key[2]), sum(len(t) for t in tops[key]))
        sketches[key] = (merged(found), merged_top(tops[key], k))
    return sketches, slices


def _totals(row: dict[str, Any]) -> StepTotals:
    """A step's totals as they came back from a task (TOTALS_ARROW): its failures by cause
    come as Arrow's map, (cause, count) pairs."""
    row["failures_by_cause"] = dict(row.get("failures_by_cause") or ())
    return cast(StepTotals, row)


def _write_sut(out: SutDir, key: str, found: _Aggregates, summary: SummaryDoc) -> None:
    """One SUT's analysis files (its digests were moved into place by `_move_digests`)."""
    out.analysis.mkdir(exist_ok=True)
    _write_table(out.metrics_parquet, found.metrics.get(key, []))
    pq.write_table(found.points.get(key, POINTS_ARROW.empty_table()), out.points_parquet)
    cumulative = sorted(found.cumulative.get(key, []), key=lambda r: (r["metric"], r["second"]))
    _write_table(out.cumulative_parquet, cumulative)
    _write_steps_csv(out.steps_csv, summary["steps"])
    write_text_atomically(out.summary_json, strict_json(summary) + "\n")


def analyze_sut(
    spark: SparkSession,
    sut_dir: Path,
    opts: AnalyzeOptions,
    echo: Callable[[str], None] = lambda line: None,
) -> SummaryDoc:
    return analyze(spark, [sut_dir], opts, echo)[0]


def _own_ids(inputs: SutInputs) -> str | None:
    """The pattern of the ids the system's senders gave (analysis.unrecorded)."""
    return own_ids(run_tags(inputs.run, inputs.sent_parts))


def _bucket_ns(inputs: SutInputs) -> int:
    """Time-bucket width that gives a run at most POINTS_MAX buckets for the points view: its
    schedule, from the start to the last slot in sent/ (from the part files' footers)."""
    span_ns = max(0, (inputs.last_intended_ns or inputs.start_ns) - inputs.start_ns)
    return max(1, -(-span_ns // POINTS_MAX))


def _by_sut(rows: Iterable[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row.pop("sut"), []).append(row)
    return grouped


def _write_table(path: Path, rows: list[Row]) -> None:
    pq.write_table(pa.Table.from_pylist(rows), path)


def _move_digests(staging: Path, dirs: dict[str, Path]) -> None:
    """Each SUT's per-second digests, written by its tasks, into its digests.parquet."""
    for key, path in dirs.items():
        target = SutDir(path).digests_parquet
        target.parent.mkdir(exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        source = staging / "digests" / f"sut={key}"
        if source.exists():
            shutil.move(str(source), target)


def _write_steps_csv(path: Path, steps: list[StepSummaryDoc]) -> None:
    """One row per step, a column per key any step has (a NotRequired key, such as the cut
    step's `ran_s`, is blank in the others), its reasons last."""
    seen = dict.fromkeys(key for step in steps for key in step)
    columns = [k for k in seen if k != "reasons"] + ["reasons"] if steps else []
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for step in steps:
            writer.writerow({name: _cell(value) for name, value in step.items()})


def _cell(value: object) -> object:
    """A CSV cell: a list as `a; b`, a mapping (drift, rank errors) as its JSON."""
    if isinstance(value, list):
        return "; ".join(str(item) for item in value)
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else value
