"""`evbench send`: a standalone open-loop sender, in a process of its own.

The sender runs its own event loop and tunes its process (GIL switch interval, GC, descriptor
limit), so `evbench send ...` replaces this process with `python -m loadgen ...`; its flags are
loadgen/settings.py's. `evbench send --master ...` and `evbench send --worker --master-host
HOST` run a Locust fleet's master and workers instead (`python -m loadgen.fleet`)."""

from __future__ import annotations

import os
import sys

from evbench.commands import Subcommands


def add(commands: Subcommands) -> None:
    commands.add_parser(
        "send",
        help="run a standalone open-loop sender (see `evbench send --help`)",
        add_help=False,
    )


def exec_sender(argv: list[str]) -> None:
    os.execv(sys.executable, [sys.executable, "-m", *sender_command(argv)])


def sender_command(argv: list[str]) -> list[str]:
    """What `evbench send ARGV` runs after `python -m`: a fleet master with `--master`, a fleet
    worker with `--master-host` (a bare `--worker` there is the role, not a worker index), or
    one sender."""
    if "--master" in argv:
        return ["loadgen.fleet", "master", *(a for a in argv if a != "--master")]
    if any(a == "--master-host" or a.startswith("--master-host=") for a in argv):
        rest = [
            a
            for i, a in enumerate(argv)
            if a != "--worker" or (i + 1 < len(argv) and not argv[i + 1].startswith("-"))
        ]
        return ["loadgen.fleet", "worker", *rest]
    return ["loadgen", *argv]
