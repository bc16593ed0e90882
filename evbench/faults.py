"""Faults injected inside a paced step (`--fault`, `--fault-exec`), each at its instant.

Armed when the sender says when its schedule starts (its start line lists every step's offset),
each fault waits on a thread of its own until its step's start plus its offset, then does what it
says to a process of the lab's system (suts.driver.Sut: kill and bring back, pause and resume,
restart) or runs the user's own command, and notes in its FaultDoc (run.json's `faults`) when it
was done and when its target was back. A process faulted on purpose is not a death of the system
(Sut.faulted). Stopping (the session's teardown, before the system stops) cancels the faults not
yet due and resumes a paused process; a killed one is not brought back any more.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from contract.faults import FaultDoc
from contract.senderlines import PlannedStepDoc
from contract.units import NS_PER_S
from evbench.faultexec import Command
from evbench.faultspec import EXEC_TIMEOUT_S, Fault, per_step
from suts.driver import LISTEN_TIMEOUT_S, Sut
from suts.settings import LabSettings


class FaultInjector:
    def __init__(
        self,
        faults: Sequence[Fault],
        echo: Callable[[str], None],
        on_back: Callable[[str, int], None] = lambda role, pid: None,
        exec_timeout_s: float = EXEC_TIMEOUT_S,
    ) -> None:
        self.faults, self.echo, self.on_back = tuple(faults), echo, on_back
        self.exec_timeout_s = exec_timeout_s
        self.docs: list[FaultDoc] = []
        self.sut: Sut | None = None
        self._cancel = threading.Event()  # no fault starts any more (the sender has ended)
        self._stop = threading.Event()  # and those under way end now (the teardown)
        self._lock = threading.Lock()  # between starting a command and stopping
        self._threads: list[threading.Thread] = []
        self._commands: list[tuple[Command, FaultDoc]] = []  # the user's commands started

    def arm(self, start_ns: int, steps: Sequence[PlannedStepDoc], sut: Sut | None) -> None:
        """Each fault's instant from the schedule's start and its step's offset; the threads
        that wait for them started."""
        if not self.faults or self._threads:
            return
        self.sut = sut
        paced = {s["number"]: s for s in steps if not s["warmup"]}
        for fault in per_step(self.faults, sorted(paced)):
            assert fault.step is not None  # per_step gives each its step
            due_ns = start_ns + paced[fault.step]["start_offset_ns"]
            due_ns += round(fault.offset_s * NS_PER_S)
            doc: FaultDoc = {
                "spec": fault.spec, "step": fault.step, "offset_s": fault.offset_s,
                "action": fault.action, "target": fault.target, "duration_s": fault.duration_s,
                "due_ns": due_ns, "at_ns": None, "back_ns": None, "pids": [], "error": None,
            }  # fmt: skip
            self.docs.append(doc)
            thread = threading.Thread(
                target=self._run, args=(fault, doc), name=f"fault-{len(self.docs)}", daemon=True
            )
            self._threads.append(thread)
        for thread in self._threads:
            thread.start()

    def cancel_pending(self) -> None:
        """The sender has ended (completed, interrupted or dead): no fault starts any more, and
        those under way finish (a killed process is still brought back)."""
        self._cancel.set()

    def wait_ended(self, timeout_s: float, give_up: Callable[[], bool] = lambda: False) -> None:
        """The sender has ended: no fault starts any more, and those under way are waited for
        until they end by themselves (a pause after its duration, a kill once its target is
        back), at most `timeout_s` or until `give_up` (a Ctrl-C). Deliveries are awaited only
        then: a system down on purpose is not a quiet one, and its acked events are not lost
        because the grace for stragglers ran out while it came back."""
        self.cancel_pending()
        deadline = time.monotonic() + timeout_s
        under_way = [d for d in self.docs if d["at_ns"] is not None and d["back_ns"] is None]
        if under_way and any(t.is_alive() for t in self._threads):
            self.echo("waiting for the faults under way to end (a killed process to be back)")
        for thread in self._threads:
            while thread.is_alive() and time.monotonic() < deadline and not give_up():
                thread.join(0.1)

    def not_back(self) -> list[str]:
        """The lab faults done whose target did not come back (given up, or failed to start):
        the system must start afresh before it is measured again."""
        return [
            f"{d['target']} ({d['error']})" if d["error"] else d["target"]
            for d in self.docs
            if d["at_ns"] is not None and d["action"] != "exec"
            and (d["back_ns"] is None or d["error"] is not None)
        ]  # fmt: skip

    def stop(self) -> list[FaultDoc]:
        """The faults not yet due cancelled, those under way ended now (a paused process
        resumed, a command killed, a process being brought back given up), and what the
        user's commands left running killed; every fault's doc."""
        with self._lock:
            self._cancel.set()
            self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.exec_timeout_s + 5)
        with self._lock:  # each command's leftovers once, however often it is stopped
            commands, self._commands = self._commands, []
        for command, doc in commands:
            self._left_behind(command, doc)
        return self.docs

    def _left_behind(self, command: Command, doc: FaultDoc) -> None:
        """The run is over: what a command left in its process group is killed, and said; a
        process it started outside the group that still holds its output is said (not ours to
        kill: no group reaches it)."""
        said = f"fault `{command.text}`:"
        if killed := command.kill_group():
            doc["left_killed"] = [pid for pid, _ in killed]
            self.echo(f"{said} {_processes(killed)} it left running killed at the end of the run")
        if escaped := command.escaped():
            doc["left_running"] = [pid for pid, _ in escaped]
            self.echo(
                f"{said} {_processes(escaped)} it started outside its process group (setsid?) "
                "still running after the run: stop it yourself"
            )
        command.close()

    def _run(self, fault: Fault, doc: FaultDoc) -> None:
        if self._cancel.wait(max(0.0, (doc["due_ns"] - time.time_ns()) / NS_PER_S)):
            return  # the run ended before it was due
        try:
            if fault.action == "exec":
                self._exec(fault, doc)
            else:
                self._lab(fault, doc)
        except Exception as exc:  # a fault that could not be done is said, never the run's end
            doc["error"] = f"{type(exc).__name__}: {exc}"
            self.echo(f"fault {fault.spec}: {doc['error']}")

    def _lab(self, fault: Fault, doc: FaultDoc) -> None:
        sut = self.sut
        assert sut is not None  # checked before anything started: the system has the target
        role = sut.fault_targets(sut.settings)[fault.target][0]
        if role in sut.faulted:  # checked before the run too; a fault must never stack
            raise RuntimeError(f"{role} is down for another fault")
        if fault.action == "pause":
            doc["pids"] = [sut.pause(role)]
            doc["at_ns"] = at_ns = time.time_ns()
            try:
                self.echo(f"fault: {role} paused for {fault.duration_s:g} s")
                self._stop.wait(fault.duration_s or 0.0)  # resumed early if the run ends
            finally:
                sut.resume(role)
        else:
            doc["pids"] = [sut.kill(role, graceful=fault.action == "restart")]
            doc["at_ns"] = at_ns = time.time_ns()
            self.echo(f"fault: {role} {'stopped' if fault.action == 'restart' else 'killed'}")
            if self._stop.wait(fault.duration_s or 0.0):
                return  # the run ended: not brought back
            pid = _spawner().submit(sut.bring_back, role, self._stop.is_set).result()
            doc["pids"].append(pid)
            self.on_back(role, pid)
        doc["back_ns"] = back_ns = time.time_ns()
        self.echo(f"fault: {role} back after {(back_ns - at_ns) / NS_PER_S:.2f} s")

    def _exec(self, fault: Fault, doc: FaultDoc) -> None:
        """The user's command in a session of its own (so that all it started can be killed
        by its group), waited for itself, not for the end of its output (a child of its own
        may hold that open); one that outlives the bound, or the run, is killed."""
        with self._lock:  # `stop` either comes first (no command) or ends this one
            if self._stop.is_set():
                return
            doc["at_ns"] = at_ns = time.time_ns()
            command = Command(fault.target)
            doc["pids"] = [command.pid]
            self._commands.append((command, doc))
        deadline = time.monotonic() + self.exec_timeout_s
        code = command.wait(0)
        while code is None and not self._stop.is_set() and time.monotonic() < deadline:
            code = command.wait(min(0.1, max(0.0, deadline - time.monotonic())))
        if code is None:  # still running: it and its group are killed
            bound = f"after {self.exec_timeout_s:g} s"
            when = "at the end of the run" if self._stop.is_set() else bound
            command.kill_group()
            command.wait(5.0)
            doc["error"] = f"still running {when}: killed"
        back_ns = time.time_ns()
        doc["exit_code"] = code
        doc["output"] = command.output()
        if code != 0 and doc["error"] is None:
            doc["error"] = f"exited {code}"
        doc["back_ns"] = back_ns  # last: a doc with back_ns is whole
        took_s = (back_ns - at_ns) / NS_PER_S
        self.echo(f"fault: `{fault.target}` {doc['error'] or 'done'} in {took_s:.2f} s")


def _processes(found: list[tuple[int, str]]) -> str:
    named = ", ".join(f"{pid} {name}" for pid, name in found)
    return f"{len(found)} process{'es' if len(found) > 1 else ''} (pid {named})"


def fault_bound_s(lab: LabSettings) -> float:
    """The longest a fault under way may still take once its step is over (each ends inside
    it, evbench.faultspec): a killed component's start (up to 30 s to listen, then the lab's
    ready timeout) or a user's command (its own bound)."""
    return max(LISTEN_TIMEOUT_S + lab.ready_timeout_s, EXEC_TIMEOUT_S) + 10.0


_SPAWNER: ThreadPoolExecutor | None = None


def _spawner() -> ThreadPoolExecutor:
    """The one thread that starts components again, for the life of the process: a child is
    stopped by the kernel when the *thread* that started it ends (runtime.procs.die_with_parent),
    a fault's thread ends once its fault is done, and an executor's worker ends with it."""
    global _SPAWNER
    if _SPAWNER is None:
        _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fault-spawner")
    return _SPAWNER
