"""`evbench serve-records`: a directory's complete record files over HTTP, for `evbench
collect` (a sender's records, after its run, on the host or pod where it ran)."""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path

from contract.errors import EvbenchError
from contract.receiverlines import Listening
from evbench.commands import Subcommands
from runtime.argtypes import at_least_one, port_number, positive_seconds
from runtime.recordshare import HEAD_TIMEOUT_S, MAX_CONNECTIONS, server


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
    serve.add_argument(
        "--header-timeout",
        dest="header_timeout_s",
        type=positive_seconds,
        default=HEAD_TIMEOUT_S,
        metavar="S",
        help="seconds from a connection's accept to the end of its request's headers; a client "
        f"silent or slower is closed (default {HEAD_TIMEOUT_S:g})",
    )
    serve.add_argument(
        "--max-connections",
        type=at_least_one,
        default=MAX_CONNECTIONS,
        metavar="N",
        help=f"connections served at once, a thread each; 503 beyond (default {MAX_CONNECTIONS})",
    )
    serve.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    if not args.directory.is_dir():
        what = "a file" if args.directory.exists() else "missing"
        raise EvbenchError(
            f"serve-records: {args.directory} is not a directory ({what}): give the directory "
            "the sender wrote its records to (its --out)"
        )
    try:
        httpd = server(
            args.directory, args.host, args.port, args.header_timeout_s, args.max_connections
        )
    except OSError as exc:
        where = f"{args.host}:{args.port}"
        raise EvbenchError(
            f"serve-records: cannot listen on {where} ({exc.strerror or exc}): check --host "
            "and --port"
        ) from None
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
