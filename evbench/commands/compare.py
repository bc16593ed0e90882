"""`evbench compare`: the same systems across analysed runs, side by side; and the regression
gate that `compare --fail-on-regression` and `run --baseline DIR --fail-on-regression` share."""

from __future__ import annotations

import argparse
from pathlib import Path

from contract.errors import EvbenchError
from evbench.campaign import OBJECTIVE_BREACHED
from evbench.commands import Subcommands, echo
from runtime.argtypes import share
from runtime.runs import unusable_directory


def add(commands: Subcommands) -> None:
    compare = commands.add_parser(
        "compare",
        help="the same SUTs across analysed runs: capacity and each step side by side",
        description="Print one line per SUT with each run's breaking point, max sustainable "
        "rate and e2e P99.99; then, for every run after the first, its capacity (breaking "
        "point, max sustainable rate) beside the first run's, called higher (better) or lower "
        "(worse), and at each step both runs share (same rate, in order) the e2e P50, P99 and "
        "P99.99 in both, the change with its 95 %% interval and the call: better, worse or "
        "indistinguishable (only where the two 95 %% confidence intervals part; for a system "
        "repeated with `run --repeat`, where the ranges of its repeats part). Searches are "
        "compared by the rate they confirmed, their probes side by side; a search and a "
        "staircase by capacity only. Whole-run tails are shown, never called. Write an HTML "
        "comparison (default runs/compare.html).",
    )
    compare.add_argument(
        "runs", type=Path, nargs="+",
        help="analysed run directories, the first the baseline (unless --baseline names one)",
    )  # fmt: skip
    compare.add_argument("--out", type=Path, default=None, help="HTML file to write")
    add_regression_arguments(compare, "compare")
    compare.set_defaults(main=main)


def add_regression_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """--baseline, --tolerance and --fail-on-regression, one meaning for compare and run."""
    against = "the run just made" if command == "run" else "each later run"
    parser.add_argument(
        "--baseline", type=Path, default=None, metavar="DIR",
        help=f"an analysed run directory to compare {against} with, as `evbench compare` does "
        "(its calls printed, an HTML comparison written)",
    )  # fmt: skip
    parser.add_argument(
        "--tolerance", type=share, default=0.0, metavar="PERCENT",
        help="call a change only where the intervals part by more than this share of the "
        "baseline's bound, e.g. 5%% (default 0)",
    )  # fmt: skip
    parser.add_argument(
        "--fail-on-regression", action="store_true",
        help="exit 3 on a regression: a system's breaking point or max sustainable rate "
        "called lower than in the baseline, or its e2e P50, P99 or P99.99 called worse at a "
        "step both runs judged (for CI)",
    )  # fmt: skip


def main(args: argparse.Namespace) -> int:
    runs = [args.baseline, *args.runs] if args.baseline else list(args.runs)
    return gate(runs, args.out, args.tolerance, args.fail_on_regression)


def gate(runs: list[Path], out: Path | None, tolerance: float, fail: bool) -> int:
    """Compare `runs` (the first the baseline): the table printed, the page written, each
    regression said; OBJECTIVE_BREACHED (3) when `fail` and something came out worse."""
    from analysis.comparison import (
        calls_text,
        comparison_rows,
        comparison_text,
        regressions,
        with_changes,
        write_comparison,
    )
    from analysis.repeats import merged_rows
    from evbench.baseline import check_compared

    check_runs(runs)
    flag = "--out" if out else "the comparison (--out)"
    out = out or runs[0].parent / "compare.html"
    _check_out(flag, out)  # before the runs are read: a wrong --out is a one-line error
    check_compared(runs)  # each file read below of its shape, one pace: no traceback
    rows = with_changes(merged_rows(comparison_rows(runs)), tolerance)
    print(comparison_text(rows))
    if calls := calls_text(rows):
        print(calls)
    try:
        written = write_comparison(rows, out)
    except OSError as exc:
        raise EvbenchError(f"{flag}: cannot write {out}: {exc.strerror or exc}") from None
    echo(f"  -> {written}")
    _say_unmatched(rows)
    worse = regressions(rows)
    for line in worse:
        echo(f"regression: {line}")
    return OBJECTIVE_BREACHED if worse and fail else 0


def _say_unmatched(rows: list[dict[str, object]]) -> None:
    """Systems of a later run that the baseline does not have get no call: said; and when no
    system could be compared at all, that is an error (a gate that compared nothing must not
    pass)."""
    first = rows[0]["run"] if rows else None
    later = [r for r in rows if r["run"] != first]
    unmatched = [f"{r['sut']} in {r['run']}" for r in later if r["against"] == r["run"]]
    if later and len(unmatched) == len(later):
        raise EvbenchError(
            f"the baseline {first} has none of the systems of the runs after it "
            f"({', '.join(unmatched)}): nothing was compared"
        )
    for text in unmatched:
        echo(f"no baseline for {text}: not compared")


def check_runs(runs: list[Path]) -> None:
    """Each run once: a run against itself says nothing."""
    paths = [run.resolve() for run in runs]
    for path in dict.fromkeys(paths):
        if paths.count(path) > 1:
            raise EvbenchError(
                f"runs: {path} is given {paths.count(path)} times: compare different runs"
            )


def _check_out(flag: str, out: Path) -> None:
    """The HTML file can be written: not a directory, in a directory that exists (a missing
    one is a typo more often than a wish) and is writable."""
    if out.is_dir():
        raise EvbenchError(f"{flag} {out} is a directory: name a file, e.g. {out / 'compare.html'}")
    if not out.parent.is_dir():
        raise EvbenchError(f"{flag} {out}: no directory {out.parent} (make it first)")
    if problem := unusable_directory(out.parent):
        raise EvbenchError(f"{flag} {out}: {problem}")
