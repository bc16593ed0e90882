"""`evbench compare`: the same systems across analysed runs, side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from evbench.commands import Subcommands, echo


def add(commands: Subcommands) -> None:
    compare = commands.add_parser(
        "compare",
        help="the same SUTs across analysed runs: breaking points and P99.99 side by side",
        description="Print one line per SUT with each run's breaking point, max sustainable "
        "rate and e2e P99.99, and write an HTML comparison (default runs/compare.html).",
    )
    compare.add_argument("runs", type=Path, nargs="+", help="analysed run directories")
    compare.add_argument("--out", type=Path, default=None, help="HTML file to write")
    compare.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    from analysis.report import comparison_rows, comparison_text, write_comparison

    rows = comparison_rows(args.runs)
    print(comparison_text(rows))
    out = args.out or args.runs[0].parent / "compare.html"
    echo(f"  -> {write_comparison(rows, out)}")
    return 0
