"""`evbench collect`: records served over HTTP (a cluster's senders and receivers) into a run
directory, then analysed like a local run."""

from __future__ import annotations

import argparse
from pathlib import Path

from evbench.commands import Subcommands, echo
from evbench.commands.analyze import add_verbose_argument, analyze_path
from runtime.argtypes import http_url, path_component
from runtime.runs import default_runs_dir


def add(commands: Subcommands) -> None:
    collect = commands.add_parser(
        "collect",
        help="fetch a run's records from senders and receivers that ran elsewhere",
        description="Fetch the records that senders (`evbench serve-records`) and receivers "
        "(GET /records) serve over HTTP into runs/<run-id>-<pace>/<sut>/, rebuild run.json "
        "from the senders' summaries, then analyse it. With kubectl: port-forward each "
        "service and pass the local URLs (see README, 'On a real cluster').",
    )
    collect.add_argument(
        "--sender",
        action="append",
        required=True,
        type=http_url,
        metavar="URL",
        help="where a sender's records are served (repeat for each fleet worker)",
    )
    collect.add_argument(
        "--receiver",
        action="append",
        required=True,
        type=http_url,
        metavar="URL",
        help="a receiver's URL",
    )
    collect.add_argument(
        "--sut",
        required=True,
        type=path_component("--sut"),
        help="what the run measured, e.g. broker-kafka",
    )
    collect.add_argument(
        "--run-id",
        default=None,
        type=path_component("--run-id"),
        help="run name (default: the next free run-N)",
    )
    collect.add_argument("--runs-dir", type=Path, default=None, help="default ./runs")
    collect.add_argument("--no-analyze", action="store_true", help="fetch only")
    add_verbose_argument(collect)
    collect.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    from evbench.collect import CollectError, collect

    runs_dir = args.runs_dir or default_runs_dir()
    try:
        sut_dir = collect(args.sender, args.receiver, args.sut, runs_dir, args.run_id, echo)
    except CollectError as exc:  # a peer's failure, not a bad input: exit 1
        echo(f"evbench collect: {exc}")
        return 1
    echo(f"collected into {sut_dir.root}")
    if args.no_analyze:
        return 0
    return analyze_path(sut_dir.root, "local[*]", 0.0, verbose=args.verbose)
