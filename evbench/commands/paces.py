"""`evbench paces`: the pace files, with their steps, duration and events."""

from __future__ import annotations

import argparse
from pathlib import Path

from contract.errors import EvbenchError
from evbench.commands import Subcommands
from loadgen.pace import default_paces_dir, list_pace_files, parse_pace


def add(commands: Subcommands) -> None:
    paces = commands.add_parser(
        "paces", help="list pace files with their steps, duration and events"
    )
    paces.add_argument("--paces-dir", type=Path, default=None, help="directory of *.pace files")
    paces.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    directory = args.paces_dir or default_paces_dir()
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
