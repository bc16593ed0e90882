"""`evbench analyze`: Spark over a run's records, then the reports."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.objectives import Objective, Scope, applied_objectives, parse_objectives
from analysis.slices import SLICE_EVENTS
from contract.errors import EvbenchError
from contract.summarydocs import SummaryDoc
from evbench.campaign import OBJECTIVE_BREACHED, worst_exit_code
from evbench.commands import Subcommands, echo
from runtime.argtypes import at_least_one, seconds, spark_master, spark_remote
from runtime.clocks import CORRECTION_MODES, DEFAULT_CORRECTION
from runtime.runs import analysed_summaries

if TYPE_CHECKING:  # Spark and the analysis load only when a command runs (see main)
    from pyspark.sql import SparkSession

    from analysis.job import SutInputs
    from analysis.verdicts import Thresholds


def add(commands: Subcommands) -> None:
    analyze = commands.add_parser(
        "analyze",
        help="compute latency tails, throughput, losses and verdicts with Spark",
        description="Analyse every SUT of a run directory (or one SUT directory) into "
        "<sut>/analysis/{summary.json, steps.csv, metrics.parquet, digests.parquet, "
        "cumulative.parquet}. Raw events are never collected to the driver.",
    )
    analyze.add_argument("path", type=Path, help="runs/<run> or runs/<run>/<sut>")
    where = analyze.add_mutually_exclusive_group()
    where.add_argument(
        "--spark-master",
        type=spark_master,
        default="local[*]",
        help="Spark master URL: local[*] (default) or a cluster's, e.g. spark://host:7077",
    )
    where.add_argument(
        "--spark-remote",
        type=spark_remote,
        default=None,
        metavar="sc://HOST:PORT",
        help="a Spark Connect endpoint instead of a master (the way many clusters are reached)",
    )
    analyze.add_argument(
        "--trim",
        type=seconds,
        default=0.0,
        metavar="S",
        help="sanitized figures: leave out events intended in the first S "
        "seconds (e.g. 10s), and say so in summary.json",
    )
    analyze.add_argument(
        "--export-knative",
        action="store_true",
        help="also write the 2019 two-column files (analysis/knative/*.csv) for gnuplot scripts",
    )
    analyze.add_argument(
        "--export-hdr",
        action="store_true",
        help="also write each system's e2e and publish latencies as HdrHistogram interval logs "
        "in ns, one interval per second: analysis/hdr/{e2e,publish}.hlog for the whole run, "
        "analysis/hdr/step-N/{e2e,publish}.hlog for each step, every event once in each, as "
        "HdrHistogram's HistogramLogProcessor and the hdrhistogram Python package read them; "
        "the paths are printed",
    )
    analyze.add_argument(
        "--thresholds",
        type=Path,
        default=None,
        metavar="FILE.json",
        help='override verdict thresholds, e.g. {"max_lost_ratio": 0.01}; the thresholds '
        "used are printed in every summary.json",
    )
    add_slo_argument(
        analyze, "run", "the run's own, kept in run.json by `evbench run --slo`, else none"
    )
    _add_method_arguments(analyze)
    add_plot_metric_argument(analyze)
    add_verbose_argument(analyze)
    analyze.set_defaults(main=main)


def _add_method_arguments(analyze: argparse.ArgumentParser) -> None:
    """How the analysis treats clocks and cuts its work."""
    analyze.add_argument(
        "--clock-correction",
        choices=CORRECTION_MODES,
        default=DEFAULT_CORRECTION,
        help="move received stamps onto each sender's clock by the offsets measured at the run's "
        "start and end: auto (default) where the clocks measurably disagree, on wherever "
        "measured, off never; the summary says what was done and within what bound",
    )
    analyze.add_argument(
        "--slice-events",
        type=at_least_one,
        default=SLICE_EVENTS,
        metavar="N",
        help=f"the unit of work: whole seconds of one step holding at most N events (default "
        f"{SLICE_EVENTS:,}; a task needs ~0.4 KiB per event); smaller spreads a long step over "
        "more executors, larger pays less per task",
    )


def add_plot_metric_argument(parser: argparse.ArgumentParser) -> None:
    """--plot-metric: which scraped Prometheus series the report plots (analyze, and run and
    search, which analyse at their end)."""
    parser.add_argument(
        "--plot-metric",
        action="append",
        default=[],
        metavar="NAME",
        dest="plot_metrics",
        help="plot this scraped metric in the report's System metrics (a family or sample "
        "name, exactly, or a glob such as 'kafka_consumer_*'; repeatable). Default: the "
        "families named like consumed, dispatched, queue, lag or gc",
    )


_SLO_HELP = {
    "run": "objectives the analysed run must meet, e.g. --slo 'e2e-p99<=200ms,lost<=0,"
    "max-sustainable>=1200' (quoted: < is the shell's): e2e-/publish-p50, p99, p99.9, p99.99, "
    "max in ms or s; lost, duplicates, send-failures as events or a share (0.1%%); "
    "breaking-point, max-sustainable in events/s. Whole run by default, `step:` before a term "
    "for every judged step. Each is said met or breached, in summary.json and the report; a "
    "breach exits 3",
    "probe": "a holding probe must also meet this, e.g. --slo 'e2e-p99<=200ms,lost<=0.1%%' "
    "(quoted: < is the shell's): each probe's e2e-p99 (from the intended send time), lost and "
    "send-failures, as events or a share",
}
_SLO_DEFAULT = {"run": "none", "probe": "the breaking-point rule alone"}


def add_slo_argument(
    parser: argparse.ArgumentParser, scope: Scope, default: str | None = None
) -> None:
    """--slo: one grammar (analysis.objectives) for analyze and run (judged on the analysed
    run) and search (on each probe); `default` says what is judged without it."""

    def objectives(text: str) -> tuple[Objective, ...]:
        try:
            return parse_objectives(text, scope)
        except ValueError as exc:  # argparse would say only "invalid value"
            raise argparse.ArgumentTypeError(str(exc)) from None

    said = default or _SLO_DEFAULT[scope]
    parser.add_argument(
        "--slo", type=objectives, default=(), help=f"{_SLO_HELP[scope]} (default: {said})"
    )


def add_verbose_argument(parser: argparse.ArgumentParser) -> None:
    """--verbose: what Spark prints as it starts (log4j's profile, its warnings about this host),
    hidden otherwise. For every command that analyses (analyze, run, search, memory, collect,
    import-knative)."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's start-up messages and warnings (hidden by default; errors always show)",
    )


