"""The `evbench` command: the commands themselves are in evbench/commands/, one module each."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from contract.errors import EvbenchError
from evbench.commands import (
    analyze,
    collect,
    compare,
    import_knative,
    memory,
    paces,
    receive,
    run,
    search,
    send,
    serve_records,
)
from runtime.files import disk_error

_EPILOG = """\
examples:
  evbench run --pace 1k-2k                       all six local systems in turn, then a report
  evbench run --sut direct --pace 1k-2k          the 2019 baseline: sender -> receiver
  evbench run --sut external --ingress http://broker.example/ --receiver-port 8080
  evbench run --pace 500:10,1000:10 --run-id try-1
  evbench paces                                   list the pace files and what they send
  evbench receive --port 8080 --out rx/           a receiver alone (a pod in a real cluster)
  evbench send --target http://broker/ --pace 1k-2k --out tx/
  evbench run --sut direct --workers 2            two sender processes, a Locust fleet
  evbench collect --sender http://127.0.0.1:18081 --receiver http://127.0.0.1:18080 --sut x

Paces use the 2019 syntax: comma-separated rate[:duration] steps, rate in events/s,
duration in seconds (10 s if omitted; `s`/`m` suffixes allowed).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evbench",
        description="Open-loop load tests and latency analysis for event-delivery systems.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (
        run,
        analyze,
        compare,
        import_knative,
        paces,
        receive,
        send,
        collect,
        serve_records,
        memory,
        search,
    ):
        command.add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["send"]:
        send.exec_sender(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if args.command == "receive":
            receive.exec_receiver(argv[1:])
        command: Callable[[argparse.Namespace], int] = args.main  # each command's set_defaults
        return command(args)
    except EvbenchError as exc:
        print(f"evbench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evbench: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a full disk, a directory that cannot be written: said, not traced
        print(f"evbench: {disk_error(exc, 'a file')}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
