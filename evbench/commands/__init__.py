"""One module per `evbench` command: each adds its subparser (`add`) and runs it (`main`);
`send` instead replaces the process with the sender (`send.exec_sender`), before parsing.

Spark and the runner are imported inside `main`, so `evbench paces` or `--help` never start a
JVM and the instruments' processes never load Spark."""

from __future__ import annotations

import argparse
import sys
from typing import TypeAlias

# What each command's `add` is given: argparse's subparsers, generic only to the type checker
# (a string, so nothing subscripts the class at run time).
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def echo(line: str) -> None:
    """Progress and results for a person: stderr, so stdout stays for data (`compare`)."""
    print(line, file=sys.stderr, flush=True)
