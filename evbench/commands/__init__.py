"""One module per `evbench` command: each adds its subparser (`add`) and runs it (`main`).

Heavy imports (Spark, the runner, the receiver) happen inside `main`, so `evbench paces` or
`--help` start in a fraction of a second and the instruments' processes never load Spark."""

from __future__ import annotations

import sys


def echo(line: str) -> None:
    """Progress and results for a person: stderr, so stdout stays for data (`compare`)."""
    print(line, file=sys.stderr, flush=True)
