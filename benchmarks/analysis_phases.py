"""Where one `evbench analyze` spends its wall time, phase by phase, and where its tasks spend
their CPU. Run by `analysis_scale.py --breakdown`, in a new process as a user runs analyze.

The phases are timed by wrapping the functions that make them (the benchmark's own
instrument; evbench carries none): Spark's session starts on a thread while the records are
compacted (or found compacted), so the two overlap. The tasks' CPU split runs every task of
the run once more, one after another, outside Spark: reading, joining (first deliveries, the
join, clock correction), the step pass, and the per-second digest files it writes.

    .venv/bin/python benchmarks/analysis_phases.py RUN_DIR
"""

from __future__ import annotations

import functools
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STARTED = time.perf_counter()

import analysis.digests  # noqa: E402
import analysis.inputs  # noqa: E402
import analysis.job  # noqa: E402
import analysis.report  # noqa: E402
import analysis.spark  # noqa: E402
import analysis.steps  # noqa: E402
import analysis.tasks  # noqa: E402
import evbench.commands.analyze  # noqa: E402

IMPORTED = time.perf_counter()
SPENT: dict[str, float] = defaultdict(float)
ENDED: dict[str, float] = {}


def timed(
    module: Any,
    name: str,
    phase: str,
    into: dict[str, float] = SPENT,
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """`module.name`, timed by `clock` into `into[phase]` (summed over calls; its last end
    kept, for the phases' order)."""
    original: Callable[..., Any] = getattr(module, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = clock()
        try:
            return original(*args, **kwargs)
        finally:
            into[phase] += clock() - began
            ENDED[phase] = time.perf_counter() - STARTED

    setattr(module, name, wrapper)


def phases(run_dir: Path) -> None:
    timed(analysis.inputs, "inputs_for", "check the inputs (footers, unless compacted as they are)")
    timed(analysis.job, "compacted", "compact them (beside Spark's start)")
    timed(analysis.spark, "session", "Spark session start")
    timed(analysis.job, "plan", "plan the tasks (footers)")
    timed(analysis.job, "_without_codegen", "-")
    timed(analysis.job, "from_steps", "driver: step rows to aggregates")
    timed(analysis.job, "cumulative_points", "-")
    timed(analysis.job, "_move_digests", "-")
    timed(analysis.job, "summary", "driver: summaries")
    timed(analysis.job, "_write_sut", "driver: analysis files")
    timed(analysis.report, "write_report", "reports (beside Spark's stop)")
    timed(analysis.report, "write_index", "reports (beside Spark's stop)")
    _time_the_job()
    _time_the_lines()
    evbench.commands.analyze.analyze_path(run_dir, "local[*]", 0.0)
    total = time.perf_counter() - STARTED
    print(f"  phases of one analysis ({total:.1f} s wall in all):")
    print(f"    {'imports':<52} {IMPORTED - STARTED:5.2f} s")
    for phase, spent in sorted(SPENT.items(), key=lambda p: ENDED[p[0]]):
        if phase != "-":
            print(f"    {phase:<52} {spent:5.2f} s  (ends at {ENDED[phase]:5.2f} s)")
    print(f"    {'stop, exit':<52} {total - max(ENDED.values()):5.2f} s")


def _time_the_job() -> None:
    """The Spark job: from its submission to its last row on the driver."""
    original = analysis.job._without_codegen

    def job(spark: Any) -> Any:
        began = time.perf_counter()
        context = original(spark)

        class Timed:
            def __enter__(self) -> None:
                context.__enter__()

            def __exit__(self, *exc: Any) -> None:
                context.__exit__(*exc)
                SPENT["Spark job: the tasks on the executors"] += time.perf_counter() - began
                ENDED["Spark job: the tasks on the executors"] = time.perf_counter() - STARTED

        return Timed()

    analysis.job._without_codegen = job


def _time_the_lines() -> None:
    """The cumulative lines: a generator, timed as it is drained."""
    original = analysis.job.cumulative_points

    def lines(pieces: Any) -> Any:
        began = time.perf_counter()
        yield from original(pieces)
        SPENT["driver: cumulative lines"] += time.perf_counter() - began
        ENDED["driver: cumulative lines"] = time.perf_counter() - STARTED

    analysis.job.cumulative_points = lines


def task_split(run_dir: Path) -> None:
    """Every task once more, one after another, outside Spark: CPU seconds per part."""
    inputs = {
        f"s{i}": analysis.inputs.compacted(checked)
        for i, checked in enumerate(analysis.inputs.inputs_for(run_dir, lambda line: None))
    }
    tasks = analysis.tasks.plan({k: (i.sent_copy, i.received_copy) for k, i in inputs.items()})
    context = analysis.steps.StepContext(
        {k: i.start_ns for k, i in inputs.items()},
        {k: analysis.job._bucket_ns(i) for k, i in inputs.items()},
        tempfile.mkdtemp(prefix="evbench-phases-"),
    )
    split: dict[str, float] = defaultdict(float)
    for module, name, part in (
        (analysis.tasks, "read_rows", "read the row groups (pyarrow)"),
        (analysis.steps, "write_per_second", "write the per-second digests"),
    ):
        timed(module, name, part, split, time.process_time)
    for task in tasks:
        began = time.process_time()
        events, _ = analysis.tasks.counted_events(task, context)
        joined = time.process_time()
        for table in analysis.tasks.by_step(events):
            analysis.steps.aggregate_step(table, context=context)
        split["first deliveries, join, clock, filters"] += joined - began
        split["step pass (outcomes, digests, counts, points)"] += time.process_time() - joined
    split["first deliveries, join, clock, filters"] -= split["read the row groups (pyarrow)"]
    split["step pass (outcomes, digests, counts, points)"] -= split["write the per-second digests"]
    events = sum(t.rows for t in tasks)
    print(f"  the tasks' CPU, {len(tasks)} tasks run one after another outside Spark:")
    for part, seconds in split.items():
        print(f"    {part:<52} {seconds:5.2f} s  ({seconds / events * 1e9:5.0f} ns a record)")


if __name__ == "__main__":
    target = Path(sys.argv[1])
    phases(target)
    task_split(target)
