"""`--fault` and `--fault-exec`, one table for `run` (faults in a pace's steps) and `search`
(faults in its probes): each value read by its parser (evbench.faultspec), all of them checked
against every system the command drives before anything starts."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from contract.errors import EvbenchError
from evbench.faultspec import EXEC_TIMEOUT_S, Fault, check_faults, parse_fault, parse_fault_exec
from loadgen.pace import Step

if TYPE_CHECKING:
    from suts.settings import LabSettings


def _argument(parse: Callable[[str], Fault]) -> Callable[[str], Fault]:
    def checked(text: str) -> Fault:
        try:
            return parse(text)
        except ValueError as exc:  # argparse would say only "invalid value"
            raise argparse.ArgumentTypeError(str(exc)) from None

    return checked


# (flag, parser, metavar, help with {step} for what STEP counts): both repeatable.
_FAULT_FLAGS = (
    (
        "--fault", parse_fault, "STEP@OFFSET:ACTION:TARGET[:DURATION]",
        "inject a fault into a lab system during {step} STEP (or `every` {step}), OFFSET (5s, "
        "500ms) after its first slot (repeatable): kill (SIGKILL, brought back after DURATION, "
        "default at once), pause (SIGSTOP for DURATION) or restart (a graceful stop and a new "
        "start) TARGET, one of the system's processes by role (ingress, channel, dispatcher, "
        "filter, adapter, broker); it must begin and end inside its {step}. run.json records "
        "when each was done and when its target was back, e.g. {example}:kill:dispatcher:1s",
    ),
    (
        "--fault-exec", parse_fault_exec, "STEP@OFFSET:COMMAND",
        "run your own shell COMMAND at that instant of {step} STEP (repeatable), e.g. "
        "{example}:kubectl delete pod -l app=dispatcher; its exit code, time and the end of its "
        f"output go to run.json, and one still running after {EXEC_TIMEOUT_S:g} s is killed; "
        "what it leaves running in its process group is killed at the end of the run, and "
        "said; neither stops the run",
    ),
)  # fmt: skip


def add_fault_arguments(parser: argparse.ArgumentParser, step: str, example: str) -> None:
    """The two flags, STEP counting `step`s (`step` of a pace, `probe` of a search)."""
    for flag, parse, metavar, help_text in _FAULT_FLAGS:
        parser.add_argument(
            flag, type=_argument(parse), action="append", default=[], metavar=metavar,
            help=help_text.format(step=step, example=example),
        )  # fmt: skip


def checked_faults(
    args: argparse.Namespace, lab: LabSettings, systems: Sequence[str], steps: Sequence[Step]
) -> tuple[Fault, ...]:
    """The faults asked for, each checked against every system driven and `steps`."""
    from suts.lab import driver_for

    faults = (*args.fault, *args.fault_exec)
    for system in systems:
        try:
            check_faults(faults, steps, driver_for(system).fault_targets(lab), system)
        except ValueError as exc:
            raise EvbenchError(str(exc)) from None
    return faults
