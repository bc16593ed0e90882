"""Resource samples of a run's processes (RSS and CPU every second), written to samples/; and,
for a process watched in detail (the memory study's consumer), its memory as the kernel and the
process itself account for it, written to samples/memory."""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psutil

from analysis.hostload import HostLoad, HostTicks, host_load
from contract.records import (
    HOST_SAMPLE_FIELDS,
    MEMORY_SAMPLE_FIELDS,
    PROCESS_SAMPLE_FIELDS,
    HostSampleRow,
    MemorySampleRow,
    ProcessSampleRow,
)
from runtime.files import disk_error
from runtime.parquet import PartWriter, record_roll_s

# Detailed samples kept for the policy to take: a minute's, whatever it does.
_KEPT_DETAILS = 60


class ProcessSampler:
    """Samples named pids on a background thread; flushes every `flush_every` ticks and on stop."""

    def __init__(self, out_dir: Path, interval_s: float = 1.0, flush_every: int = 10) -> None:
        # Rolled as the records are (runtime.parquet): a day of flushes every 10 s leaves
        # ~1,440 files, not 8,640.
        self.writer = PartWriter(
            out_dir, PROCESS_SAMPLE_FIELDS, prefix="processes", roll_s=record_roll_s()
        )
        # The host as a whole, in the same ticks: what the run's processes do not account for
        # is someone else's load (analysis.hostload).
        self.host_writer = PartWriter(
            out_dir / "host", HOST_SAMPLE_FIELDS, prefix="host", roll_s=record_roll_s()
        )
        self._host = HostCpu()
        # The last hour's host samples with the run's processes' CPU in the same tick, for a
        # search to judge a probe's host as it goes (bounded: a day's search keeps an hour).
        self._recent_host: deque[tuple[HostSampleRow, float]] = deque(maxlen=3600)
        self.interval_s = interval_s
        self.flush_every = flush_every
        self._processes: dict[str, psutil.Process] = {}
        # Roles sampled in detail: what the process says of itself, and its own writer.
        self._details: dict[str, Callable[[], Mapping[str, Any]]] = {}
        self._detail_writer: PartWriter | None = None
        self._taken: dict[str, deque[MemorySampleRow]] = {}
        self._detailing = threading.Lock()  # held while a detailed sample is taken
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self.peak_rss_bytes: dict[str, int] = {}
        self.write_error: str | None = None
        self.dropped_samples = 0

    def watch(self, role: str, pid: int) -> None:
        try:
            process = psutil.Process(pid)
            process.cpu_percent(None)  # the first call only sets the baseline
        except psutil.Error:
            return
        self._processes[role] = process

    def watch_memory(
        self, role: str, pid: int, says: Callable[[], Mapping[str, Any]], out_dir: Path
    ) -> None:
        """Sample `role` in detail too, every tick: USS, anonymous RSS, the kernel's peak and
        what it says of itself (`says`: consumed, py_traced_bytes, fetchq_bytes), into
        `out_dir`; `take_memory` hands the samples to the policy as they come."""
        self.watch(role, pid)
        if self._detail_writer is None:
            self._detail_writer = PartWriter(out_dir, MEMORY_SAMPLE_FIELDS, prefix="memory")
        self._details[role] = says
        self._taken[role] = deque(maxlen=_KEPT_DETAILS)

    def end_memory(self, role: str) -> None:
        """No more detailed samples of `role` (its RSS and CPU are still sampled): a process
        being stopped no longer says what it has done, and a sample then would say nothing."""
        with self._detailing:  # a sample under way finishes first
            self._details.pop(role, None)

    def take_memory(self, role: str) -> list[MemorySampleRow]:
        """The detailed samples of `role` taken since the last call (at most the last minute's:
        the sampler keeps no more)."""
        taken = self._taken.get(role)
        out: list[MemorySampleRow] = []
        while taken:
            out.append(taken.popleft())
        return out

    def start(self) -> None:
        self._thread.start()

    def recent_load(self, seconds: int = 3) -> HostLoad | None:
        """The host's load over its last `seconds` samples (None before it has them): what
        the live lines and a waiting search read."""
        ticks = self.recent_host()
        if ticks is None or len(ticks.t_ns) < seconds:
            return None
        tick_ns = 1_000_000_000  # host_load takes each sample as the second before it
        return host_load(ticks, ticks.t_ns[-seconds] - tick_ns, ticks.t_ns[-1] - tick_ns)

    def recent_host(self) -> HostTicks | None:
        """The host samples of the last hour, as the analysis reads them from the files
        (analysis.hostload.host_ticks); None before the first."""
        with self._detailing:
            recent = list(self._recent_host)
        if not recent:
            return None
        return HostTicks(
            t_ns=[h.t_ns for h, _ in recent],
            cpus=[h.cpus for h, _ in recent],
            busy_percent=[h.busy_percent for h, _ in recent],
            steal_percent=[h.steal_percent for h, _ in recent],
            ours_percent=[ours + h.evbench_percent for h, ours in recent],
        )

    def _run(self) -> None:
        ticks = 0
        while not self._stop.wait(self.interval_s):
            now_ns = time.time_ns()
            host, ours = self._host.sample(now_ns), 0.0
            for role, process in list(self._processes.items()):
                try:
                    with process.oneshot():
                        rss = process.memory_info().rss
                        cpu = process.cpu_percent(None)
                except psutil.Error:
                    del self._processes[role]  # it exited; its last samples stay
                    continue
                self.peak_rss_bytes[role] = max(rss, self.peak_rss_bytes.get(role, 0))
                self.writer.append(ProcessSampleRow(now_ns, role, process.pid, rss, cpu))
                ours += cpu
                with self._detailing:
                    if (says := self._details.get(role)) is not None:
                        self._detail(role, process, now_ns, says)
            self.host_writer.append(host)
            with self._detailing:
                self._recent_host.append((host, ours))
            ticks += 1
            if ticks % self.flush_every == 0:
                self._flush()

    def _detail(
        self,
        role: str,
        process: psutil.Process,
        now_ns: int,
        says_now: Callable[[], Mapping[str, Any]],
    ) -> None:
        """One detailed sample of `role` (none when it has just gone)."""
        says = says_now()
        try:
            full = process.memory_full_info()
            status = status_fields(Path(f"/proc/{process.pid}/status").read_text())
        except (psutil.Error, OSError):
            return
        row = MemorySampleRow(
            now_ns, role, process.pid, full.rss, getattr(full, "uss", None),
            status.get("RssAnon"), status.get("VmHWM"), says.get("consumed"),
            says.get("py_traced_bytes"), says.get("fetchq_bytes"),
        )  # fmt: skip
        assert self._detail_writer is not None
        self._detail_writer.append(row)
        self._taken[role].append(row)

    def _flush(self) -> None:
        """Written, or (a full disk) dropped and said once: samples are not the run's records,
        and a sampler must neither die in a traceback nor hold samples without bound."""
        if self._detail_writer is not None:
            self._write(self._detail_writer)
        self._write(self.writer)
        self._write(self.host_writer)

    def _write(self, writer: PartWriter) -> None:
        rows = writer.take()
        try:
            writer.write(rows)
        except OSError as exc:
            self.dropped_samples += len(rows)
            if self.write_error is None:
                self.write_error = disk_error(exc, str(writer.directory))
                print(f"evbench: process samples dropped: {self.write_error}", file=sys.stderr)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._flush()
        self.writer.roll()  # never raises: a roll that fails leaves its parts
        self.host_writer.roll()


class HostCpu:
    """The host's CPU since the previous sample (the first one: since this object was made),
    and this process's own, in the process samples' unit (100 = one core)."""

    def __init__(self) -> None:
        self.cpus = psutil.cpu_count() or 1
        self._own = psutil.Process()
        psutil.cpu_times_percent(None)  # the first call only sets the baseline
        self._own.cpu_percent(None)

    def sample(self, now_ns: int) -> HostSampleRow:
        times = psutil.cpu_times_percent(None)  # shares of all CPUs together, summing to 100
        idle = times.idle + getattr(times, "iowait", 0.0)  # waiting on a disk is idle CPU
        return HostSampleRow(
            now_ns,
            self.cpus,
            round(max(0.0, 100.0 - idle) * self.cpus, 2),
            round(getattr(times, "steal", 0.0) * self.cpus, 2),
            self._own.cpu_percent(None),
        )


def status_fields(text: str) -> dict[str, int]:
    """The memory lines of /proc/<pid>/status in bytes (`VmHWM:  1234 kB`)."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[key] = int(parts[0]) * 1024
    return out
