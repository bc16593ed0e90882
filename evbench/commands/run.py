"""`evbench run`: a pace through one system under test, or the whole local matrix."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from contract.errors import EvbenchError
from evbench.baseline import check_baseline
from evbench.campaign import worst_exit_code
from evbench.commands import Subcommands, echo
from evbench.commands.analyze import (
    add_plot_metric_argument,
    add_slo_argument,
    add_verbose_argument,
    analyze_path,
)
from evbench.commands.compare import add_regression_arguments, gate
from evbench.commands.faultflags import add_fault_arguments, checked_faults
from evbench.lab_args import SUT_HELP, add_lab_arguments
from evbench.session_args import add_session_arguments, session_kwargs
from loadgen.pace import resolve_pace
from loadgen.settings import add_knob_arguments
from runtime.argtypes import repeats


def add(commands: Subcommands) -> None:
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
    add_knob_arguments(run)
    add_session_arguments(run)
    add_verbose_argument(run)
    add_plot_metric_argument(run)
    run.add_argument("--paces-dir", type=Path, default=None, help=argparse.SUPPRESS)
    run.add_argument(
        "--repeat",
        type=repeats,
        default=1,
        metavar="N",
        help="run the whole pace N times, every lab system started fresh each time, in one run "
        "directory (<sut>.repeat-K/); the index and `evbench compare` give each figure's "
        "middle repeat and range; 5 for a CI gate (default 1)",
    )
    add_fault_arguments(run, "step", "2@5s")
    add_slo_argument(
        run,
        "run",
        "none; those given are kept in run.json, and `evbench analyze` judges them again",
    )
    add_regression_arguments(run, "run")
    run.set_defaults(main=main)


def _check_judging(args: argparse.Namespace, pace: str) -> None:
    """--slo and --baseline judge the analysed run; the gate's flags need a baseline, one of
    this run's `pace` whose files the comparison reads are of their shape."""
    if args.slo and args.no_analyze:
        raise EvbenchError("--slo is judged on the analysis: drop --no-analyze, or give --slo "
                           "to `evbench analyze` later")  # fmt: skip
    if args.baseline and args.no_analyze:
        raise EvbenchError("--baseline compares the analysed run: drop --no-analyze, or "
                           "run `evbench analyze`, then `evbench compare BASE RUN`")  # fmt: skip
    if not args.baseline and (args.fail_on_regression or args.tolerance):
        raise EvbenchError("--fail-on-regression and --tolerance judge against a baseline: "
                           "give --baseline DIR (an analysed run)")  # fmt: skip
    if args.baseline:
        check_baseline(args.baseline, pace)


def main(args: argparse.Namespace) -> int:
    from evbench.options import RunOptions
    from evbench.runner import run_matrix
    from suts.lab import LOCAL_SUTS

    pace = resolve_pace(args.pace, args.paces_dir)
    _check_judging(args, pace.name)
    session = session_kwargs(args)
    opts = RunOptions(
        pace=pace,
        sut=args.sut[0] if args.sut else "direct",
        faults=checked_faults(args, session["lab"], args.sut or LOCAL_SUTS, pace.steps),
        repeats=args.repeat,
        objectives=tuple(objective.text for objective in args.slo),
        **session,
    )
    cores = os.cpu_count() or 1
    if args.workers > 1 and args.workers >= cores:
        # Measured on 2 cores: one worker held 20,000 events/s, two only 12,000 (the
        # receiver's process makes three busy processes for two cores).
        echo(
            f"note: {args.workers} sender workers, the receiver and the lab share {cores} "
            "cores here: expect more lag than one worker at the same rate"
        )
    live = sys.stderr.isatty()
    single = args.sut is not None and len(args.sut) == 1 and args.repeat == 1
    single = single and len(opts.fanouts) <= 1
    # One system or several, one campaign: a system that fails after it recorded is said and
    # exits 1, as in a search; an error before anything was recorded is the command's (2).
    outcomes = run_matrix(opts, echo, live, tuple(args.sut or LOCAL_SUTS))
    codes = [o.exit_code for o in outcomes]
    # A run whose instrument failed is analysed too, up to where its records end: its summary
    # and reports then say "instrument failed", not where the SUT broke.
    if not args.no_analyze and any(o.schedule_start_ns for o in outcomes):
        # One analysis of the whole run directory: one Spark chain, one index.html.
        target = outcomes[0].sut_dir.root
        where = target if single else target.parent
        codes.append(
            analyze_path(
                where, "local[*]", 0.0, verbose=args.verbose, plot_metrics=args.plot_metrics,
                objectives=args.slo,
            )
        )  # fmt: skip
        if args.baseline:  # the new run against it, its page beside the run's index
            run_dir = target.parent
            code = gate([args.baseline, run_dir], run_dir / "compare.html", args.tolerance,
                        args.fail_on_regression)  # fmt: skip
            codes.append(code)
    return worst_exit_code(codes)