def main(args: argparse.Namespace) -> int:
    return analyze_path(
        args.path,
        args.spark_master,
        args.trim,
        args.thresholds,
        args.export_knative,
        args.clock_correction,
        args.spark_remote,
        args.verbose,
        args.plot_metrics,
        args.slice_events,
        args.slo,
        export_hdr=args.export_hdr,
    )


def analyze_path(
    path: Path,
    master: str,
    trim_s: float,
    thresholds_file: Path | None = None,
    export_knative: bool = False,
    clock_correction: str = DEFAULT_CORRECTION,
    remote: str | None = None,
    verbose: bool = False,
    plot_metrics: Sequence[str] = (),
    slice_events: int = SLICE_EVENTS,
    objectives: Sequence[Objective] = (),
    export_hdr: bool = False,
) -> int:
    """Exit code: worst of `_exit_codes`'. Spark's start-up messages print only when `verbose`;
    `plot_metrics` choose the series the reports plot; `slice_events` bounds a task's work."""
    # Spark is imported here only, so the instruments' processes never load it (docs/design.md §2).
    from analysis.inputs import inputs_for
    from analysis.memory_job import is_memory_run

    thresholds = read_thresholds(thresholds_file)
    if is_memory_run(path):  # (no --slo: a CI gate must not pass on objectives nobody judged)
        _refuse_objectives(path, objectives)
        return analyze_memory_path(path, master, remote, verbose)
    # Every input is checked before Spark starts (a second at most): a bad path fails at once.
    inputs = inputs_for(path, echo)
    _check_recorded_objectives(inputs, objectives)
    plural = "y" if len(inputs) == 1 else "ies"
    echo(f"analysing {len(inputs)} SUT director{plural} with Spark ({remote or master})")
    spark, inputs = _compacted_while_spark_starts(inputs, master, remote, verbose, slice_events)
    from analysis.job import AnalyzeOptions, analyze
    from analysis.report import write_index, write_report
    from analysis.spark import stop_soon

    opts = AnalyzeOptions(
        trim_s=trim_s, thresholds=thresholds, export_knative=export_knative,
        export_hdr=export_hdr, clock_correction=clock_correction, slice_events=slice_events,
        objectives=tuple(objectives),
    )  # fmt: skip
    try:
        summaries = analyze(spark, inputs, opts, echo)
    except BaseException:
        spark.stop()
        raise
    # The reports need no Spark: they are written while it stops.
    stopped = stop_soon(spark)
    try:
        for checked in inputs:
            echo(f"  -> {write_report(checked.path, plot_metrics=plot_metrics)}")
        run_dir = inputs[0].path.parent
        analysed = [summary.parent.parent for summary in analysed_summaries(run_dir)]
        echo(f"  -> {write_index(run_dir, analysed)}")
    finally:
        stopped()
    return worst_exit_code(_exit_codes(summaries))


