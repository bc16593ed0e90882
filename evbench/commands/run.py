"""`evbench run`: a pace through one system under test, or the whole local matrix."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from contract.errors import EvbenchError
from evbench.commands import Subcommands, echo
from evbench.commands.analyze import add_plot_metric_argument, add_verbose_argument, analyze_path
from evbench.faultspec import EXEC_TIMEOUT_S, Fault, check_faults, parse_fault, parse_fault_exec
from evbench.lab_args import SUT_HELP, add_lab_arguments
from evbench.session_args import add_session_arguments, session_kwargs
from loadgen.pace import Step, resolve_pace
from loadgen.settings import add_knob_arguments

if TYPE_CHECKING:
    from suts.settings import LabSettings


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
    _add_fault_arguments(run)
    run.set_defaults(main=main)


def _argument(parse: Callable[[str], Fault]) -> Callable[[str], Fault]:
    def checked(text: str) -> Fault:
        try:
            return parse(text)
        except ValueError as exc:  # argparse would say only "invalid value"
            raise argparse.ArgumentTypeError(str(exc)) from None

    return checked


# (flag, parser, metavar, help): both repeatable, each value read and checked by its parser.
_FAULT_FLAGS = (
    (
        "--fault", parse_fault, "STEP@OFFSET:ACTION:TARGET[:DURATION]",
        "inject a fault into a lab system during step STEP (or `every` step), OFFSET (5s, "
        "500ms) after its first slot (repeatable): kill (SIGKILL, brought back after DURATION, "
        "default at once), pause (SIGSTOP for DURATION) or restart (a graceful stop and a new "
        "start) TARGET, one of the system's processes by role (ingress, channel, dispatcher, "
        "filter, adapter, broker); it must begin and end inside its step. run.json records "
        "when each was done and when its target was back, e.g. 2@5s:kill:dispatcher:1s",
    ),
    (
        "--fault-exec", parse_fault_exec, "STEP@OFFSET:COMMAND",
        "run your own shell COMMAND at that instant (repeatable), e.g. 2@5s:kubectl delete pod "
        "-l app=dispatcher; its exit code, time and output go to run.json, and one still "
        f"running after {EXEC_TIMEOUT_S:g} s is killed; neither stops the run",
    ),
)  # fmt: skip


def _add_fault_arguments(run: argparse.ArgumentParser) -> None:
    for flag, parse, metavar, help_text in _FAULT_FLAGS:
        run.add_argument(
            flag, type=_argument(parse), action="append", default=[], metavar=metavar,
            help=help_text,
        )  # fmt: skip


def _faults(
    args: argparse.Namespace, lab: LabSettings, steps: tuple[Step, ...]
) -> tuple[Fault, ...]:
    """The faults asked for, each checked against every system the run drives."""
    from suts.lab import LOCAL_SUTS, driver_for

    faults = (*args.fault, *args.fault_exec)
    for sut in args.sut or LOCAL_SUTS:
        try:
            check_faults(faults, steps, driver_for(sut).fault_targets(lab), sut)
        except ValueError as exc:
            raise EvbenchError(str(exc)) from None
    return faults


def main(args: argparse.Namespace) -> int:
    from evbench.options import RunOptions
    from evbench.runner import run_matrix
    from suts.lab import LOCAL_SUTS

    pace = resolve_pace(args.pace, args.paces_dir)
    session = session_kwargs(args)
    opts = RunOptions(
        pace=pace,
        sut=args.sut[0] if args.sut else "direct",
        faults=_faults(args, session["lab"], pace.steps),
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
    single = args.sut is not None and len(args.sut) == 1
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
                where, "local[*]", 0.0, verbose=args.verbose, plot_metrics=args.plot_metrics
            )
        )
    return max(codes)
