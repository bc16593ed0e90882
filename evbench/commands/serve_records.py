"""`evbench serve-records`: a directory's complete record files over HTTP, for `evbench
collect` (a sender's records, after its run, on the host or pod where it ran)."""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path

from contract.argtypes import port_number, positive_seconds
from contract.lines import Listening
from contract.recordshare import server
from evbench.commands import Subcommands


def add(commands: Subcommands) -> None:
    serve = commands.add_parser(
        "serve-records",
        help="serve a directory's records over HTTP for `evbench collect`",
        description="Serve DIR's complete record files (GET /records lists them, GET "
        "/records/<path> sends one) until stopped or --for has passed.",
    )
    serve.add_argument("directory", type=Path, help="e.g. the sender's --out directory")
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 in a pod)"
    )
    serve.add_argument("--port", type=port_number, default=8081, help="(default 8081; 0 picks one)")
    serve.add_argument(
        "--for",
        dest="for_s",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="stop after this long (default: until stopped)",
    )
    serve.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    httpd = server(args.directory, args.host, args.port)
    # A line for a supervisor (or a test) that started it with port 0.
    listening: Listening = {"event": "listening", "host": args.host, "port": httpd.server_port}
    print(json.dumps(listening), flush=True)
    if args.for_s is not None:
        threading.Timer(args.for_s, httpd.shutdown).start()
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()
    return 0
