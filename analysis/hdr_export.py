"""`--export-hdr`'s files: every system's HdrHistogram interval logs (the format: analysis.hdr),
the whole run's and each step's, written from the tasks' intervals as they stream to the
driver, never held whole (a day is 86,400 intervals a log)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pyspark.sql import DataFrame

from analysis.hdr import METRICS, Interval, interval_line, log_head, log_tail, per_second
from contract.layout import SutDir

# (system key, metric, step; None for the whole run's log)
LogKey = tuple[str, str, int | None]
# Files open at once: a run of many steps has two logs a step, written one after another.
_OPEN_AT_ONCE = 16


@dataclass(frozen=True)
class Written:
    """One system's logs, for the command to say where they went."""

    folder: Path
    steps: tuple[int, ...]

    def lines(self) -> list[str]:
        names = ",".join(METRICS)
        whole = f"{self.folder}/{{{names}}}.hlog (the whole run)"
        if not self.steps:
            return [whole]
        return [whole, f"{self.folder}/step-N/{{{names}}}.hlog (steps {spans(self.steps)})"]


def spans(numbers: Iterable[int]) -> str:
    """Sorted numbers as runs: 1-3, 5, 7-8."""
    runs: list[list[int]] = []
    for number in sorted(numbers):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def export_hdr(
    rows: DataFrame,
    dirs: Mapping[str, Path],
    start_ns: Mapping[str, int],
    steps: Mapping[str, Iterable[int]],
) -> dict[str, Written]:
    """Every system's logs from the tasks' HDR_ROWS, sorted by (sut, metric, second, step) and
    brought to the driver a partition at a time: each interval goes to its step's log as it
    comes, and (a second's steps added up, analysis.hdr.per_second) to the whole run's. Every
    system gets its two whole-run logs and every step of `steps` its two, empty but for their
    head when nothing was measured. Each log is written under a hidden name until complete."""
    logs = _Logs(dirs, start_ns)
    # Kept once made: the sort samples its input before it sorts, which would run the tasks
    # (every record read again) twice more.
    rows = rows.persist()
    try:
        for sut in dirs:
            for metric in METRICS:
                logs.start((sut, metric, None))
                for step in sorted(set(steps.get(sut, ()))):
                    logs.start((sut, metric, step))
        ordered = rows.orderBy("sut", "metric", "second", "step").toLocalIterator()
        intervals = (Interval(**row.asDict()) for row in ordered)
        for whole in per_second(logs.each_in_its_step_log(intervals)):
            logs.add((whole.sut, whole.metric, None), whole)
        logs.complete()
    finally:
        rows.unpersist()
        logs.discard()
    return {sut: Written(SutDir(path).hdr_export, logs.steps(sut)) for sut, path in dirs.items()}


@dataclass
class _Logs:
    """The logs being written, each under a hidden name until `complete`; at most
    _OPEN_AT_ONCE files open, the least recently written closed first (and appended to again
    should it get another line)."""

    dirs: Mapping[str, Path]
    start_ns: Mapping[str, int]
    paths: dict[LogKey, Path] = field(default_factory=dict)
    # values recorded at the range's ends: below, above
    ends: dict[LogKey, list[int]] = field(default_factory=dict)
    open: dict[LogKey, IO[str]] = field(default_factory=dict)  # least recently written first

    def start(self, key: LogKey) -> None:
        sut, metric, step = key
        path = SutDir(self.dirs[sut]).hdr_log(metric, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.paths[key], self.ends[key] = path, [0, 0]
        _hidden(path).write_text("\n".join(log_head(self.start_ns[sut], step)) + "\n")

    def add(self, key: LogKey, interval: Interval) -> None:
        if key not in self.paths:  # a step the plan did not name: its log all the same
            self.start(key)
        self._file(key).write(interval_line(interval) + "\n")
        self.ends[key][0] += interval.below
        self.ends[key][1] += interval.above

    def each_in_its_step_log(self, intervals: Iterable[Interval]) -> Iterator[Interval]:
        for interval in intervals:
            self.add((interval.sut, interval.metric, interval.step), interval)
            yield interval

    def steps(self, sut: str) -> tuple[int, ...]:
        return tuple(sorted({s for k, _, s in self.paths if k == sut and s is not None}))

    def complete(self) -> None:
        self._close_all()
        for key, path in self.paths.items():
            with _hidden(path).open("a") as out:
                out.writelines(line + "\n" for line in log_tail(*self.ends[key]))
            _hidden(path).replace(path)

    def discard(self) -> None:
        """What an error left: no file open, no hidden file (a complete log stays)."""
        self._close_all()
        for path in self.paths.values():
            _hidden(path).unlink(missing_ok=True)

    def _file(self, key: LogKey) -> IO[str]:
        out = self.open.pop(key, None)
        if out is None:
            if len(self.open) >= _OPEN_AT_ONCE:
                self.open.pop(next(iter(self.open))).close()
            out = _hidden(self.paths[key]).open("a")
        self.open[key] = out  # now the most recently written
        return out

    def _close_all(self) -> None:
        while self.open:
            self.open.popitem()[1].close()


def _hidden(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp")
