"""`evbench receive`: a standalone timestamping receiver (a pod in a real cluster)."""

from __future__ import annotations

import argparse

from evbench.commands import Subcommands


def add(commands: Subcommands) -> None:
    from receivers.cli import add_arguments

    receive = commands.add_parser(
        "receive",
        help="run a standalone timestamping receiver until Ctrl-C",
        description="Stamp each CloudEvent on arrival, answer 202, write received/*.parquet. "
        "The same port serves GET /stats (JSON), /metrics (the same counters for Prometheus), "
        "/clock and /healthz.",
    )
    add_arguments(receive)
    receive.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    from receivers.cli import run

    return run(args)
