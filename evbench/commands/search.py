"""`evbench search`: the highest rate a system sustains, found by probing, as one run."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from contract.documents import RunStatus
from contract.errors import EvbenchError
from contract.layout import SutDir, sut_dir_for
from evbench.campaign import campaign_exit_code, each, worst_exit_code
from evbench.commands import Subcommands, echo
from evbench.commands.analyze import (
    add_plot_metric_argument,
    add_slo_argument,
    add_verbose_argument,
    analyze_path,
)
from evbench.commands.faultflags import add_fault_arguments, checked_faults
from evbench.lab_args import SUT_HELP, add_lab_arguments
from evbench.searchplan import SearchPlan, parse_resolution
from evbench.session_args import add_flags, add_session_arguments, session_kwargs
from loadgen.pace import Step
from loadgen.settings import add_knob_arguments
from runtime.argtypes import at_least_one, seconds
from runtime.parquet import part_files


def _whole_seconds(text: str) -> int:
    value = seconds(text)
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"{text}: a probe holds for whole seconds, at least 1")
    return int(value)


_DESCRIPTION = """\
Find the highest rate each system sustains, by probing:

  1. grow the rate geometrically from --from until a probe breaks (or --max holds);
  2. bisect between the highest holding and the lowest breaking rate until the gap is
     within --resolution;
  3. confirm the answer with a --confirm hold; if it breaks, step down and confirm again.

Each probe is judged from its own records by the reports' breaking-point rule, plus the
optional --slo. A probe the sender could not hold is never a break: the search goes on
below that rate only, and when it can get no closer it stops, saying the instrument is the
limit (and how many --workers would hold the rate, when more would help).

Between warm probes the system settles until nothing has arrived for --settle (a backlog
left by a breaking probe would break the next one); one still delivering after --grace-cap
is restarted. --fresh restarts the system (and its broker) before every probe instead.

Several systems (--sut a,b; default: every local one) are searched in turn under one run
id. Every probe is a step of the run: `evbench analyze`, the report and `evbench compare`
show each system's capacity with its bracket and its probes.

  evbench search --sut channel-imc
  evbench search --sut broker-kafka --hold 15s --confirm 60s --resolution 5%
  evbench search --sut direct --from 8000 --workers 2
"""


# The flags of the plan: one table (evbench.session_args has the session's).
_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--from",
        dict(
            dest="from_per_s",
            type=at_least_one,
            default=500,
            metavar="R",
            help="the first probe's rate in events/s (default %(default)s)",
        ),
    ),
    (
        "--max",
        dict(
            dest="max_per_s",
            type=at_least_one,
            default=100_000,
            metavar="R",
            help="never probe above this rate (default %(default)s)",
        ),
    ),
    (
        "--resolution",
        dict(
            default="2%",
            help="stop bisecting when the highest hold and the lowest break are this close: a "
            "share of the rate (2%%) or a rate (50/s) (default %(default)s)",
        ),
    ),
    (
        "--hold",
        dict(
            type=_whole_seconds,
            default=30,
            metavar="S",
            help="each probe's hold (default 30 s; longer at low rates, so that a probe has the "
            "100 events the rule judges)",
        ),
    ),
    (
        "--confirm",
        dict(
            type=_whole_seconds,
            default=120,
            metavar="S",
            help="the confirming hold of the answer, like 1k-long (default 120 s)",
        ),
    ),
    (
        "--fresh",
        dict(
            action="store_true",
            help="restart the system (and its broker) before every probe, the 2019 discipline "
            "(default: warm, with --settle between probes)",
        ),
    ),
    (
        "--settle",
        dict(
            type=seconds,
            default=10.0,
            metavar="S",
            help="between warm probes, wait until nothing has arrived for this long (default 10)",
        ),
    ),
)


def add(commands: Subcommands) -> None:
    search = commands.add_parser(
        "search",
        help="find the highest rate a system sustains (grow, bisect, confirm)",
        description=_DESCRIPTION,
        epilog=SUT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_lab_arguments(search)
    add_flags(search, _FLAGS)
    add_knob_arguments(search)
    add_session_arguments(
        search,
        grace_cap="never wait for a probe's deliveries longer than this, nor for a warm system "
        "to settle longer than this or --settle, whichever is longer; a system still delivering "
        "then is restarted (default 60)",
        workers="sender processes per probe (default 1; above 1 a Locust fleet, as in `evbench "
        "run --workers`): for a system faster than one sender holds",
    )
    add_verbose_argument(search)
    add_plot_metric_argument(search)
    add_fault_arguments(search, "probe", "every@5s")
    add_slo_argument(search, "probe")
    search.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    from runtime.runs import next_run_id
    from suts.lab import LOCAL_SUTS

    plan = _plan(args)
    session = session_kwargs(args)
    if session["send"].warmup:
        raise EvbenchError("--warmup does not apply to a search: its first probes warm the system")
    suts = tuple(args.sut or LOCAL_SUTS)
    runs_dir = session["runs_dir"]
    session["run_id"] = args.run_id or next_run_id(runs_dir, "search")
    # Every probe holds for at least --hold: a fault must fit in that (and probe N may never
    # come: the search decides how many it makes).
    probes = max((f.step or 1 for f in (*args.fault, *args.fault_exec)), default=1)
    options = {
        "plan": plan,
        "objective": args.slo,
        "fresh": args.fresh,
        "settle_s": args.settle,
        "faults": checked_faults(args, session["lab"], suts, [Step(1, plan.probe_s)] * probes),
        **session,
    }
    systems = _Systems(suts, options)
    code = campaign_exit_code(each(systems, echo))
    if args.no_analyze or not any(part_files(systems.dir(n).sent) for n in systems.items()):
        return code
    names = systems.items()
    run_root = systems.dir(names[0]).root.parent
    where = run_root if len(names) > 1 else run_root / names[0]
    analysed = analyze_path(
        where, "local[*]", 0.0, verbose=args.verbose, plot_metrics=args.plot_metrics
    )
    return worst_exit_code([code, analysed])


def _plan(args: argparse.Namespace) -> SearchPlan:
    try:
        return SearchPlan(
            args.from_per_s,
            args.max_per_s,
            parse_resolution(args.resolution),
            probe_s=args.hold,
            confirm_s=args.confirm,
        )
    except ValueError as exc:
        raise EvbenchError(str(exc)) from None


class _Systems:
    """`search`'s campaign policy: one search per system and fan-out, under one run id."""

    noun = "system"

    def __init__(self, suts: tuple[str, ...], options: dict[str, Any]) -> None:
        from evbench.options import SearchOptions

        first = SearchOptions(**options)
        self.searches = {
            item.system_dir(): item
            for sut in suts
            for fanout in first.campaign_fanouts()
            for item in [replace(first, sut=sut).fanned(fanout)]
        }

    def items(self) -> tuple[str, ...]:
        return tuple(self.searches)

    def dir(self, name: str) -> SutDir:
        opts = self.searches[name]
        return sut_dir_for(opts.runs_dir, opts.run_id or "", "search", name)

    def roots(self) -> list[Path]:
        return [self.dir(name).root for name in self.searches]

    def drive(self, name: str) -> RunStatus:
        from evbench.search import search

        return search(self.searches[name], echo).status

    def recorded(self, name: str) -> bool:
        return self.dir(name).run_json.exists()
