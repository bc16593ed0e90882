"""The `evbench` command."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from evbench.lab_args import SUT_HELP, add_lab_arguments, lab_settings
from evbench.shared.argtypes import seconds
from evbench.shared.errors import EvbenchError
from evbench.shared.layout import default_runs_dir, next_run_id
from loadgen.pace import default_paces_dir, list_pace_files, parse_pace, resolve_pace
from loadgen.settings import add_knob_arguments, knobs_from_args

_EPILOG = """\
examples:
  evbench run --pace 1k-2k                       all six local systems in turn, then a report
  evbench run --sut direct --pace 1k-2k          the 2019 baseline: sender -> receiver
  evbench run --sut external --ingress http://broker.example/ --receiver-port 8080
  evbench run --pace 500:10,1000:10 --run-id try-1
  evbench paces                                   list the pace files and what they send
  evbench receive --port 8080 --out rx/           a receiver alone (a pod in a real cluster)
  evbench send --target http://broker/ --pace 1k-2k --out tx/

Paces use the 2019 syntax: comma-separated rate[:duration] steps, rate in events/s,
duration in seconds (10 s if omitted; `s`/`m` suffixes allowed).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evbench",
        description="Open-loop load tests and latency analysis for event-delivery systems.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run a pace against a system under test and record every event",
        description="Start the receiver, drive the pace open-loop through the SUT, wait for "
        "stragglers, and write runs/<run-id>-<pace>/<sut>/{run.json,sent/,received/,samples/}. "
        "Without --sut, every local system runs in turn and the run gets one index.html.",
        epilog=SUT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_lab_arguments(run)
    run.add_argument(
        "--pace",
        default="1k-2k",
        help="pace name from paces/ or an inline spec like 500:10,1000:10 (default 1k-2k)",
    )
    run.add_argument("--run-id", default=None, help="run name (default: the next free run-N)")
    run.add_argument(
        "--runs-dir",
        type=Path,
        default=None,
        help="where runs are written (default ./runs, or $EVBENCH_RUNS_DIR)",
    )
    add_knob_arguments(run)
    run.add_argument(
        "--grace",
        type=seconds,
        default=5.0,
        metavar="S",
        help="stop waiting for deliveries after this long without one (default 5)",
    )
    run.add_argument(
        "--grace-cap",
        type=seconds,
        default=60.0,
        metavar="S",
        help="never wait for deliveries longer than this (default 60)",
    )
    run.add_argument(
        "--no-analyze",
        action="store_true",
        help="skip the Spark analysis at the end (run `evbench analyze` later)",
    )
    run.add_argument("--paces-dir", type=Path, default=None, help=argparse.SUPPRESS)

    analyze = commands.add_parser(
        "analyze",
        help="compute latency tails, throughput, losses and verdicts with Spark",
        description="Analyse every SUT of a run directory (or one SUT directory) into "
        "<sut>/analysis/{summary.json, steps.csv, metrics.parquet, digests.parquet, "
        "cumulative.parquet}. Raw events are never collected to the driver.",
    )
    analyze.add_argument("path", type=Path, help="runs/<run> or runs/<run>/<sut>")
    analyze.add_argument(
        "--spark-master", default="local[*]", help="Spark master URL (default local[*])"
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
        "--thresholds",
        type=Path,
        default=None,
        metavar="FILE.json",
        help='override verdict thresholds, e.g. {"max_lost_ratio": 0.01}; the thresholds '
        "used are printed in every summary.json",
    )

    compare = commands.add_parser(
        "compare",
        help="the same SUTs across analysed runs: breaking points and P99.99 side by side",
        description="Print one line per SUT with each run's breaking point, max sustainable "
        "rate and e2e P99.99, and write an HTML comparison (default runs/compare.html).",
    )
    compare.add_argument("runs", type=Path, nargs="+", help="analysed run directories")
    compare.add_argument("--out", type=Path, default=None, help="HTML file to write")

    legacy = commands.add_parser(
        "import-knative",
        help="turn 2019 Knative performance results into a run that analyze and reports handle",
        description="Read a 2019 mako-stub CSV, or a directory of the processed two-column "
        "files (points-publish-latency.csv, points-delivery-latency.csv, …), into "
        "runs/<run-id>-knative-2019/<sut>/, then analyse it.",
    )
    legacy.add_argument("source", type=Path, help="a mako-stub CSV or a processed directory")
    legacy.add_argument("--sut", default="imported", help="SUT name, e.g. channel-imc")
    legacy.add_argument("--run-id", default=None, help="run name (default: the next free run-N)")
    legacy.add_argument("--runs-dir", type=Path, default=None, help="default ./runs")
    legacy.add_argument(
        "--pace",
        default=None,
        help="the pace the data was taken at (e.g. 1k-2k) to name each step's "
        "rate; without it, rates are inferred from the data",
    )
    legacy.add_argument("--no-analyze", action="store_true", help="only write the records")

    paces = commands.add_parser(
        "paces", help="list pace files with their steps, duration and events"
    )
    paces.add_argument("--paces-dir", type=Path, default=None, help="directory of *.pace files")

    receive = commands.add_parser(
        "receive",
        help="run a standalone timestamping receiver until Ctrl-C",
        description="Stamp each CloudEvent on arrival, answer 202, write received/*.parquet.",
    )
    from receivers.cli import add_arguments

    add_arguments(receive)

    commands.add_parser(
        "send",
        help="run a standalone open-loop sender (see `evbench send --help`)",
        add_help=False,
    )
    return parser


