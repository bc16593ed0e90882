"""The analysed runs that `compare` and `run --baseline` read, checked before anything is read
into them (and, for `run --baseline`, before the run is made): every analysed system's
summary.json and run.json readable and of their types' shape (contract.shapes), and every paced
run of the baseline's pace (a search has none: it is compared by capacity). A file cut short or
edited is one line naming it, exit 2, not a traceback after the comparison started, or after a
whole run; runs of two paces are refused, not called better or worse (a step of another rate is
no regression)."""

from __future__ import annotations

from pathlib import Path

from contract.documents import RunDoc
from contract.errors import EvbenchError
from contract.layout import SutDir
from contract.shapes import RUN_JSON_NEEDS, read_shaped
from contract.summarydocs import SummaryDoc
from runtime.runs import analysed_summaries


def analysed_paces(run_dir: Path, missing: str) -> set[str]:
    """The paces `run_dir`'s analysed systems ran (a search's left out: it has no pace, and is
    compared by capacity), each one's summary.json and run.json checked; `missing`: what to
    say when none is analysed."""
    summaries = analysed_summaries(run_dir)
    if not summaries:
        raise EvbenchError(missing)
    again = f"analyse the run again to write it anew (`evbench analyze {run_dir}`)"
    not_as_written = "not as evbench writes run.json: restore it, or leave this run out"
    paces = set()
    for path in summaries:
        summary = read_shaped(path, SummaryDoc, again)
        run_json = SutDir(path.parent.parent).run_json
        if run_json.is_file():  # a summary without its run.json: the comparison needs none
            read_shaped(run_json, RunDoc, not_as_written, RUN_JSON_NEEDS)
        if "search" not in summary:
            paces.add(summary["pace"])
    return paces


def check_compared(runs: list[Path]) -> None:
    """`compare`'s runs (the first the baseline): each analysed, readable, of its shape, and of
    the baseline's pace."""
    base = analysed_paces(
        runs[0], f"{runs[0]}: no analysed SUTs; run `evbench analyze {runs[0]}` first"
    )
    for run in runs[1:]:
        paces = analysed_paces(run, f"{run}: no analysed SUTs; run `evbench analyze {run}` first")
        if paces and base and paces != base:
            raise EvbenchError(
                f"{run} ran pace {_named(paces)}, the baseline {runs[0]} {_named(base)}: compare "
                "runs of one pace (a step at another rate is no regression)"
            )


def check_baseline(baseline: Path, pace: str) -> None:
    """`run --baseline DIR`, before the run is made: an analysed run of this run's pace, every
    file the comparison reads of its shape."""
    paces = analysed_paces(
        baseline,
        f"--baseline {baseline}: no analysed SUTs there; give a run directory `evbench analyze` "
        "has analysed (runs/<run-id>-<pace>)",
    )
    if paces and paces != {pace}:
        raise EvbenchError(
            f"--baseline {baseline} ran pace {_named(paces)}, this run's is '{pace}': give a "
            f"baseline of pace '{pace}' (a step at another rate is no regression)"
        )


def _named(paces: set[str]) -> str:
    return " and ".join(f"'{pace}'" for pace in sorted(paces))
