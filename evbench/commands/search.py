"""`evbench search`: the highest rate a system sustains, found by probing, as one run."""

from __future__ import annotations

import argparse
from pathlib import Path

from evbench.commands import echo
from evbench.commands.analyze import analyze_path
from evbench.lab_args import SUT_HELP, add_lab_arguments, lab_settings
from evbench.shared.argtypes import at_least_one, seconds
from evbench.shared.errors import EvbenchError
from evbench.shared.layout import default_runs_dir
from loadgen.settings import add_knob_arguments, knobs_from_args


def _whole_seconds(text: str) -> int:
    value = seconds(text)
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"{text}: a probe holds for whole seconds, at least 1")
    return int(value)


def add(commands: argparse._SubParsersAction) -> None:
    search = commands.add_parser(
        "search",
        help="find the highest rate a system sustains (grow, bisect, confirm)",
        description="Probe one system: grow the rate geometrically from --from until a probe "
        "breaks, bisect between the highest holding and the lowest breaking rate until the "
        "gap is within --resolution, then confirm the answer with a --confirm-long hold (if it "
        "breaks, step down and confirm again). Each probe is judged by the reports' breaking-"
        "point rule and the optional --slo; a probe the sender could not hold ends the search "
        "saying the instrument is the limit. The probes are the steps of one run, analysed "
        "like any other.",
        epilog=SUT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_lab_arguments(search)
    search.add_argument("--from", dest="from_per_s", type=at_least_one, default=500, metavar="R")
    search.add_argument("--max", dest="max_per_s", type=at_least_one, default=100_000, metavar="R")
    search.add_argument(
        "--resolution", default="2%", help="how close the bracket must close: 2%% or 50/s"
    )
    search.add_argument("--hold", type=_whole_seconds, default=30, metavar="S", help="each probe")
    search.add_argument(
        "--confirm", type=_whole_seconds, default=120, metavar="S", help="the final hold"
    )
    search.add_argument("--slo", default="", help="also require, e.g. e2e-p99<=200ms,lost<=0.1%%")
    search.add_argument(
        "--fresh", action="store_true", help="restart the system before every probe (2019)"
    )
    search.add_argument(
        "--settle", type=seconds, default=10.0, metavar="S", help="pause between warm probes"
    )
    search.add_argument("--run-id", default=None)
    search.add_argument("--runs-dir", type=Path, default=None)
    search.add_argument("--no-analyze", action="store_true")
    add_knob_arguments(search)
    search.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    from evbench.probejudge import parse_objective
    from evbench.search import SearchOptions, search
    from evbench.searchplan import SearchPlan, parse_resolution

    if not args.sut or len(args.sut) != 1:
        raise EvbenchError("search one system at a time: --sut NAME")
    if args.warmup:
        raise EvbenchError("--warmup does not apply to a search: its first probes warm the system")
    try:
        plan = SearchPlan(
            args.from_per_s,
            args.max_per_s,
            parse_resolution(args.resolution),
            probe_s=args.hold,
            confirm_s=args.confirm,
        )
        objective = parse_objective(args.slo)
    except ValueError as exc:
        raise EvbenchError(str(exc)) from None
    opts = SearchOptions(
        sut=args.sut[0],
        plan=plan,
        runs_dir=args.runs_dir or default_runs_dir(),
        run_id=args.run_id,
        send=knobs_from_args(args),
        lab=lab_settings(args),
        fresh=args.fresh,
        settle_s=args.settle,
        objective=objective,
    )
    sut_dir, result = search(opts, echo)
    if args.no_analyze:
        return 0
    code = analyze_path(sut_dir.root, "local[*]", 0.0)
    return code if result is not None else 130
