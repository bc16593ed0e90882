"""`evbench import-knative`: 2019 Knative results as a run that analyze and reports handle."""

from __future__ import annotations

import argparse
from pathlib import Path

from evbench.commands import Subcommands, echo
from evbench.commands.analyze import add_verbose_argument, analyze_path
from loadgen.pace import resolve_pace
from runtime.argtypes import directory_path, path_component
from runtime.runs import next_run_id


def add(commands: Subcommands) -> None:
    legacy = commands.add_parser(
        "import-knative",
        help="turn 2019 Knative performance results into a run that analyze and reports handle",
        description="Read a 2019 mako-stub CSV, or a directory of the processed two-column "
        "files (points-publish-latency.csv, points-delivery-latency.csv, …), into "
        "runs/<run-id>-knative-2019/<sut>/, then analyse it.",
    )
    legacy.add_argument("source", type=Path, help="a mako-stub CSV or a processed directory")
    legacy.add_argument("--sut", default="imported", help="SUT name, e.g. channel-imc")
    legacy.add_argument(
        "--run-id",
        type=path_component("run id"),
        default=None,
        help="run name (default: the next free run-N)",
    )
    legacy.add_argument("--runs-dir", type=directory_path, default=None, help="default ./runs")
    legacy.add_argument(
        "--pace",
        default=None,
        help="the pace the data was taken at (e.g. 1k-2k) to name each step's "
        "rate; without it, rates are inferred from the data",
    )
    legacy.add_argument("--no-analyze", action="store_true", help="only write the records")
    add_verbose_argument(legacy)
    legacy.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    from evbench.knative import PACE_NAME, import_knative
    from evbench.session_args import runs_dir as checked_runs_dir

    runs_dir = checked_runs_dir(args)
    rates = [s.rate_per_s for s in resolve_pace(args.pace).steps] if args.pace else None
    run_id = args.run_id or next_run_id(runs_dir, PACE_NAME)
    sut_dir = import_knative(args.source, runs_dir, run_id, args.sut, rates)
    echo(f"imported {args.source} -> {sut_dir}")
    if args.no_analyze:
        return 0
    return analyze_path(sut_dir, "local[*]", 0.0, verbose=args.verbose)
