"""`python -m loadgen.fleet master|worker` (also `evbench send --master`, `evbench send --worker
--master-host HOST`): a Locust-coordinated fleet of open-loop senders.

    master:  the sender's own flags (--target, --pace, --out, knobs...) with --workers N, plus
             where to listen for workers; prints the fleet's lines as one sender would.
    worker:  --master-host HOST [--master-port P] [--out DIR]; runs one sender on its share.
"""

# First, before anything opens a socket: importing Locust monkey-patches this process for
# gevent (sockets, threads, subprocesses, signals). The pacers are child processes, unpatched.
import locust  # noqa: F401, I001

import argparse
import sys
from pathlib import Path

from runtime.argtypes import port_number, positive_seconds
from loadgen.fleet import master, worker
from loadgen.settings import add_sender_arguments, settings_from_args


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loadgen.fleet",
        description="A fleet of open-loop senders on Locust's master/worker runtime: the master "
        "splits the pace's slots across --workers N (every Nth slot each, one start instant) "
        "and prints the fleet's progress; each worker runs one sender on its share.",
    )
    roles = parser.add_subparsers(dest="role", required=True)
    lead = roles.add_parser("master", help="coordinate N workers (the sender's flags, plus ...)")
    add_sender_arguments(lead)
    lead.add_argument(
        "--bind-host",
        default="127.0.0.1",
        help="where workers connect (default 127.0.0.1; 0.0.0.0 for workers on other hosts)",
    )
    lead.add_argument(
        "--bind-port", type=port_number, default=5557, help="(default 5557; 0 picks one)"
    )
    lead.add_argument(
        "--expect-timeout",
        type=positive_seconds,
        default=60.0,
        metavar="S",
        help="give up unless --workers workers connect within this long (default 60)",
    )
    lead.add_argument("--locust-csv", metavar="PREFIX", help="write Locust's CSV statistics")
    lead.add_argument("--locust-html", type=Path, metavar="FILE", help="write Locust's report")
    follower = roles.add_parser("worker", help="run one sender for a fleet master")
    worker.add_arguments(follower)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.role == "worker":
        return worker.serve(args.master_host, args.master_port, args.out, args.log_dir)
    options = master.FleetOptions(
        workers=args.workers,
        bind_host=args.bind_host,
        bind_port=args.bind_port,
        expect_timeout_s=args.expect_timeout,
        locust_csv=args.locust_csv,
        locust_html=args.locust_html,
    )
    return master.serve(settings_from_args(args), options)


if __name__ == "__main__":
    sys.exit(main())
