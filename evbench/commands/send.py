"""`evbench send`: a standalone open-loop sender, in a process of its own.

The sender runs its own event loop and tunes its process (GIL switch interval, GC, descriptor
limit), so `evbench send ...` replaces this process with `python -m loadgen ...`; its flags are
loadgen/settings.py's."""

from __future__ import annotations

import argparse
import os
import sys


def add(commands: argparse._SubParsersAction) -> None:
    commands.add_parser(
        "send",
        help="run a standalone open-loop sender (see `evbench send --help`)",
        add_help=False,
    )


def exec_sender(argv: list[str]) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "loadgen", *argv])