def _echo(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _list_paces(paces_dir: Path | None) -> int:
    directory = paces_dir or default_paces_dir()
    files = list_pace_files(directory)
    if not files:
        raise EvbenchError(f"no *.pace files in {directory}")
    for path in files:
        pace = parse_pace(path.read_text(), name=path.stem, source=str(path))
        minutes, seconds = divmod(pace.duration_s, 60)
        print(
            f"{pace.name:<12} {len(pace.steps):>3} steps  {minutes:>3}m{seconds:02d}s  "
            f"{pace.events:>9} events  {pace.spec}"
        )
    return 0


def _analyze(
    path: Path,
    master: str,
    trim_s: float,
    thresholds_file: Path | None = None,
    export_knative: bool = False,
) -> int:
    """Exit code: 0, or 1 when an instrument of any analysed system failed."""
    # Spark is imported here only, so the instruments' processes never load it (DESIGN §2).
    from analysis.job import AnalyzeOptions, analyze, inputs_for
    from analysis.spark import session
    from analysis.verdicts import Thresholds

    thresholds = Thresholds()
    if thresholds_file is not None:
        try:
            text = thresholds_file.read_text()
        except OSError as exc:
            raise EvbenchError(f"--thresholds {thresholds_file}: {exc.strerror}") from exc
        thresholds = Thresholds.from_json(text, f"--thresholds {thresholds_file}")

    # Every input is checked before Spark starts (seconds): a bad path fails at once.
    inputs = inputs_for(path, _echo)
    _echo(
        f"analysing {len(inputs)} SUT director{'y' if len(inputs) == 1 else 'ies'} "
        f"with Spark ({master})"
    )
    spark = session(master)
    try:
        summaries = analyze(
            spark,
            inputs,
            AnalyzeOptions(trim_s=trim_s, thresholds=thresholds, export_knative=export_knative),
            _echo,
        )
    finally:
        spark.stop()
    from analysis.report import write_index, write_report

    for checked in inputs:
        _echo(f"  -> {write_report(checked.path)}")
    run_dir = inputs[0].path.parent
    analysed = sorted(p.parent.parent for p in run_dir.glob("*/analysis/summary.json"))
    _echo(f"  -> {write_index(run_dir, analysed)}")
    return 1 if any(s["instrument_failures"] for s in summaries) else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["send"]:
        # The sender runs its own event loop and tunes its process (GIL switch interval, GC,
        # descriptor limit), so it gets a process of its own.
        os.execv(sys.executable, [sys.executable, "-m", "loadgen", *argv[1:]])
    args = build_parser().parse_args(argv)
    try:
        if args.command == "paces":
            return _list_paces(args.paces_dir)
        if args.command == "receive":
            from receivers.cli import run as run_receiver

            return run_receiver(args)
        if args.command == "import-knative":
            from evbench.knative import PACE_NAME, import_knative

            runs_dir = args.runs_dir or default_runs_dir()
            rates = None
            if args.pace:
                rates = [s.rate_per_s for s in resolve_pace(args.pace).steps]
            run_id = args.run_id or next_run_id(runs_dir, PACE_NAME)
            sut_dir = import_knative(args.source, runs_dir, run_id, args.sut, rates)
            _echo(f"imported {args.source} -> {sut_dir}")
            return 0 if args.no_analyze else _analyze(sut_dir, "local[*]", 0.0)
        if args.command == "compare":
            from analysis.report import comparison_rows, comparison_text, write_comparison

            rows = comparison_rows(args.runs)
            print(comparison_text(rows))
            out = args.out or args.runs[0].parent / "compare.html"
            _echo(f"  -> {write_comparison(rows, out)}")
            return 0
        if args.command == "analyze":
            return _analyze(
                args.path, args.spark_master, args.trim, args.thresholds, args.export_knative
            )
        if args.command == "run":
            from evbench.runner import RunOptions, run, run_matrix
            from suts.lab import LOCAL_SUTS

            opts = RunOptions(
                pace=resolve_pace(args.pace, args.paces_dir),
                runs_dir=args.runs_dir or default_runs_dir(),
                sut=args.sut[0] if args.sut else "direct",
                run_id=args.run_id,
                send=knobs_from_args(args),
                grace_s=args.grace,
                grace_cap_s=args.grace_cap,
                receiver_host=args.receiver_host,
                receiver_port=args.receiver_port,
                lab=lab_settings(args),
            )
            live = sys.stderr.isatty()
            single = args.sut is not None and len(args.sut) == 1
            if single:
                outcomes = [run(opts, _echo, live)]
            else:
                outcomes = run_matrix(opts, _echo, live, args.sut or LOCAL_SUTS)
            codes = [o.exit_code for o in outcomes]
            # A run whose instrument failed is analysed too, up to where its records end: its
            # summary and reports then say "instrument failed", not where the SUT broke.
            if not args.no_analyze and any(o.schedule_start_ns for o in outcomes):
                # One analysis of the whole run directory: one Spark chain, one index.html.
                target = outcomes[0].sut_dir.root
                codes.append(_analyze(target if single else target.parent, "local[*]", 0.0))
            return max(codes)
    except EvbenchError as exc:
        print(f"evbench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evbench: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
