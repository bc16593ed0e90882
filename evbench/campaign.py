"""The campaign: every system (or scenario) of a command in turn under one run id, the one loop
above the session (OpenMessaging Benchmark's workloads x drivers loop), written once for `run`,
`search` and `memory`:

- before anything starts, a directory an earlier run left is refused (results are never
  overwritten), so no system's records land beside another run's;
- each item is a policy's session; an item that fails after it recorded something (its run.json
  or scenario) is said and the campaign goes on, while an error before anything was recorded (a
  bad option, a missing tool) stops it, since every later item would fail the same way;
- the first interrupted item stops the campaign: the user asked to stop, not to skip one;
- the exit code is that of the worst item: 130 interrupted, 1 failed, 0 completed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from contract.documents import RunStatus
from contract.errors import EvbenchError
from runtime.runs import refuse_taken

_EXIT_CODES: dict[str, int] = {"completed": 0, "interrupted": 130}
# A run that completed, analysed, and missed an objective (`--slo`): for CI, apart from a
# failure (1) and a bad input (2).
OBJECTIVE_BREACHED = 3
# Which code a command with several says: the most severe (an interruption, then a bad input,
# a failure, a breached objective, success).
_SEVERITY = {0: 0, OBJECTIVE_BREACHED: 1, 1: 2, 2: 3, 130: 4}


def worst_exit_code(codes: Iterable[int]) -> int:
    return max(codes, key=lambda code: _SEVERITY.get(code, 2), default=0)


def exit_code(status: str) -> int:
    """An item's exit code: 0 completed, 130 interrupted, 1 otherwise (failed)."""
    return _EXIT_CODES.get(status, 1)


def campaign_exit_code(statuses: Iterable[str]) -> int:
    """The campaign's: the worst of its items' (interrupted over failed over completed)."""
    return max((exit_code(s) for s in statuses), default=0)


class Policy(Protocol):
    """What a command brings to the campaign (OpenMessaging Benchmark's narrow driver): what to
    run, where each item records, how one item is driven (a session of its own), and whether
    it left a record."""

    noun: str  # what an item is called in the lines: "system", "scenario"

    def items(self) -> Sequence[str]: ...

    def roots(self) -> Iterable[Path]:
        """Where the items record: none may exist before the campaign starts."""
        ...

    def drive(self, name: str) -> RunStatus: ...

    def recorded(self, name: str) -> bool:
        """Whether the item left a record (so that its failure is said and the campaign goes
        on; otherwise the error stops it)."""
        ...


def each(policy: Policy, echo: Callable[[str], None]) -> list[RunStatus]:
    """Every item of `policy` in turn (numbered when there are several), once no directory an
    item records in exists; the statuses of those driven."""
    names, noun = policy.items(), policy.noun
    refuse_taken(policy.roots())
    statuses: list[RunStatus] = []
    for number, name in enumerate(names, 1):
        if len(names) > 1:
            echo(f"[{number}/{len(names)}] {name}")
        try:
            status = policy.drive(name)
        except EvbenchError as exc:
            if not policy.recorded(name):
                raise
            more = f"\ngoing on with the next {noun}" if number < len(names) else ""
            echo(f"{name} failed: {exc}{more}")
            status = "failed"
        statuses.append(status)
        if status == "interrupted":
            left = len(names) - number
            echo(f"stopping: {left} {noun}{'' if left == 1 else 's'} not run")
            break
    return statuses
