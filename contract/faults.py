"""Faults injected inside a run (`--fault`, `--fault-exec`), as run.json records each one: what was
asked, when it was done, and when its target was back. Written by evbench.faults, read by the
analysis, which places every fault on the run's time axis."""

# No `from __future__ import annotations`: TypedDict reads NotRequired[...] at definition time.

from typing import Literal, NotRequired, TypedDict

FaultAction = Literal["kill", "pause", "restart", "exec"]
# What `--fault` does to a lab process (`exec` is `--fault-exec`'s, the user's own command).
LAB_FAULT_ACTIONS: tuple[FaultAction, ...] = ("kill", "pause", "restart")


class FaultDoc(TypedDict):
    """One fault: its spec and what became of it. Times are the orchestrator's wall clock."""

    spec: str  # as given, e.g. "2@5s:kill:dispatcher:1s"
    step: int  # the pace's step it falls in (`every` is one fault per step)
    offset_s: float  # from the step's first slot
    action: FaultAction
    target: str  # a component's role, or the command (exec)
    duration_s: float | None  # kill: until brought back; pause: until resumed
    due_ns: int  # the instant asked for (the step's start plus the offset)
    at_ns: int | None  # when it was done; None: the run ended before it was due
    back_ns: int | None  # when the target was running (and ready) again; exec: when it ended
    pids: list[int]  # the target's processes: before, and after it was brought back
    error: str | None  # why it could not be done, or the target not brought back
    # exec: the user's command
    exit_code: NotRequired[int | None]  # None: it hung past the bound and was killed
    output: NotRequired[str]  # the end of what it printed (stdout and stderr)
    # what it left running when the run ended: in its process group, killed then; outside it
    # (started with setsid) and still holding its output open, said and left alone
    left_killed: NotRequired[list[int]]
    left_running: NotRequired[list[int]]
