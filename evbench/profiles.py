"""Profiles of one step (`--profile STEP[:SECONDS]`, `--pprof NAME=URL`), taken while the step
runs and stored in profiles/step-<N>/ as they came, as the 2019 engineers profiled the Kafka
dispatcher at 1,000 events/s by hand (seed 002).

- The lab's Python processes: py-spy samples each one from outside (`--nonblocking`: it reads
  the process's memory without pausing it, so the step is disturbed as little as a sampler
  can) into its raw collapsed stacks, kept, and turned into a flame graph (SVG) and a
  speedscope file (evbench.flamegraph). What sampling cost is recorded: wall time and py-spy's
  own CPU seconds, which the lab's processes shared the cores with.
- A real system's Go services: `URL/profile?seconds=N` (CPU) during the step and `URL/heap` at
  its end, stored byte for byte, with the `go tool pprof` command that opens each.

Timers and threads only: the run never waits on a profile, and every py-spy is stopped by pid
at the end.
"""

from __future__ import annotations

import argparse
import json
import re
import sysconfig
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from contract.errors import EvbenchError
from contract.insight import ProfileDoc, ProfileKind
from contract.layout import SutDir, safe_component
from contract.senderlines import PlannedStepDoc
from contract.units import NS_PER_S
from evbench import flamegraph
from runtime.argtypes import named_url
from runtime.procs import Child

_WHOLE = re.compile(r"[0-9]+")
PY_SPY_RATE_PER_S = 100  # py-spy's default: enough for a flame graph of a 10 s step
_PPROF_SLACK_S = 15.0  # a Go service answers /profile?seconds=N after N s; then allow this


@dataclass(frozen=True)
class ProfileRequest:
    step: int
    seconds: int | None = None  # None: the whole step


@dataclass(frozen=True)
class PprofTarget:
    name: str
    url: str  # the service's pprof base, e.g. http://host:8008/debug/pprof


def profile_request(text: str) -> ProfileRequest:
    """`--profile STEP[:SECONDS]`: a pace step (1-based; 0 the warm-up), optionally only its
    first SECONDS."""
    step_text, sep, seconds_text = text.partition(":")
    if not _WHOLE.fullmatch(step_text) or (sep and not _WHOLE.fullmatch(seconds_text)):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not STEP[:SECONDS], e.g. 2 (the whole step 2) or 2:10"
        )
    seconds = int(seconds_text) if sep else None
    if seconds == 0:
        raise argparse.ArgumentTypeError(f"'{text}': profile for at least 1 second")
    return ProfileRequest(int(step_text), seconds)


def pprof_target(text: str) -> PprofTarget:
    """`--pprof NAME=URL`: a Go service's pprof base (…/debug/pprof)."""
    name, url = named_url(text)
    if name is None:
        raise argparse.ArgumentTypeError(
            f"'{text}': name it, e.g. dispatcher=http://10.0.0.7:8008/debug/pprof"
        )
    try:
        return PprofTarget(safe_component("pprof name", name), url)
    except EvbenchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def profile_window(
    request: ProfileRequest, schedule_start_ns: int, steps: Sequence[PlannedStepDoc]
) -> tuple[int, int] | None:
    """When to begin (epoch ns) and for how many whole seconds, inside the asked step; None
    when the schedule has no such step. A request longer than the step is cut to it: a
    profile that runs into the gap or the next step would mix two rates."""
    for step in steps:
        if step["number"] == request.step:
            seconds = step["duration_s"] if request.seconds is None else request.seconds
            return schedule_start_ns + step["start_offset_ns"], max(
                1, min(seconds, step["duration_s"])
            )
    return None


def pprof_command(path: str) -> str:
    return f"go tool pprof -http=: {path}"


