"""The master's tally of its workers' lines, and the fleet's lines made from them. Pure.

Each worker runs an ordinary sender on its share of the slots (`--worker i --workers N`: every
Nth slot, so the fleet's schedule stays evenly spaced) and forwards that sender's JSON lines.
The master prints lines of the same types one sender prints (contract.documents), so
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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

_SUMMED_STEP = ("scheduled", "sent", "ok", "failures", "inflight_cap_hits", "gc_collected")
_SLOWEST_STEP = (
    "lag_p50_ms",
    "lag_p99_ms",
    "lag_max_ms",
    "wake_jitter_p99_ms",
    "wake_jitter_max_ms",
    "gc_ms",
)
_SUMMED_DONE = (
    "sent",
    "ok",
    "failures",
    "inflight_cap_hits",
    "unanswered_at_end",
    "timed_out",
    "rows_written",
    "parts_written",
    "flush_errors",
)
# Transport stats (TransportStats): counts add up, a connect-time quantile takes the slowest.
_TRANSPORT_SLOWEST = ("connect_ms_p99",)


def _sum(docs: Iterable[dict], key: str) -> Any:
    values = [d[key] for d in docs if d.get(key) is not None]
    return sum(values) if values else None


def _slowest(docs: Iterable[dict], key: str) -> Any:
    values = [d[key] for d in docs if d.get(key) is not None]
    return max(values) if values else None


def _transport(docs: list[dict], known: set[str]) -> dict:
    """The transport's counters (TransportStats): every other numeric key of the lines."""
    keys = sorted({k for d in docs for k, v in d.items() if _number(v)} - known)
    return {k: (_slowest if k in _TRANSPORT_SLOWEST else _sum)(docs, k) for k in keys}


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def merged_step(steps: list[dict], workers: int) -> dict:
    """One step as the fleet saw it, from its workers' step summaries (SenderStepSummary, with
    a step_end's transport stats)."""
    first = steps[0]
    out = {
        "step": first["step"],
        "warmup": first["warmup"],
        "target_rate_per_s": first["target_rate_per_s"],
        "duration_s": first["duration_s"],
        "worker_target_rate_per_s": first["worker_target_rate_per_s"],
        **{key: _sum(steps, key) for key in _SUMMED_STEP},
        # Each worker's is its own share scaled to the pace; a missing worker counts as 0.
        "achieved_send_rate_per_s": sum(s["achieved_send_rate_per_s"] for s in steps) / workers,
        **{key: _slowest(steps, key) for key in _SLOWEST_STEP},
    }
    return out


