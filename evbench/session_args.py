"""The flags of a measured session (evbench.options.SessionOptions), one table for every command
that drives a system, so that each means the same in `run`, `search` and `memory`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from contract.argtypes import at_least_one, seconds, signed_milliseconds
from contract.layout import default_runs_dir
from evbench.lab_args import lab_settings
from loadgen.settings import knobs_from_args

# (flag, argparse keywords): the one place a session flag is spelled and explained.
_FLAGS: dict[str, dict[str, Any]] = {
    "--run-id": dict(default=None, help="run name (default: the next free one)"),
    "--runs-dir": dict(
        type=Path,
        default=None,
        help="where runs are written (default ./runs, or $EVBENCH_RUNS_DIR)",
    ),
    "--workers": dict(
        type=at_least_one,
        default=1,
        metavar="N",
        help="sender processes on this host (default 1); above 1 they form a Locust fleet, "
        "each sending every Nth slot from one start instant, with Locust's statistics in "
        "<sut>/logs/. Workers on one host share its cores with the receiver and the lab, so "
        "more workers than cores raise lag; across hosts use `evbench send --master`",
    ),
    "--receiver-clock-shift": dict(
        type=signed_milliseconds,
        default=0.0,
        metavar="MS",
        help="run the receiver as if its host's clock were MS milliseconds ahead (negative: "
        "behind), to see the clock correction at work (default 0)",
    ),
    "--grace": dict(
        type=seconds,
        default=5.0,
        metavar="S",
        help="stop waiting for deliveries after this long without one (default 5)",
    ),
    "--grace-cap": dict(
        type=seconds,
        default=60.0,
        metavar="S",
        help="never wait for deliveries longer than this (default 60)",
    ),
    "--no-analyze": dict(
        action="store_true",
        help="skip the Spark analysis at the end (run `evbench analyze` later)",
    ),
}


def add_session_arguments(
    parser: argparse.ArgumentParser, only: tuple[str, ...] | None = None, **help_for: str
) -> None:
    """The session's flags (`only` those, by dest, where a command takes no others); `help_for`
    gives a command's own help for a flag (by its dest, e.g. grace_cap=...) where the flag does
    more there."""
    for flag, kwargs in _FLAGS.items():
        dest = flag.removeprefix("--").replace("-", "_")
        if only is not None and dest not in only:
            continue
        help_text = help_for.get(dest, kwargs["help"])
        parser.add_argument(flag, **{**kwargs, "help": help_text})


def add_flags(
    parser: argparse.ArgumentParser, flags: tuple[tuple[str, dict[str, Any]], ...]
) -> None:
    """A command's own flags from its table (flag, argparse keywords)."""
    for flag, kwargs in flags:
        parser.add_argument(flag, **kwargs)


def session_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """SessionOptions' fields as the flags give them (evbench.lab_args adds the system's and
    the receiver's address; loadgen.settings the sender's knobs)."""
    return {
        "runs_dir": args.runs_dir or default_runs_dir(),
        "run_id": args.run_id,
        "send": knobs_from_args(args),
        "lab": lab_settings(args),
        "workers": args.workers,
        "receiver_host": args.receiver_host,
        "receiver_port": args.receiver_port,
        "receiver_url": args.receiver_url,
        "receiver_clock_shift_ms": args.receiver_clock_shift,
        "grace_s": args.grace,
        "grace_cap_s": args.grace_cap,
    }
