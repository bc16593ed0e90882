"""Run a receiver as a process.

JSON lines on stdout tell a supervisor where it listens and how it ended.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from dataclasses import asdict, replace
from pathlib import Path

import uvloop

from contract.errors import EvbenchError
from contract.layout import safe_component
from contract.receiverlines import Listening, ReceiverLine, ReceiverStats, ReceiverStopped
from contract.units import NS_PER_MS
from receivers.limits import Limits, add_limit_arguments, limits_from
from runtime.argtypes import clock_shift_ms, directory_path, port_number, positive_seconds
from runtime.gcpauses import freeze_start_up
from runtime.procs import raise_fd_limit

# Descriptors kept free for part files, the log, the listening socket and the runtime itself.
_SPARE_FDS = 64
# Flushes more often than this would keep the loop flushing (each costs a part file and a
# thread hop) and tick back to back once one takes longer than the interval.
_FLUSH_INTERVAL_MIN_S = 0.01


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=directory_path, required=True, help="directory for received/*.parquet"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=port_number, default=8080, help="port; 0 picks a free one (default 8080)"
    )
    parser.add_argument(
        "--name",
        type=_name,
        default="receiver",
        help="receiver name recorded in every row and naming its files (default receiver)",
    )
    parser.add_argument(
        "--flush-interval",
        type=_flush_interval,
        default=1.0,
        metavar="S",
        help="seconds between record flushes (default 1.0)",
    )
    parser.add_argument(
        "--clock-shift",
        type=clock_shift_ms,
        default=0.0,
        metavar="MS",
        help="add this many milliseconds to every stamp and clock reading, as if this host's "
        "clock were that far ahead (negative: behind); for testing the clock correction "
        "(default 0)",
    )
    add_limit_arguments(parser)


def _flush_interval(text: str) -> float:
    seconds = positive_seconds(text)
    if seconds < _FLUSH_INTERVAL_MIN_S:
        raise argparse.ArgumentTypeError(
            f"{text} s is too short: flush at most every {_FLUSH_INTERVAL_MIN_S:g} s"
        )
    return seconds


def _out_problem(out: Path) -> str | None:
    """Why the records directory cannot be used (made if missing), in a few words; None if it
    can. Checked before the receiver starts, so a wrong --out is one line and not a traceback."""
    if out.exists() and not out.is_dir():
        return "is a file, not a directory; name a directory (it is made if missing)"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot make the directory ({exc.strerror}); check the path and its permissions"
    if not os.access(out, os.W_OK | os.X_OK):
        return "is not writable; check its permissions"
    return None


def _name(text: str) -> str:
    try:
        return safe_component("receiver name", text)
    except EvbenchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _connection_cap(limits: Limits) -> Limits:
    """Raise the descriptor limit as far as allowed; the cap never exceeds what it permits, so
    the receiver answers 503 at the cap instead of failing to accept (and resetting clients)."""
    soft = raise_fd_limit(limits.max_connections + _SPARE_FDS)
    return replace(limits, max_connections=max(1, min(limits.max_connections, soft - _SPARE_FDS)))


async def serve(args: argparse.Namespace) -> ReceiverStats:
    # Here, not at the top: `evbench --help` builds this module's flags without the receiver.
    from receivers.server import Receiver

    limits = _connection_cap(limits_from(args))
    receiver = Receiver(
        args.out,
        args.name,
        args.host,
        args.port,
        args.flush_interval,
        limits,
        clock_shift_ns=round(args.clock_shift * NS_PER_MS),
    )
    try:
        await receiver.start()
    except OSError as exc:  # the address: taken, or not this host's; said in one line
        why = f"receiver: cannot listen on {args.host}:{args.port}: {exc.strerror}"
        raise SystemExit(why) from None
    # Start-up is done: what it made stays out of every collection from now on, and each
    # collection is timed into the counters (runtime/gcpauses.py).
    receiver.stats.gc_frozen_objects = freeze_start_up()
    receiver.stats.gc.install()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    listening: Listening = {
        "event": "listening",
        "host": receiver.host,
        "port": receiver.port,
        "out": str(args.out),
        "limits": asdict(limits),
        "clock_shift_ns": receiver.clock_shift_ns,
    }
    _emit(listening)
    await stop.wait()
    await receiver.close()
    return receiver.stats.doc()


def _emit(line: ReceiverLine) -> None:
    print(json.dumps(line), flush=True)


def run(args: argparse.Namespace) -> int:
    problem = _out_problem(args.out)
    if problem is not None:
        print(f"receiver: --out {args.out}: {problem}", file=sys.stderr)
        return 2
    stats = uvloop.run(serve(args))
    _emit(ReceiverStopped(event="stopped", stats=stats))
    # Records left in memory are lost: the supervisor must not take this run as complete.
    return 1 if stats["unwritten_rows"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m receivers",
        description="Timestamping CloudEvents receiver: stamps each request on arrival, "
        "answers 202, and writes one Parquet row per delivery. The same port serves GET /stats "
        "(JSON), /metrics (the same counters for Prometheus), /clock and /healthz.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