class Profiler:
    """Takes the asked step's profiles once the sender says when that step begins."""

    def __init__(
        self,
        sut_dir: SutDir,
        request: ProfileRequest | None,
        pprof: Sequence[PprofTarget],
        lab_pids: Callable[[], dict[str, int]],
        echo: Callable[[str], None],
    ) -> None:
        self.sut_dir, self.request, self.pprof = sut_dir, request, tuple(pprof)
        self.lab_pids, self.echo = lab_pids, echo
        self._docs: list[ProfileDoc] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._spies: list[Child] = []

    @property
    def wanted(self) -> bool:
        return self.request is not None

    def on_schedule(self, schedule_start_ns: int, steps: Sequence[PlannedStepDoc]) -> None:
        """The sender's start line: if the asked step is in it, profile it when it comes."""
        if self.request is None or self._threads:
            return
        window = profile_window(self.request, schedule_start_ns, steps)
        if window is None:
            return
        begin_ns, seconds = window
        self._spawn(self._at_step, begin_ns, seconds)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name="profile", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _at_step(self, begin_ns: int, seconds: int) -> None:
        assert self.request is not None
        if self._stopping.wait(max(0.0, (begin_ns - time.time_ns()) / NS_PER_S)):
            return  # the run ended before the step began
        step = self.request.step
        folder = self.sut_dir.step_profiles(step)
        folder.mkdir(parents=True, exist_ok=True)
        targets = [f"{role} (py-spy)" for role in self.lab_pids()]
        targets += [f"{t.name} (pprof)" for t in self.pprof]
        if not targets:
            self.echo(
                f"step {step}: nothing to profile (the system has no lab processes here; "
                "--pprof NAME=URL profiles a Go service of yours)"
            )
            return
        self.echo(f"profiling step {step} for {seconds} s: {', '.join(targets)}")
        for role, pid in self.lab_pids().items():
            self._spawn(self._py_spy, step, role, pid, seconds)
        for target in self.pprof:
            self._spawn(self._go, step, target, seconds)

    def _py_spy(self, step: int, role: str, pid: int, seconds: int) -> None:
        folder = self.sut_dir.step_profiles(step)
        raw = folder / f"{role}.raw.txt"
        argv = [_py_spy_binary(), "record", "--pid", str(pid), "--duration", str(seconds)]
        argv += ["--rate", str(PY_SPY_RATE_PER_S), "--format", "raw", "--nonblocking"]
        started_ns, began = time.time_ns(), time.monotonic()
        log = folder / f"{role}.py-spy.log"
        with self._lock:  # never one begun after stop() took the list of those to stop
            if self._stopping.is_set():
                return
            spy = Child(f"py-spy-{role}", [*argv, "--output", str(raw)], log)
            self._spies.append(spy)
        code, cpu_s = _wait_with_cpu(spy, seconds + 30)
        doc = ProfileDoc(
            step=step,
            kind="py-spy",
            target=role,
            started_ns=started_ns,
            duration_s=seconds,
            wall_s=0.0,
            files=[],
            error=None,
            pid=pid,
        )
        doc["profiler_cpu_s"] = round(cpu_s, 3)
        if code != 0 or not raw.is_file():
            doc["error"] = f"py-spy exited with {code}: {spy.tail(3)}"
        else:
            try:
                self._render(doc, raw)
            except (ValueError, OSError) as exc:  # the raw stacks stay, named, for a look
                doc["files"] = [self._relative(raw)]
                doc["error"] = f"py-spy's stacks could not be drawn: {exc}"
        doc["wall_s"] = round(time.monotonic() - began, 3)
        self._add(doc)

    def _render(self, doc: ProfileDoc, raw: Path) -> None:
        """The raw stacks, kept, as a flame graph and a speedscope file beside them."""
        stacks = flamegraph.parse_collapsed(raw.read_text(errors="replace"))
        title = f"{doc['target']} (pid {doc.get('pid')}), step {doc['step']}"
        svg = raw.with_name(f"{doc['target']}.svg")
        svg.write_text(flamegraph.flamegraph_svg(stacks, title), encoding="utf-8")
        speedscope = raw.with_name(f"{doc['target']}.speedscope.json")
        speedscope.write_text(
            json.dumps(flamegraph.speedscope_json(stacks, title)), encoding="utf-8"
        )
        doc["samples"] = flamegraph.total_samples(stacks)
        doc["files"] = [self._relative(p) for p in (svg, speedscope, raw)]

    def _go(self, step: int, target: PprofTarget, seconds: int) -> None:
        folder = self.sut_dir.step_profiles(step)
        base = target.url.rstrip("/")
        name = target.name
        cpu_url, heap_url = f"{base}/profile?seconds={seconds}", f"{base}/heap"
        self._add(
            self._fetch(step, name, "pprof-cpu", cpu_url, folder / f"{name}.cpu.pb.gz", seconds)
        )
        # The heap as the step leaves it: after the CPU profile, which spans the step (taken
        # even if the session is ending: it is one quick request, and stop() waits for it).
        self._add(self._fetch(step, name, "pprof-heap", heap_url, folder / f"{name}.heap.pb.gz", 0))

    def _fetch(
        self, step: int, name: str, kind: ProfileKind, url: str, path: Path, duration_s: int
    ) -> ProfileDoc:
        """One pprof endpoint's answer, stored whole (a failure stores nothing and says why)."""
        started_ns, began = time.time_ns(), time.monotonic()
        doc = ProfileDoc(
            step=step,
            kind=kind,
            target=name,
            started_ns=started_ns,
            duration_s=duration_s,
            wall_s=0.0,
            files=[],
            error=None,
            url=url,
        )
        try:
            with httpx.stream("GET", url, timeout=duration_s + _PPROF_SLACK_S) as answer:
                answer.raise_for_status()
                with open(path, "wb") as out:
                    for chunk in answer.iter_bytes():
                        out.write(chunk)
        except httpx.HTTPError as exc:
            path.unlink(missing_ok=True)
            doc["error"] = f"{url}: {type(exc).__name__}: {exc}"
        else:
            relative = self._relative(path)
            doc["files"] = [relative]
            # From the system's directory (where the report's paths start); here, as given.
            doc["open_with"] = pprof_command(relative)
            self.echo(f"{name} {kind} profile of step {step}: {pprof_command(str(path))}")
        doc["wall_s"] = round(time.monotonic() - began, 3)
        return doc

    def _relative(self, path: Path) -> str:
        return str(path.relative_to(self.sut_dir.root))

    def _add(self, doc: ProfileDoc) -> None:
        with self._lock:
            self._docs.append(doc)
        if doc["error"]:
            self.echo(f"profile of {doc['target']} ({doc['kind']}) failed: {doc['error']}")

    def stop(self, timeout_s: float = _PPROF_SLACK_S + 5) -> None:
        """The run is over: nothing new begins, every py-spy still sampling is stopped by pid
        (what it sampled so far is kept), and the threads are given time to write (a Go
        service's CPU profile answers at the end of the seconds asked, then its heap)."""
        with self._lock:
            self._stopping.set()
        if self.request is not None and not self._threads:
            step = self.request.step
            self.echo(f"--profile {step}: the session ended before step {step}; nothing profiled")
        with self._lock:
            spies = list(self._spies)
        for spy in spies:
            if spy.alive():
                spy.signal(2)  # SIGINT: py-spy writes what it has, then exits
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        for spy in spies:
            if spy.alive():
                spy.stop(1.0)

    def docs(self) -> list[ProfileDoc]:
        with self._lock:
            return sorted(self._docs, key=lambda d: (d["step"], d["target"], d["kind"]))


def _py_spy_binary() -> str:
    """py-spy as installed beside this Python (a declared dependency), else on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "py-spy"
    return str(beside) if beside.is_file() else "py-spy"


def _wait_with_cpu(spy: Child, timeout_s: float) -> tuple[int, float]:
    """py-spy's exit code and the CPU seconds it used (its own cost to the machine)."""
    deadline = time.monotonic() + timeout_s
    cpu_s = 0.0
    while spy.alive() and time.monotonic() < deadline:
        cpu_s = max(cpu_s, _cpu_seconds(spy.pid))
        time.sleep(0.2)
    if spy.alive():
        spy.stop(2.0)
    return spy.wait(5.0), cpu_s


def _cpu_seconds(pid: int) -> float:
    """user + system CPU of a live process (0 when it is gone), as the process sampler reads it."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)
