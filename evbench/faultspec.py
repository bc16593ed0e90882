"""What `--fault` and `--fault-exec` ask for, read and checked before anything starts (pure).

    --fault STEP@OFFSET:ACTION:TARGET[:DURATION]     kill, pause or restart a lab component
    --fault-exec STEP@OFFSET:COMMAND                 run the user's own command

STEP is a step of the pace (1 is the first after any warm-up) or `every` (the same fault in each
step); OFFSET and DURATION are seconds (`5`, `5s`, `1.5s`) or milliseconds (`500ms`). `kill`
sends SIGKILL and brings the component back after DURATION (default 0: at once, as a Deployment
would); `pause` stops it (SIGSTOP) for DURATION, which it needs; `restart` stops it gracefully
and starts it again, and takes none. A bad spec is a ValueError naming it and what to write.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from contract.faults import LAB_FAULT_ACTIONS, FaultAction
from loadgen.pace import Step

EVERY = "every"
MAX_SECONDS = 86_400.0  # an offset or duration past a day is a typo, not a fault
EXEC_TIMEOUT_S = 60.0  # a user's command that takes longer is killed, and the run goes on
_SECONDS = re.compile(r"^(?P<number>\d+(?:\.\d+)?)(?P<unit>ms|s)?$")
FAULT_HELP = "STEP@OFFSET:ACTION:TARGET[:DURATION], e.g. 2@5s:kill:dispatcher:1s"
FAULT_EXEC_HELP = "STEP@OFFSET:COMMAND, e.g. 2@5s:kubectl delete pod -l app=dispatcher"


@dataclass(frozen=True)
class Fault:
    spec: str  # as given
    step: int | None  # None: every step
    offset_s: float
    action: FaultAction
    target: str  # a role of the system (or an alias of one), or the command of `exec`
    duration_s: float | None


def _seconds(text: str, what: str, spec: str) -> float:
    found = _SECONDS.match(text.strip())
    if not found:
        raise ValueError(f"fault '{spec}': {what} '{text}' is not a time: use 5, 5s or 500ms")
    value = float(found["number"]) / (1000 if found["unit"] == "ms" else 1)
    if not math.isfinite(value) or value > MAX_SECONDS:
        raise ValueError(f"fault '{spec}': {what} '{text}' is over a day ({MAX_SECONDS:g} s)")
    return value


def _when(text: str, spec: str, usage: str) -> tuple[int | None, float]:
    """STEP@OFFSET."""
    step_text, at, offset_text = text.partition("@")
    if not at:
        raise ValueError(f"fault '{spec}': no STEP@OFFSET: use {usage}")
    step_text = step_text.strip()
    if step_text == EVERY:
        step = None
    elif step_text.isdigit() and int(step_text) >= 1:
        step = int(step_text)
    else:
        raise ValueError(f"fault '{spec}': step '{step_text}' is not a step number (1, 2, ...) or "
                         f"'{EVERY}'")  # fmt: skip
    return step, _seconds(offset_text, "offset", spec)


def parse_fault(text: str) -> Fault:
    """`--fault`'s value."""
    when, _, rest = text.partition(":")
    step, offset_s = _when(when, text, FAULT_HELP)
    action, _, rest = rest.partition(":")
    target, _, duration_text = rest.partition(":")
    action, target = action.strip(), target.strip()
    if action not in LAB_FAULT_ACTIONS:
        choose = ", ".join(LAB_FAULT_ACTIONS)
        raise ValueError(
            f"fault '{text}': action '{action}' is not one of {choose} (a command of your own: "
            "--fault-exec)"
        )
    if not target:
        raise ValueError(f"fault '{text}': no TARGET: use {FAULT_HELP}")
    duration_s = _seconds(duration_text, "duration", text) if duration_text.strip() else None
    if action == "pause" and duration_s is None:
        raise ValueError(f"fault '{text}': pause needs a DURATION, e.g. {when}:pause:{target}:2s")
    if action == "restart" and duration_s is not None:
        raise ValueError(f"fault '{text}': restart takes no DURATION (it is back once ready)")
    if action == "kill" and duration_s is None:
        duration_s = 0.0
    return Fault(text, step, offset_s, action, target, duration_s)


