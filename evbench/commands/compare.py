"""`evbench compare`: the same systems across analysed runs, side by side."""

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
        help="the same SUTs across analysed runs: breaking points and P99.99 side by side",
        description="Print one line per SUT with each run's breaking point, max sustainable "
        "rate and e2e P99.99, and, for every run after the first, whether its e2e P99 and "
        "P99.99 are better, worse or indistinguishable from the first run's (only where their "
        "95 %% confidence intervals part); write an HTML comparison (default "
        "runs/compare.html).",
    )
    compare.add_argument(
        "runs", type=Path, nargs="+", help="analysed run directories, the first the baseline"
    )
    compare.add_argument("--out", type=Path, default=None, help="HTML file to write")
    compare.add_argument(
        "--tolerance", type=share, default=0.0, metavar="PERCENT",
        help="call a change only beyond this share of the baseline's interval, e.g. 5%% "
        "(default 0)",
    )  # fmt: skip
    compare.add_argument(
        "--fail-on-regression", action="store_true",
        help="exit 3 when a system's e2e P99 or P99.99 came out worse than in the first run "
        "(for CI)",
    )  # fmt: skip
    compare.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    from analysis.comparison import (
        comparison_rows,
        comparison_text,
        regressions,
        with_changes,
        write_comparison,
    )

    out = args.out or args.runs[0].parent / "compare.html"
    flag = "--out" if args.out else "the comparison (--out)"
    _check_out(flag, out)  # before the runs are read: a wrong --out is a one-line error
    rows = with_changes(comparison_rows(args.runs), args.tolerance)
    print(comparison_text(rows))
    try:
        written = write_comparison(rows, out)
    except OSError as exc:
        raise EvbenchError(f"{flag}: cannot write {out}: {exc.strerror or exc}") from None
    echo(f"  -> {written}")
    worse = regressions(rows)
    for line in worse:
        echo(f"regression: {line}")
    return OBJECTIVE_BREACHED if worse and args.fail_on_regression else 0


def _check_out(flag: str, out: Path) -> None:
    """The HTML file can be written: not a directory, in a directory that exists (a missing
    one is a typo more often than a wish) and is writable."""
    if out.is_dir():
        raise EvbenchError(f"{flag} {out} is a directory: name a file, e.g. {out / 'compare.html'}")
    if not out.parent.is_dir():
        raise EvbenchError(f"{flag} {out}: no directory {out.parent} (make it first)")
    if problem := unusable_directory(out.parent):
        raise EvbenchError(f"{flag} {out}: {problem}")
