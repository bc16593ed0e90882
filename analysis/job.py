"""`evbench analyze`: a SUT directory's records -> analysis/{metrics.parquet, steps.csv,
digests.parquet, cumulative.parquet, summary.json}.

Reads, chains the transforms, writes. Only aggregates reach the driver: per-second counts,
per-step totals, per-step (compressed) digests and the cumulative line's points.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import reduce
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.compact import compact
from analysis.digests import (
    cumulative_points,
    from_bytes,
    line_tasks,
    merged,
    merged_top,
    tail_figures,
)
from analysis.export import export_knative
from analysis.load import (
    earliest_intended_ns,
    latest_intended_ns,
    load_records,
    with_run_columns,
)
from analysis.steps import POINTS_ARROW, StepContext, flat, merge_points, merge_seconds
from analysis.transforms import (
    counted,
    first_deliveries,
    join_deliveries,
    on_sender_clock,
    step_inputs,
    step_stats,
    with_latencies,
    with_outcomes,
)
from analysis.verdicts import (
    InstrumentEvidence,
    StepFigures,
    Thresholds,
    Verdict,
    breaking_point,
    instrument_failures,
    judge,
    search_verdict_text,
    slope_rise_ms,
    under_instrument_failure,
    verdict_text,
)
from contract.clocks import Correction, corrections_from, to_apply
from contract.documents import (
    ClockSummaryDoc,
    SummaryDoc,
    receiver_stats,
    schedule_start_ns,
    sender_summary,
)
from contract.errors import EvbenchError
from contract.formulas import achieved_rate_per_s
from contract.layout import SutDir
from contract.parquet import check_parts, part_files
from contract.records import RECEIVED_FIELDS, SENT_FIELDS

# Points in the latency-points view per SUT; above it, time buckets keep each bucket's maxima.
POINTS_MAX = 100_000

SUMMARY_LATENCIES = {
    "publish": "publish",
    "publish_corrected": "publish_corrected",
    "e2e": "e2e",
    "e2e_uncorrected": "e2e_uncorrected",
}


@dataclass(frozen=True)
class AnalyzeOptions:
    trim_s: float = 0.0
    export_knative: bool = False
    clock_correction: str = "auto"  # contract.clocks.CORRECTION_MODES
    thresholds: Thresholds = field(default_factory=Thresholds)


@dataclass(frozen=True)
class SutInputs:
    """A SUT directory checked before Spark starts: run.json read, every part file's footer
    checked, the schedule start known."""

    path: Path
    run: dict
    start_ns: int
    # Where start_ns came from: run.json, or (runs recorded before run.json kept it when the
    # sender died) the earliest slot in sent/, which is slot 0 of the schedule.
    start_source: str
    sent_parts: tuple[Path, ...]
    received_parts: tuple[Path, ...]
    # The last slot in sent/ (from footers, by `compacted`): the schedule's span for the points.
    last_intended_ns: int | None = None
    # The parts compacted into one file each (analysis.compact), where that could be written.
    sent_copy: Path | None = None
    received_copy: Path | None = None
    compacted: bool = False  # `compacted` has run: the copies above are as they will be

    def parts(self, records: str) -> tuple[Path, ...]:
        """The checked part files of `records` ("sent" or "received")."""
        return {"sent": self.sent_parts, "received": self.received_parts}[records]

    def readable(self, records: str) -> tuple[Path, ...]:
        """What Spark reads for `records`: its compacted copy, else its parts."""
        copy = {"sent": self.sent_copy, "received": self.received_copy}[records]
        return (copy,) if copy is not None else self.parts(records)


def sut_dirs(path: Path) -> list[Path]:
    """A SUT directory itself, or every SUT directory of a run directory."""
    if not path.exists():
        raise EvbenchError(f"{path}: no such directory")
    if SutDir(path).run_json.is_file():
        return [path]
    children = path.iterdir() if path.is_dir() else ()
    found = sorted(p for p in children if SutDir(p).run_json.is_file())
    if not found:
        raise EvbenchError(
            f"{path}: neither a SUT directory (run.json) nor a run with SUT directories"
        )
    return found


def never_started(sut_dir: Path) -> bool:
    """A SUT directory whose sender never started (say, the SUT failed to come up): no schedule
    start in run.json and no sent records."""
    try:
        run = json.loads(SutDir(sut_dir).run_json.read_text())
    except (OSError, ValueError):
        return False  # unreadable: let read_run_json name the problem
    return not schedule_start_ns(run) and not part_files(SutDir(sut_dir).sent)


def read_run_json(sut_dir: Path) -> dict:
    path = SutDir(sut_dir).run_json
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise EvbenchError(f"{path}: cannot read run.json ({exc})") from exc
    if not isinstance(run, dict):
        raise EvbenchError(f"{path}: expected a JSON object")
    return run


def check_inputs(sut_dir: Path) -> SutInputs:
    """Everything analysis needs from a SUT directory, checked without Spark (seconds saved on
    a bad path, and the error names the file)."""
    run = read_run_json(sut_dir)
    layout = SutDir(sut_dir)
    sent = tuple(check_parts(layout.sent, SENT_FIELDS))
    received = tuple(check_parts(layout.received, RECEIVED_FIELDS))
    start_ns, source = schedule_start_ns(run), "run.json"
    if not start_ns and sent:
        start_ns, source = earliest_intended_ns(sent), "the earliest slot in sent/"
    if not start_ns:
        raise EvbenchError(
            f"{layout.run_json}: no schedule start and no sent records: the sender never "
            "started, nothing to analyse"
        )
    return SutInputs(sut_dir, run, int(start_ns), source, sent, received)


def compacted(inputs: SutInputs) -> SutInputs:
    """`inputs` with its parts compacted (analysis.compact): seconds of reading on the driver,
    which `evbench analyze` spends while Spark starts."""
    if inputs.compacted:
        return inputs
    records = SutDir(inputs.path).analysis_records
    copied = replace(
        inputs,
        sent_copy=_copy(inputs.sent_parts, SENT_FIELDS, records / "sent.parquet"),
        received_copy=_copy(inputs.received_parts, RECEIVED_FIELDS, records / "received.parquet"),
    )
    # From the copy's footer (one file, not thousands) where there is one.
    last = latest_intended_ns(copied.readable("sent"))
    return replace(copied, last_intended_ns=last, compacted=True)


def _copy(parts: tuple[Path, ...], fields: tuple, copy: Path) -> Path | None:
    """The parts' compacted copy; None (read the parts) when there are none, or when the copy
    cannot be written here (a read-only run directory, a full disk)."""
    if not parts:
        return None
    try:
        return compact(parts, fields, copy)
    except OSError:
        return None


def inputs_for(path: Path, echo: Callable[[str], None]) -> list[SutInputs]:
    """The SUT directories under `path` that can be analysed, checked; a run's systems that
    never started sending are skipped (and said so), a single one is an error."""
    targets = sut_dirs(path)
    if len(targets) > 1:
        skipped = [t for t in targets if never_started(t)]
        for sut_dir in skipped:
            echo(f"skipping {sut_dir.name}: it never started sending (see its run.json)")
        targets = [t for t in targets if t not in skipped]
        if not targets:
            raise EvbenchError(f"{path}: no system of this run started sending")
    return [check_inputs(t) for t in targets]


def analyze(
    spark: SparkSession,
    targets: Sequence[Path | SutInputs],
    opts: AnalyzeOptions,
    echo: Callable[[str], None] = lambda line: None,
) -> list[dict]:
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
        summary = _summary(
            checked[key],
            opts,
            found.totals.get(key, []),
            found.foreign_counts.get(key, 0),
            {(m, st): d for (k, m, st), d in found.step_sketch.items() if k == key},
            found.e2e_points.get(key, []),
            (measured_offsets[key], applied[key]),
        )
        _write_sut(SutDir(path), key, found, summary)
        echo(_headline(summary))
        summaries.append(summary)
    return summaries


@dataclass
class _Aggregates:
    """What the chain leaves on the driver, keyed by SUT key (`s0`, `s1`, ...): aggregates
    only, never raw events."""

    metrics: dict[str, list[dict]]  # per second
    totals: dict[str, list[dict]]  # per step
    step_sketch: dict[tuple[str, str, int], tuple]  # (sut, metric, step) -> (digest, top values)
    cumulative: dict[str, list[dict]]
    e2e_points: dict[str, list[dict]]
    foreign_counts: dict[str, int]
    points: dict[str, pa.Table]  # bucketed events per SUT for the latency scatter


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
        events = with_latencies(with_outcomes(rows.where(F.col("is_sent").isNotNull())))
        export_knative(events, dirs)
    return found


def from_steps(head: pa.Table, start_ns: Mapping[str, int]) -> _Aggregates:
    """The step rows and step digests of `step_stats` into per-SUT aggregates: per-second
    counts and point buckets merged across steps (analysis.steps)."""
    step_sketch: dict[tuple[str, str, int], tuple] = {}
    totals: dict[str, list[dict]] = {}
    seconds: dict[str, list[dict]] = {}
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
        totals.setdefault(sut, []).append({"step": step, **steps.column("totals")[i].as_py()})
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
) -> dict:
    return analyze(spark, [sut_dir], opts, echo)[0]


def _bucket_ns(inputs: SutInputs) -> int:
    """Time-bucket width that gives a run at most POINTS_MAX buckets for the points view: its
    schedule, from the start to the last slot in sent/ (from the part files' footers)."""
    span_ns = max(0, (inputs.last_intended_ns or inputs.start_ns) - inputs.start_ns)
    return max(1, -(-span_ns // POINTS_MAX))


def _load_all(
    spark: SparkSession, checked: dict[str, SutInputs], name: str, fields: tuple
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


def _by_sut(rows: Iterable[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for row in rows:
        grouped.setdefault(row.pop("sut"), []).append(row)
    return grouped


def _write_table(path: Path, rows: list[dict]) -> None:
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


def strict_json(doc: object) -> str:
    """JSON that every parser reads: a figure that came out NaN or infinite is null, on
    purpose, instead of the `NaN` Python writes by default."""
    return json.dumps(_finite_or_null(doc), indent=2, allow_nan=False)


def _finite_or_null(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_null(item) for item in value]
    return value


def _evidence(inputs: SutInputs, counts: dict) -> InstrumentEvidence:
    run = inputs.run
    sender, receiver = sender_summary(run), receiver_stats(run)
    return InstrumentEvidence(
        run_status=run.get("status"),
        recorded_failures=tuple(run.get("instrument_failures") or ()),
        sent_files=len(inputs.sent_parts),
        received_files=len(inputs.received_parts),
        sender_reported_sent=sender.get("sent"),
        receiver_reported_received=receiver.get("received"),
        acked=counts["acked"],
        acked_decoys=counts["filtered"] + counts["leaked"],
        deliveries=counts["received"] + counts["foreign"],
        direct=run.get("sut") == "direct",
        sut_processes_died=bool((run.get("sut_settings") or {}).get("died")),
        receiver_connections=receiver.get("connections"),
    )


def _summary(
    inputs: SutInputs,
    opts: AnalyzeOptions,
    totals: list[dict],
    foreign_count: int,
    step_sketch: dict,
    e2e_points: list[dict],
    clocks: tuple[dict[int, Correction], dict[int, Correction]],
) -> SummaryDoc:
    run = inputs.run
    durations = {i: s["duration_s"] for i, s in enumerate(run["pace"]["steps"], start=1)}
    e2e_seconds: dict[int, list[tuple]] = {}
    for point in sorted(e2e_points, key=lambda p: p["second"]):
        e2e_seconds.setdefault(point["step"], []).append((point["second"], point["p50_ms"]))
    baseline = _baseline_e2e_p99_ms(totals, step_sketch, opts.thresholds.min_events)
    counts = _counts(totals, foreign_count)
    failures = instrument_failures(_evidence(inputs, counts))
    rows = [
        _step_row(t, durations, step_sketch, e2e_seconds, opts.thresholds, baseline) for t in totals
    ]
    verdicts = under_instrument_failure([verdict for _, verdict in rows], failures)
    steps = []
    for (step, _), verdict in zip(rows, verdicts, strict=True):
        step["verdict"], step["reasons"] = verdict.verdict, list(verdict.reasons)
        steps.append(step)
    # An instrument failure names no breaking point and no sustainable rate: what it broke
    # would be charged to the system under test.
    point, sustainable = (None, None) if failures else breaking_point(verdicts)
    verdict = verdict_text(point, sustainable, failures)
    if not failures and (search := run.get("search")):
        # A search's probes are not a staircase (it bisects and confirms): its own bracket,
        # judged probe by probe as it went, is the answer, not a reading of the steps in order;
        # a search that did not finish has none.
        found = search.get("result") or {}
        point, sustainable = found.get("lowest_break_per_s"), found.get("max_sustainable_per_s")
        verdict = search_verdict_text(found, run.get("status"))
    return {
        "run_id": run["run_id"],
        "sut": run["sut"],
        "pace": run["pace"]["name"],
        "status": run.get("status"),
        "verdict": verdict,
        "instrument_failures": list(failures),
        "schedule_start_ns": inputs.start_ns,
        "schedule_start_from": inputs.start_source,
        "trim_s": opts.trim_s,
        "trimmed": (
            f"events intended in the first {opts.trim_s:g} s after the schedule start are left out"
            if opts.trim_s
            else None
        ),
        "counts": counts,
        "latency_ms": {
            name: _whole_run(step_sketch, metric) for name, metric in SUMMARY_LATENCIES.items()
        },
        "steps": steps,
        "breaking_point_per_s": point,
        "max_sustainable_rate_per_s": sustainable,
        "thresholds": opts.thresholds.as_dict(),
        "clock": _clock_summary(*clocks, opts.clock_correction, totals),
        **({"search": run["search"]} if run.get("search") else {}),
    }


def _clock_summary(
    offsets: dict[int, Correction], applied: dict[int, Correction], mode: str, totals: list[dict]
) -> ClockSummaryDoc:
    """What was done about the sender's and receiver's clocks, and how far to trust it."""
    if applied:
        workers = ", ".join(map(str, sorted(applied)))
        bound_ms = max(c.bound_ns for c in applied.values()) / 1e6
        note = (
            f"end-to-end latencies corrected for the clock offset of sender worker(s) {workers},"
            f" within ±{bound_ms:.3f} ms"
        )
    elif offsets:
        note = (
            "not corrected: --clock-correction off"
            if mode == "off"
            else "not corrected: the measured offsets are within their error bounds (one clock)"
        )
    else:
        note = "not corrected: no clock offsets were measured (run.json has none)"
    return {
        "correction": mode,
        "applied": bool(applied),
        "note": note,
        "workers": {
            str(worker): {
                "offset_ns": c.before.offset_ns,
                "bound_ns": c.bound_ns,
                "drift_ns": c.drift_ns,
                "applied": worker in applied,
            }
            for worker, c in sorted(offsets.items())
        },
        "negative_e2e": int(sum(t.get("negative_e2e") or 0 for t in totals)),
    }


def _whole_run(step_sketch: dict, metric: str) -> dict:
    """Whole-run figures: step digests merged, step top values merged (exactly). Merged in step
    order: a T-Digest merge depends on its order (in the fourth digit of a median), and the
    order Spark returns the steps in is its partitioning's, which adaptive execution varies."""
    parts = [sketch for (m, _), sketch in sorted(step_sketch.items()) if m == metric]
    return tail_figures(merged(d for d, _ in parts), merged_top(t for _, t in parts))


def _baseline_e2e_p99_ms(totals: list[dict], step_sketch: dict, min_events: int) -> float | None:
    """E2E P99 of the pace's first step with enough deliveries: the system before the load."""
    for total in sorted(totals, key=lambda t: t["step"]):
        if total["step"] < 1:
            continue
        e2e = tail_figures(*step_sketch.get(("e2e", total["step"]), (merged([]), None)))
        if e2e["n"] and e2e["n"] >= min_events:
            return e2e["p99"]
    return None


def _step_row(
    total: dict,
    durations: dict[int, int],
    step_sketch: dict,
    e2e_seconds: dict,
    thresholds: Thresholds,
    baseline_e2e_p99_ms: float | None,
) -> tuple[dict, Verdict]:
    """A step's summary row and its verdict (before any instrument failure overrules it)."""
    step, rate = total["step"], total["target_rate_per_s"]
    duration_s = durations.get(step, max(1, total["scheduled"] // max(rate, 1)))
    last_handled_ns = max(total["last_sent_ns"] or 0, total["last_intended_ns"] or 0)
    handled = total["sent"] + total["cap_refused"]
    sender_rate = achieved_rate_per_s(handled, total["start_ns"], last_handled_ns, rate)
    achieved = achieved_rate_per_s(total["sent"], total["start_ns"], total["last_sent_ns"], rate)
    e2e = tail_figures(*step_sketch.get(("e2e", step), (merged([]), None)))
    lag = tail_figures(*step_sketch.get(("sender_lag", step), (merged([]), None)))
    points = e2e_seconds.get(step, [])
    figures = StepFigures(
        step=step,
        target_rate_per_s=rate,
        scheduled=total["scheduled"],
        acked=total["acked"],
        send_failures=total["send_failures"],
        lost=total["lost"],
        sender_ratio=sender_rate / rate if rate else 0.0,
        sender_lag_p99_ms=lag["p99"],
        delivered_rate_per_s=(total["delivered"] - total["leaked"]) / duration_s,
        expected_delivery_rate_per_s=rate * (1 - total["decoys"] / max(total["scheduled"], 1)),
        e2e_median_ms=e2e["p50"],
        e2e_rise_ms=slope_rise_ms([p[0] for p in points], [p[1] for p in points]),
        e2e_p99_ms=e2e["p99"],
        baseline_e2e_p99_ms=baseline_e2e_p99_ms,
    )
    verdict = judge(figures, thresholds)
    row = {
        "step": step,
        "target_rate_per_s": rate,
        "duration_s": duration_s,
        "scheduled": total["scheduled"],
        "achieved_send_rate_per_s": round(achieved, 2),
        "delivered_rate_per_s": round(figures.delivered_rate_per_s, 2),
        "send_failures": total["send_failures"],
        "inflight_cap_refused": total["cap_refused"],
        "lost": total["lost"],
        "duplicates": total["duplicates"],
        "filtered": total["filtered"],
        "leaked": total["leaked"],
        "sender_lag_p99_ms": lag["p99"],
        "p99_e2e_ms": e2e["p99"],
        "p9999_e2e_ms": e2e["p9999"],
        "e2e_n": e2e["n"],
        "p9999_is_max": e2e["p9999_is_max"],
        "e2e_rise_ms": None if figures.e2e_rise_ms is None else round(figures.e2e_rise_ms, 3),
        "verdict": verdict.verdict,
        "reasons": list(verdict.reasons),
    }
    return row, verdict


def _counts(totals: list[dict], foreign_count: int) -> dict:
    def total(key: str) -> int:
        return int(sum(t[key] or 0 for t in totals))

    return {
        "sent": total("sent"),
        "scheduled": total("scheduled"),
        "send_failures": total("send_failures"),
        "acked": total("acked"),
        "received": total("delivered"),
        "lost": total("lost"),
        "duplicates": total("duplicates"),
        "foreign": foreign_count,
        "decoys": total("decoys"),
        "filtered": total("filtered"),
        "leaked": total("leaked"),
    }


def _write_steps_csv(path: Path, steps: list[dict]) -> None:
    columns = [k for k in steps[0] if k != "reasons"] + ["reasons"] if steps else []
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for step in steps:
            writer.writerow({**step, "reasons": "; ".join(step["reasons"])})


def _headline(summary: dict) -> str:
    e2e = summary["latency_ms"]["e2e"]
    verdict = summary["verdict"]
    tail = "max" if e2e["p9999_is_max"] else "P99.99"
    c = summary["counts"]
    return (
        f"{summary['sut']}: {verdict}; e2e {tail} {e2e['p9999']} ms (n={e2e['n']}); "
        f"sent {c['sent']}, send failures {c['send_failures']}, lost {c['lost']}, "
        f"duplicates {c['duplicates']}, foreign {c['foreign']}"
        + (f", decoys filtered {c['filtered']} of {c['decoys']}" if c["decoys"] else "")
    )
