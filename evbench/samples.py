"""Resource samples of a run's processes (RSS and CPU every second), written to samples/."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import psutil

from contract.records import PROCESS_SAMPLE_FIELDS, ProcessSampleRow
from runtime.files import disk_error
from runtime.parquet import PartWriter, record_roll_s


class ProcessSampler:
    """Samples named pids on a background thread; flushes every `flush_every` ticks and on stop."""

    def __init__(self, out_dir: Path, interval_s: float = 1.0, flush_every: int = 10) -> None:
        # Rolled as the records are (runtime.parquet): a day of flushes every 10 s leaves
        # ~1,440 files, not 8,640.
        self.writer = PartWriter(
            out_dir, PROCESS_SAMPLE_FIELDS, prefix="processes", roll_s=record_roll_s()
        )
        self.interval_s = interval_s
        self.flush_every = flush_every
        self._processes: dict[str, psutil.Process] = {}
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

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        ticks = 0
        while not self._stop.wait(self.interval_s):
            now_ns = time.time_ns()
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
            ticks += 1
            if ticks % self.flush_every == 0:
                self._flush()

    def _flush(self) -> None:
        """Written, or (a full disk) dropped and said once: samples are not the run's records,
        and a sampler must neither die in a traceback nor hold samples without bound."""
        rows = self.writer.take()
        try:
            self.writer.write(rows)
        except OSError as exc:
            self.dropped_samples += len(rows)
            if self.write_error is None:
                self.write_error = disk_error(exc, str(self.writer.directory))
                print(f"evbench: process samples dropped: {self.write_error}", file=sys.stderr)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._flush()
        self.writer.roll()  # never raises: a roll that fails leaves its parts
