"""Run a receiver as a process.

JSON lines on stdout tell a supervisor where it listens and how it ended.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from dataclasses import asdict
from pathlib import Path

import uvloop

from receivers.server import Receiver


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="directory for received/*.parquet")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8080, help="port; 0 picks a free one (default 8080)"
    )
    parser.add_argument("--name", default="receiver", help="receiver name recorded in every row")
    parser.add_argument(
        "--flush-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between record flushes (default 1.0)",
    )


async def serve(args: argparse.Namespace) -> dict:
    receiver = Receiver(args.out, args.name, args.host, args.port, args.flush_interval)
    await receiver.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    _emit(
        {"event": "listening", "host": receiver.host, "port": receiver.port, "out": str(args.out)}
    )
    await stop.wait()
    await receiver.close()
    return asdict(receiver.stats)


def _emit(doc: dict) -> None:
    print(json.dumps(doc), flush=True)


def run(args: argparse.Namespace) -> int:
    stats = uvloop.run(serve(args))
    _emit({"event": "stopped", "stats": stats})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m receivers",
        description="Timestamping CloudEvents receiver: stamps each request on arrival, "
        "answers 202, and writes one Parquet row per delivery.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