def _refuse_objectives(path: Path, objectives: Sequence[Objective]) -> None:
    if objectives:
        raise EvbenchError(f"{path} is a memory run: --slo judges runs and searches only")


def _check_recorded_objectives(inputs: Sequence[SutInputs], given: Sequence[Objective]) -> None:
    """Objectives a run recorded (run.json's, from `evbench run --slo`) that no longer read fail
    here, before Spark starts, when no --slo replaces them."""
    for checked in inputs:
        try:
            applied_objectives(given, checked.run)
        except ValueError as exc:
            raise EvbenchError(f"{checked.path}: {exc}") from None


# How the output names where a summary's objectives came from.
_OBJECTIVES_FROM = {"--slo": "--slo", "run.json": "run.json, as the run was given them"}


def _exit_codes(summaries: Sequence[SummaryDoc]) -> list[int]:
    """Each system's: 1 when an instrument failed, 3 when it missed an objective (each said,
    after which objectives were judged and where from)."""
    codes = []
    for summary in summaries:
        if source := summary.get("objectives_from"):
            terms = ",".join(judged["objective"] for judged in summary.get("objectives", []))
            echo(f"{summary['sut']}: objectives {terms} (from {_OBJECTIVES_FROM[source]})")
        for judged in summary.get("objectives", []):
            echo(f"{summary['sut']}: objective {judged['text']}")
        missed = any(not judged["met"] for judged in summary.get("objectives", []))
        codes.append(1 if summary["instrument_failures"] else OBJECTIVE_BREACHED if missed else 0)
    return codes


def read_thresholds(path: Path | None) -> Thresholds:
    """The verdict thresholds: the rule's defaults, or those `--thresholds FILE` overrides."""
    from analysis.verdicts import Thresholds

    if path is None:
        return Thresholds()
    try:
        text = path.read_text()
    except OSError as exc:
        raise EvbenchError(f"--thresholds {path}: {exc.strerror}") from exc
    return Thresholds.from_json(text, f"--thresholds {path}")


def _compacted_while_spark_starts(
    inputs: list[SutInputs], master: str, remote: str | None, verbose: bool, slice_events: int
) -> tuple[SparkSession, list[SutInputs]]:
    """A Spark session, started on a thread, and meanwhile here: the analysis and the reports
    imported, the inputs' records compacted. Seconds that would otherwise add up (measured:
    the imports alone were 0.4 s in front of the JVM's start). An error stops the session."""
    from analysis.spark import session

    with ThreadPoolExecutor(max_workers=1) as pool:
        starting = pool.submit(session, master, remote=remote, verbose=verbose)
        try:
            import analysis.report  # noqa: F401  (plotly: imported while the JVM starts)
            from analysis.job import compacted

            copies = [compacted(checked, slice_events) for checked in inputs]
        except BaseException:
            # The error that stopped the compaction is the one to tell, not the session's.
            if starting.exception() is None:
                starting.result().stop()
            raise
        return starting.result(), copies


def analyze_memory_path(
    path: Path, master: str, remote: str | None = None, verbose: bool = False
) -> int:
    """A memory run (`evbench memory`): its series through Spark, then its report."""
    from analysis.memory_job import analyze_memory
    from analysis.report import write_memory_report
    from analysis.spark import session

    echo(f"analysing memory run {path} with Spark ({remote or master})")
    spark = session(master, remote=remote, verbose=verbose)
    try:
        rows, series = analyze_memory(spark, path)
    finally:
        spark.stop()
    echo(f"  -> {write_memory_report(path, rows, series)}")
    return 0
