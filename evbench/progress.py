"""The live lines `evbench run` prints (pure formatting; the runner decides when)."""

from __future__ import annotations

from collections.abc import Mapping

from analysis.hostload import HostLoad
from analysis.verdicts import Thresholds, saturation
from contract.senderlines import SenderProgress, StepEnd
from runtime.failcause import causes_text


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def progress_line(
    doc: SenderProgress, steps_total: int | None, received: int | None, host: str = ""
) -> str:
    """A sender 'progress' event as one line: the step's pace vs what the last second achieved;
    `host`: the host's load, when others are crowding it (`host_note`)."""
    label = _label(doc["step"], steps_total)
    return (
        f"{label:>12}  {doc['target_rate_per_s']:>6}/s  last 1 s {doc['window_sent']:>6}/s  "
        f"lag p99 {_ms(doc['lag_p99_ms']):>9}{_fleet(doc)}  "
        f"failures {doc['failures']:>5}{_causes(doc.get('failures_by_cause'))}  "
        f"in flight {doc['inflight']:>4}  received {_count(received)}"
        + (f"  {host}" if host else "")
    )


def host_note(load: HostLoad | None, t: Thresholds) -> str:
    """`HOST SATURATED: host 99% busy, 52% by processes outside the run, of 2 CPUs` while
    others crowd the host (analysis.verdicts.saturation, over the last seconds); else empty."""
    why = saturation(load, t)
    return f"HOST SATURATED: {why}" if why else ""


def _causes(counts: Mapping[str, int] | None) -> str:
    """The failures by cause, when there are any: ` (connection refused 998, timeout 2)`.
    The in-flight cap is among them: the sender's own refusals, when it could not keep up."""
    text = causes_text(counts or {})
    return f" ({text})" if text else ""


def _fleet(doc: SenderProgress) -> str:
    """A fleet's progress: whose lag p99 that is, how many workers reported, who failed."""
    if "workers_reporting" not in doc:
        return ""
    text = f" (worker {doc['slowest_worker']}, {doc['workers_reporting']} reporting)"
    if failed := doc.get("failed_workers"):
        text += f" FAILED: {', '.join(sorted(failed))}"
    return text


def step_line(doc: StepEnd, steps_total: int | None, received: int | None) -> str:
    """A sender 'step_end' event: the step's target against its achieved send rate."""
    label = _label(doc["step"], steps_total)
    target = doc["target_rate_per_s"]
    achieved = doc["achieved_send_rate_per_s"]
    ratio = 100 * achieved / target if target else 0.0
    return (
        f"{label:>12}  {target:>6}/s  achieved {achieved:>8.1f}/s ({ratio:6.2f} %)  "
        f"lag p99 {_ms(doc['lag_p99_ms']):>9}  "
        f"failures {doc['failures']:>5}{_causes(doc.get('failures_by_cause'))}  "
        f"received {_count(received)}"
        + (
            f"  FAILED workers: {', '.join(sorted(failed))}"
            if (failed := doc.get("failed_workers"))
            else ""
        )
    )


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def _label(step: int, steps_total: int | None) -> str:
    """Which step: of how many, where the plan knows (a search's probes are open-ended)."""
    if step == 0:
        return "warmup"
    return f"step {step}" + (f"/{steps_total}" if steps_total else "")