@dataclass
class Tally:
    """What the master knows of its workers; `line` and `fail` return the fleet lines due."""

    workers: int
    pid: int
    started: dict[int, dict] = field(default_factory=dict)
    step_ends: dict[int, dict[int, dict]] = field(default_factory=dict)  # step -> index -> line
    steps_announced: set[int] = field(default_factory=set)
    steps_ended: set[int] = field(default_factory=set)
    progress: dict[int, dict] = field(default_factory=dict)
    done: dict[int, dict] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    start_sent: bool = False
    done_sent: bool = False

    # what the workers say ----------------------------------------------------------------
    def line(self, index: int, doc: dict) -> list[dict]:
        kind = doc.get("event")
        if index in self.failed:
            return []  # a worker marked failed stays failed; its late lines change nothing
        if kind == "start":
            self.started[index] = doc
        elif kind == "step_start":
            return self._step_start(doc)
        elif kind == "progress":
            self.progress[index] = doc
            return []
        elif kind == "step_end":
            self.step_ends.setdefault(doc["step"], {})[index] = doc
        elif kind == "done":
            self.done[index] = doc
            self.progress.pop(index, None)
        elif kind == "draining":
            text = f"waiting up to {doc['timeout_s']:g} s for {doc['inflight']} in-flight answers"
            return [{"event": "warning", "message": f"worker {index}: {text}"}]
        elif kind in ("warning", "output"):
            text = doc.get("message") or doc.get("text") or f"{kind}: {doc}"
            return [{"event": "warning", "message": f"worker {index}: {text}"}]
        return self._due()

    def fail(self, index: int, reason: str) -> list[dict]:
        """Mark a worker failed (died, missing, no plan): the fleet goes on without it."""
        if index in self.failed or index in self.done:
            return []
        self.failed[index] = reason
        self.progress.pop(index, None)
        warning = {"event": "warning", "message": f"worker {index} failed: {reason}"}
        return [warning, *self._due()]

    @property
    def finished(self) -> bool:
        return self.done_sent

    # the fleet's lines ---------------------------------------------------------------------
    def _live(self) -> list[int]:
        return [i for i in range(self.workers) if i not in self.failed]

    def _step_start(self, doc: dict) -> list[dict]:
        if doc["step"] in self.steps_announced:
            return []
        self.steps_announced.add(doc["step"])
        return [doc]  # the same instant and rate for every worker

    def _due(self) -> list[dict]:
        out = []
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

    def _start_line(self) -> dict:
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

    def _step_end_line(self, step: int) -> dict:
        ends = [self.step_ends[step][i] for i in sorted(self.step_ends[step])]
        return {
            "event": "step_end",
            **merged_step(ends, self.workers),
            **_transport(ends, set(_STEP_END_KEYS)),
            "inflight_at_step_end": _sum(ends, "inflight_at_step_end"),
            "workers_reported": len(ends),
            "failed_workers": self._failed_doc(),
        }

    def progress_line(self) -> dict | None:
        """The fleet's progress now (the master prints one a second): sums of each worker's
        latest window, and which worker lags most."""
        # Each worker's window once: between steps and in the drain nothing new is printed.
        docs = {i: d for i, d in self.progress.items() if i not in self.failed}
        self.progress = {}
        if not docs:
            return None
        lags = {i: d["lag_p99_ms"] for i, d in docs.items() if d.get("lag_p99_ms") is not None}
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
            "inflight_cap_hits": sum(d["inflight_cap_hits"] for d in current),
            "rows_written": sum(d["rows_written"] for d in docs.values()),
            "workers_reporting": len(docs),
            "slowest_worker": slowest,
            "failed_workers": self._failed_doc(),
        }

    def _done_line(self) -> dict:
        dones = [self.done[i] for i in sorted(self.done)]
        # With every worker failed before its end, what they announced at the start stands in.
        first = dones[0] if dones else next(iter(self.started.values()), {})
        reasons = [d["stop_reason"] for d in dones if d.get("stop_reason")]
        if self.failed:
            reasons.append(
                "worker(s) failed: "
                + "; ".join(f"{i}: {why}" for i, why in sorted(self.failed.items()))
            )
        return {
            "event": "done",
            "start_ns": first.get("start_ns"),
            "worker": 0,
            "workers": self.workers,
            "interrupted": any(d["interrupted"] for d in dones) or bool(self.failed),
            "stop_reason": "; ".join(reasons) or None,
            "steps": [self._step_summary(step) for step in sorted(self.steps_ended)],
            **{key: _sum(dones, key) or 0 for key in _SUMMED_DONE},
            "precise_timer": all(d.get("precise_timer") for d in dones) if dones else None,
            **_transport(dones, set(_DONE_KEYS)),
            "run_tag": first.get("run_tag"),
            "wall_s": max((d["wall_s"] for d in dones), default=0.0),
            "clocks": {str(i): d["clock"] for i, d in self.done.items() if "clock" in d},
            "failed_workers": self._failed_doc(),
        }

    def _step_summary(self, step: int) -> dict:
        ends = [self.step_ends[step][i] for i in sorted(self.step_ends[step])]
        return merged_step(ends, self.workers)


# Keys of the sender's own lines that are not transport stats.
_STEP_END_KEYS = (
    "event",
    "step",
    "warmup",
    "target_rate_per_s",
    "duration_s",
    "worker_target_rate_per_s",
    "achieved_send_rate_per_s",
    "inflight_at_step_end",
    *_SUMMED_STEP,
    *_SLOWEST_STEP,
)
_DONE_KEYS = (
    "event",
    "start_ns",
    "worker",
    "workers",
    "interrupted",
    "stop_reason",
    "steps",
    "precise_timer",
    "run_tag",
    "wall_s",
    "clock",
    *_SUMMED_DONE,
)


def merged_done(dones: list[dict]) -> dict:
    """A fleet's done line from its workers' done lines alone (records collected from a
    cluster, where no master tallied them); a worker whose line is missing counts as failed."""
    workers = max(d["workers"] for d in dones)
    tally = Tally(workers, pid=0)
    # What a sender writes beside its done line for `evbench collect`, not part of it.
    dones = [{k: v for k, v in d.items() if k not in ("host", "argv")} for d in dones]
    for doc in dones:
        index = doc["worker"]
        tally.done[index] = doc
        for step in doc["steps"]:
            tally.step_ends.setdefault(step["step"], {})[index] = step
    tally.steps_ended = set(tally.step_ends)
    for index in range(workers):
        if index not in tally.done:
            tally.failed[index] = "its summary was not collected"
    return tally._done_line()
