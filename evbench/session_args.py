"""The flags of a measured session (evbench.options.SessionOptions), one table for every command
that drives a system, so that each means the same in `run`, `search` and `memory`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from contract.errors import EvbenchError
from evbench.lab_args import check_system, fanout_values, lab_settings
from evbench.profiles import pprof_target, profile_request
from evbench.scrape import scrape_target
from loadgen.settings import knobs_from_args
from runtime.argtypes import (
    clock_shift_ms,
    directory_path,
    path_component,
    positive_seconds,
    seconds,
    workers_on_this_host,
)
from runtime.runs import default_runs_dir, unusable_directory

# (flag, argparse keywords): the one place a session flag is spelled and explained.
_FLAGS: dict[str, dict[str, Any]] = {
    "--run-id": dict(
        type=path_component("run id"), default=None, help="run name (default: the next free one)"
    ),
    "--runs-dir": dict(
        type=directory_path,
        default=None,
        help="where runs are written (default ./runs, or $EVBENCH_RUNS_DIR)",
    ),
    "--workers": dict(
        type=workers_on_this_host,
        default=1,
        metavar="N",
        help="sender processes on this host (default 1); above 1 they form a Locust fleet, "
        "each sending every Nth slot from one start instant, with Locust's statistics in "
        "<sut>/logs/. Workers on one host share its cores with the receiver and the lab, so "
        "more workers than cores raise lag; across hosts use `evbench send --master`",
    ),
    "--receiver-clock-shift": dict(
        type=clock_shift_ms,
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
    "--scrape": dict(
        type=scrape_target,
        action="append",
        default=[],
        metavar="[NAME=]URL",
        help="a Prometheus text endpoint of the system to scrape during the run (repeatable), "
        "e.g. dispatcher=http://10.0.0.7:8081/metrics; samples go to <sut>/samples/metrics/ and "
        "the report plots them beside the steps. A lab system's own /metrics are scraped anyway",
    ),
    "--scrape-interval": dict(
        type=positive_seconds,
        default=1.0,
        metavar="S",
        help="seconds between scrapes of each endpoint, and the longest one scrape may take "
        "(default 1)",
    ),
    "--profile": dict(
        type=profile_request,
        default=None,
        metavar="STEP[:SECONDS]",
        help="profile the lab's Python processes with py-spy during pace step STEP (a search: "
        "probe STEP), for SECONDS or the whole step: flame graphs (SVG), speedscope files and "
        "raw stacks in <sut>/profiles/step-STEP/, linked from the report",
    ),
    "--pprof": dict(
        type=pprof_target,
        action="append",
        default=[],
        metavar="NAME=URL",
        help="a Go service's pprof base (e.g. api=http://10.0.0.7:8008/debug/pprof) whose CPU "
        "profile (URL/profile?seconds=N) is fetched during the --profile step and its heap "
        "(URL/heap) at the step's end, stored as they come with the `go tool pprof` command "
        "(repeatable)",
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
    """SessionOptions' fields as the flags give them, for the flags the command has (memory
    sends no pace and waits for no stragglers: SessionOptions' defaults stand for the rest);
    evbench.lab_args adds the system's and the receiver's address, loadgen.settings the
    sender's knobs."""
    grace, grace_cap = getattr(args, "grace", None), getattr(args, "grace_cap", None)
    if grace is not None and grace_cap is not None and grace > grace_cap:
        # The cap would silently win: a contradiction, named.
        raise EvbenchError(
            f"--grace {grace:g} is longer than --grace-cap {grace_cap:g}: the wait for "
            "deliveries never reaches its grace (raise --grace-cap, or lower --grace)"
        )
    lab = lab_settings(args)
    check_system(args, lab)
    kwargs: dict[str, Any] = {
        "runs_dir": runs_dir(args),
        "run_id": args.run_id,
        "lab": lab,
        "fanouts": fanout_values(args),
        "receiver_host": args.receiver_host,
        "receiver_port": args.receiver_port,
        "receiver_url": args.receiver_url,
        **insight_kwargs(args),
    }
    for dest, name in _OPTIONAL:
        if hasattr(args, dest):
            kwargs[name] = getattr(args, dest)
    if (knobs := knobs_from_args(args)) is not None:
        kwargs["send"] = knobs
    return kwargs


# (flag's dest, SessionOptions' field) of the session flags a command may leave out.
_OPTIONAL = (
    ("workers", "workers"),
    ("receiver_clock_shift", "receiver_clock_shift_ms"),
    ("grace", "grace_s"),
    ("grace_cap", "grace_cap_s"),
)


def runs_dir(args: argparse.Namespace) -> Path:
    """--runs-dir (or its default), once it is known to be a directory this user can write
    into, or make: a file there, or a read-only place, fails here in one line, not after the
    instruments started."""
    where = args.runs_dir or default_runs_dir()
    if problem := unusable_directory(where):
        raise EvbenchError(f"--runs-dir: {problem}")
    return Path(where)


def insight_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """What to scrape and profile (the flags a command has; memory has only the scrape)."""
    scrape = tuple(getattr(args, "scrape", ()))
    names = [target.name for target in scrape]
    if dupes := sorted({name for name in names if names.count(name) > 1}):
        raise EvbenchError(f"--scrape names {', '.join(dupes)} more than once: name each apart")
    pprof = tuple(getattr(args, "pprof", ()))
    profile = getattr(args, "profile", None)
    if pprof and profile is None:
        raise EvbenchError("--pprof needs --profile STEP[:SECONDS]: it says when to profile")
    return {
        "scrape": scrape,
        "scrape_interval_s": getattr(args, "scrape_interval", 1.0),
        "profile": profile,
        "pprof": pprof,
    }
