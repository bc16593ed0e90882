"""The master's tally of its workers' lines, and the fleet's lines made from them. Pure.

Each worker runs an ordinary sender on its share of the slots (`--worker i --workers N`: every
Nth slot, so the fleet's schedule stays evenly spaced) and forwards that sender's JSON lines.
The master prints lines of the same types one sender prints (contract.senderlines), so
whoever follows a sender (`evbench run`, a person) follows a fleet the same way:

- counts add up across workers (sent, ok, failures, rows written, connections, ...);
- rates are each worker's share scaled to the whole pace (`achieved * workers`), so the fleet's
  is their mean: a worker that falls behind or dies pulls it down, it never hides;
- lag and wake-jitter quantiles are the slowest worker's: at most 1 % of any worker's slots
  lag more than its p99, so at most 1 % of the fleet's do more than the largest p99; the figure
  is an upper bound, never flattering.

A worker that fails (its pacer died, it went missing, it never answered the plan) is marked: the
fleet's lines name it, every step it missed counts it, and the fleet does not wait for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, cast, get_args, get_type_hints

from contract.lines import WarningLine
from contract.senderlines import (
    SenderCounts,
    SenderDone,
    SenderLine,
    SenderProgress,
    SenderStart,
    SenderStepSummary,
    StepCounts,
    StepEnd,
    StepIdentity,
    StepStart,
    StepTimings,
    TransportStats,
    parse_sender_summary,
)
from runtime.failcause import added

# How each key combines across workers, read from the types (contract.senderlines).
_SAME_STEP = tuple(StepIdentity.__annotations__)
_SUMMED_STEP = tuple(StepCounts.__annotations__)
_SLOWEST_STEP = tuple(StepTimings.__annotations__)
_SUMMED_DONE = tuple(SenderCounts.__annotations__)
# Transport stats: counts add up, a quantile (a float) takes the slowest. connections_peak (an
# int) adds up as connections_open does: workers' peaks need not coincide, so their sum bounds
# the fleet's peak from above; the largest one alone would understate it.
_TRANSPORT = get_type_hints(TransportStats)
_TRANSPORT_SLOWEST = frozenset(key for key, hint in _TRANSPORT.items() if float in get_args(hint))


def _sum(docs: Iterable[Mapping[str, Any]], key: str) -> Any:
    values = [d[key] for d in docs if d.get(key) is not None]
    if values and isinstance(values[0], dict):  # failures by cause: each cause summed
        empty: dict[str, int] = {}
        return reduce(added, values, empty)
    return sum(values) if values else None


def _slowest(docs: Iterable[Mapping[str, Any]], key: str) -> Any:
    values = [d[key] for d in docs if d.get(key) is not None]
    return max(values) if values else None


def _transport(docs: Sequence[Mapping[str, Any]]) -> TransportStats:
    """The transport's counters (TransportStats) that any of the lines has."""
    keys = [key for key in _TRANSPORT if any(key in d for d in docs)]
    return cast(
        TransportStats,
        {k: (_slowest if k in _TRANSPORT_SLOWEST else _sum)(docs, k) for k in keys},
    )


def _warning(message: str) -> WarningLine:
    return {"event": "warning", "message": message}


def merged_step(steps: Sequence[SenderStepSummary], workers: int) -> SenderStepSummary:
    """One step as the fleet saw it, from its workers' step summaries (SenderStepSummary, with
    a step_end's transport stats)."""
    first: Mapping[str, Any] = steps[0]
    merged = {
        **{key: first[key] for key in _SAME_STEP},
        **{key: _sum(steps, key) for key in _SUMMED_STEP},
        # Each worker's is its own share scaled to the pace; a missing worker counts as 0.
        "achieved_send_rate_per_s": sum(s["achieved_send_rate_per_s"] for s in steps) / workers,
        **{key: _slowest(steps, key) for key in _SLOWEST_STEP},
    }
    return cast(SenderStepSummary, merged)


