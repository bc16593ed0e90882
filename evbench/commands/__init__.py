"""One module per `evbench` command: each adds its subparser (`add`) and runs it (`main`);
`send` instead replaces the process with the sender (`send.exec_sender`), before parsing.

Spark and the runner are imported inside `main`, so `evbench paces` or `--help` never start a
JVM and the instruments' processes never load Spark."""

from __future__ import annotations

import sys


def echo(line: str) -> None:
    """Progress and results for a person: stderr, so stdout stays for data (`compare`)."""
    print(line, file=sys.stderr, flush=True)
