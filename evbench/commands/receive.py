"""`evbench receive`: a standalone timestamping receiver (a pod in a real cluster).

evbench's parser checks the flags (so `--help` and a bad flag read as evbench's); then this
process is replaced by `python -m receivers` with the same flags, as `evbench send` is by the
sender: the receiver chooses Arrow's allocator before pyarrow loads (runtime/allocator.py),
and this process has loaded it already."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from contract.errors import EvbenchError
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


def exec_receiver(argv: list[str]) -> NoReturn:
    """Replaces this process with the receiver, given `evbench receive`'s flags."""
    sys.stdout.flush()
    try:
        os.execv(sys.executable, [sys.executable, "-m", "receivers", *argv])
    except OSError as exc:
        raise EvbenchError(f"cannot start the receiver ({sys.executable}): {exc}") from None