@dataclass
class Tally:
    """What the master knows of its workers; `line` and `fail` return the fleet lines due."""

    workers: int
    pid: int
    started: dict[int, SenderStart] = field(default_factory=dict)
    # step -> index -> its step_end (or, collected, its done line's step summary)
    step_ends: dict[int, dict[int, SenderStepSummary]] = field(default_factory=dict)
    steps_announced: set[int] = field(default_factory=set)
    steps_ended: set[int] = field(default_factory=set)
    progress: dict[int, SenderProgress] = field(default_factory=dict)
    done: dict[int, SenderDone] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    start_sent: bool = False
    done_sent: bool = False

    # what the workers say ----------------------------------------------------------------
    def line(self, index: int, line: SenderLine) -> list[SenderLine]:
        if index in self.failed:
            return []  # a worker marked failed stays failed; its late lines change nothing
        if line["event"] == "start":
            self.started[index] = line
        elif line["event"] == "step_start":
            return self._step_start(line)
        elif line["event"] == "progress":
            self.progress[index] = line
            return []
        elif line["event"] == "step_end":
            self.step_ends.setdefault(line["step"], {})[index] = line
        elif line["event"] == "done":
            self.done[index] = line
            self.progress.pop(index, None)
        elif line["event"] == "draining":
            text = f"waiting up to {line['timeout_s']:g} s for {line['inflight']} in-flight answers"
            return [_warning(f"worker {index}: {text}")]
        elif line["event"] == "warning":
            return [_warning(f"worker {index}: {line['message']}")]
        elif line["event"] == "output":
            return [_warning(f"worker {index}: {line['text']}")]
        return self._due()

    def fail(self, index: int, reason: str) -> list[SenderLine]:
        """Mark a worker failed (died, missing, no plan): the fleet goes on without it."""
        if index in self.failed or index in self.done:
            return []
        self.failed[index] = reason
        self.progress.pop(index, None)
        return [_warning(f"worker {index} failed: {reason}"), *self._due()]

    @property
    def finished(self) -> bool:
        return self.done_sent

    # the fleet's lines ---------------------------------------------------------------------
    def _live(self) -> list[int]:
        return [i for i in range(self.workers) if i not in self.failed]

    def _step_start(self, line: StepStart) -> list[SenderLine]:
        if line["step"] in self.steps_announced:
            return []
        self.steps_announced.add(line["step"])
        return [line]  # the same instant and rate for every worker

    def _due(self) -> list[SenderLine]:
        out: list[SenderLine] = []
        live = self._live()
        if not self.start_sent and live and all(i in self.started for i in live):
            self.start_sent = True
            out.append(self._start_line())
        for step in sorted(self.step_ends):
            if step in self.steps_ended:
                continue
            ends = self.step_ends[step]
            # Done workers that never reached the step (stopped early) are not waited for.
            if all(i in ends or i in self.done for i in live) and ends:
                self.steps_ended.add(step)
                out.append(self._step_end_line(step))
        if not self.done_sent and all(i in self.done for i in live):
            # Every step that some worker ended is out before the done line.
            self.done_sent = True
            out.append(self._done_line())
        return out

    def _failed_doc(self) -> dict[str, str]:
        return {str(i): reason for i, reason in sorted(self.failed.items())}

    def _start_line(self) -> SenderStart:
        starts = [self.started[i] for i in sorted(self.started)]
        first = starts[0]
        return {
            "event": "start",
            "pid": self.pid,
            "start_ns": first["start_ns"],
            "run_tag": first["run_tag"],
            "pace": first["pace"],
            "spec": first["spec"],
            "max_inflight": sum(s["max_inflight"] for s in starts),
            "steps": first["steps"],
            "workers": self.workers,
            "clocks": {str(i): s["clock"] for i, s in self.started.items() if "clock" in s},
        }

    def _ends(self, step: int) -> list[SenderStepSummary]:
        return [self.step_ends[step][i] for i in sorted(self.step_ends[step])]

    def _step_end_line(self, step: int) -> StepEnd:
        ends = self._ends(step)
        return {
            "event": "step_end",
            **merged_step(ends, self.workers),
            **_transport(ends),
            "inflight_at_step_end": _sum(ends, "inflight_at_step_end") or 0,
            "workers_reported": len(ends),
            "failed_workers": self._failed_doc(),
        }

    def progress_line(self) -> SenderProgress | None:
        """The fleet's progress now (the master prints one a second): sums of each worker's
        latest window, and which worker lags most."""
        # Each worker's window once: between steps and in the drain nothing new is printed.
        docs = {i: d for i, d in self.progress.items() if i not in self.failed}
        self.progress = {}
        if not docs:
            return None
        lags = {i: lag for i, d in docs.items() if (lag := d["lag_p99_ms"]) is not None}
        slowest = max(lags, key=lags.__getitem__) if lags else None
        newest_step = max(d["step"] for d in docs.values())
        current = [d for d in docs.values() if d["step"] == newest_step]
        return {
            "event": "progress",
            "step": newest_step,
            "target_rate_per_s": current[0]["target_rate_per_s"],
            # each worker's window is its share scaled to the pace: the fleet's is their mean
            "window_sent": round(sum(d["window_sent"] for d in current) / self.workers),
            "lag_p99_ms": lags[slowest] if slowest is not None else None,
            "sent": sum(d["sent"] for d in current),
            "ok": sum(d["ok"] for d in current),
            "failures": sum(d["failures"] for d in current),
            "inflight": sum(d["inflight"] for d in docs.values()),
            "inflight_cap_refused": sum(d["inflight_cap_refused"] for d in current),
            "failures_by_cause": _sum(current, "failures_by_cause") or {},
            "rows_written": sum(d["rows_written"] for d in docs.values()),
            "workers_reporting": len(docs),
            "slowest_worker": slowest,
            "failed_workers": self._failed_doc(),
        }

    def _done_line(self) -> SenderDone:
        dones = [self.done[i] for i in sorted(self.done)]
        # With every worker failed before its end, what they announced at the start stands in.
        first: Mapping[str, Any] = dones[0] if dones else next(iter(self.started.values()), {})
        reasons = [reason for d in dones if (reason := d["stop_reason"])]
        if self.failed:
            reasons.append(
                "worker(s) failed: "
                + "; ".join(f"{i}: {why}" for i, why in sorted(self.failed.items()))
            )
        counts = cast(SenderCounts, {key: _sum(dones, key) or 0 for key in _SUMMED_DONE})
        return {
            "event": "done",
            "start_ns": first.get("start_ns"),
            "worker": 0,
            "workers": self.workers,
            "interrupted": any(d["interrupted"] for d in dones) or bool(self.failed),
            "stop_reason": "; ".join(reasons) or None,
            "steps": [
                merged_step(self._ends(step), self.workers) for step in sorted(self.steps_ended)
            ],
            **counts,
            "precise_timer": all(d["precise_timer"] for d in dones) if dones else None,
            **_transport(dones),
            "run_tag": first.get("run_tag"),
            "wall_s": max((d["wall_s"] for d in dones), default=0.0),
            "clocks": {str(i): d["clock"] for i, d in self.done.items() if "clock" in d},
            "failed_workers": self._failed_doc(),
        }


def merged_done(records: Sequence[Mapping[str, Any]]) -> SenderDone:
    """A fleet's done line from its workers' summaries alone (their `_sender-w<i>.json`,
    collected from a cluster, where no master tallied them); a worker whose summary is missing
    counts as failed."""
    summaries = [parse_sender_summary(record) for record in records]
    workers = max(s["workers"] for s in summaries)
    tally = Tally(workers, pid=0)
    for summary in summaries:
        index = summary["worker"]
        # What a sender writes beside its summary for `evbench collect` is not part of it.
        done = {k: v for k, v in summary.items() if k not in ("host", "argv")}
        tally.done[index] = cast(SenderDone, {"event": "done", **done})
        for step in summary["steps"]:
            tally.step_ends.setdefault(step["step"], {})[index] = step
    tally.steps_ended = set(tally.step_ends)
    for index in range(workers):
        if index not in tally.done:
            tally.failed[index] = "its summary was not collected"
    return tally._done_line()