def parse_fault_exec(text: str) -> Fault:
    """`--fault-exec`'s value: the command is everything after the first colon past the step."""
    when, _, command = text.partition(":")
    step, offset_s = _when(when, text, FAULT_EXEC_HELP)
    if not command.strip():
        raise ValueError(f"fault '{text}': no COMMAND: use {FAULT_EXEC_HELP}")
    return Fault(text, step, offset_s, "exec", command.strip(), None)


def check_faults(
    faults: Sequence[Fault],
    steps: Sequence[Step],
    targets: Mapping[str, tuple[str, tuple[str, ...]]],
    system: str,
) -> None:
    """Each fault begins and ends inside its step (a fault outlasting its step would be read as
    the next step's capacity), each lab fault names a process of `system` that takes its action
    (`targets`: the names it answers to, aliases included -> (its role, the actions it takes);
    suts.driver.Sut.fault_targets), and no two faults hold one process at once."""
    for fault in faults:
        where = f"fault '{fault.spec}'"
        if fault.step is not None and fault.step > len(steps):
            raise ValueError(f"{where}: the pace has {len(steps)} step(s)")
        shortest = min(
            (steps[fault.step - 1],) if fault.step is not None else steps,
            key=lambda step: step.duration_s,
        )
        ends_s = fault.offset_s + (fault.duration_s or 0.0)
        if fault.offset_s >= shortest.duration_s or ends_s >= shortest.duration_s:
            raise ValueError(
                f"{where}: it must begin and end inside its step of {shortest.duration_s} s "
                f"(here it {'ends at' if fault.duration_s else 'begins at'} {ends_s:g} s)"
            )
        if fault.action != "exec":
            _check_target(fault, targets, system)
    _check_overlaps([f for f in faults if f.action != "exec"], targets)


def _check_target(
    fault: Fault, targets: Mapping[str, tuple[str, tuple[str, ...]]], system: str
) -> None:
    where = f"fault '{fault.spec}'"
    if not targets:
        raise ValueError(f"{where}: {system} has no processes of the lab's to fault; on "
                         "your own system use --fault-exec with your own command")  # fmt: skip
    if fault.target not in targets:
        names = ", ".join(sorted(targets))
        raise ValueError(f"{where}: {system} has no '{fault.target}': choose from {names}")
    role, actions = targets[fault.target]
    if fault.action not in actions:
        raise ValueError(f"{where}: {system}'s {role} can only be faulted with "
                         f"{', '.join(actions)}")  # fmt: skip


def _check_overlaps(
    faults: Sequence[Fault], targets: Mapping[str, tuple[str, tuple[str, ...]]]
) -> None:
    """Two faults on one process (aliases resolved) in one step may not overlap: the second
    would act on a process the first has killed or stopped. (`every` is in each step.)"""
    for i, one in enumerate(faults):
        for other in faults[i + 1 :]:
            same_step = one.step is None or other.step is None or one.step == other.step
            if not same_step or targets[one.target][0] != targets[other.target][0]:
                continue
            first, second = sorted((one, other), key=lambda f: f.offset_s)
            # a restart is down for as long as it takes to start again: leave a second for it
            held_s = first.duration_s if first.duration_s is not None else 1.0
            if second.offset_s <= first.offset_s + held_s:
                raise ValueError(
                    f"faults '{one.spec}' and '{other.spec}' hold the same process at once: "
                    "put one after the other has ended"
                )


def per_step(faults: Sequence[Fault], steps: Sequence[int]) -> list[Fault]:
    """The faults of these `steps` (by number), each with its step: one of `every` for each.
    (A search's probe is one step of its own: only its faults.)"""
    return [
        replace(fault, step=number)
        for fault in faults
        for number in steps
        if fault.step in (None, number)
    ]
