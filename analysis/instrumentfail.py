"""An instrument failure (docs/definitions.md): the sender or receiver died or ended badly,
records are missing, or nothing arrived although events were acked. It is a verdict of its own,
before any breaking point: the losses it causes are the instrument's, so a run with one names no
breaking point, and its breaking steps are judged *instrument-failed* rather than *breaks*. Pure
and table-tested (tests/analysis/test_verdicts.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from analysis.verdicts import BREAKS, INSTRUMENT_FAILED, Verdict


@dataclass(frozen=True)
class InstrumentEvidence:
    """What says whether the instruments worked: run.json's account and what is on disk."""

    run_status: str | None  # completed | interrupted | failed | running (never finished)
    recorded_failures: tuple[str, ...]  # the runner's own findings (run.json)
    sent_files: int
    received_files: int
    sender_reported_sent: int | None  # the sender's final summary, when it wrote one
    receiver_reported_received: int | None  # the receiver's final stats, when it wrote them
    acked: int  # from the records
    acked_decoys: int  # acked events a trigger was meant to drop
    deliveries: int  # received rows, foreign ones too
    direct: bool = False  # the sender sent to the receiver itself: its acks are the receiver's
    sut_processes_died: bool = False  # a process of the system under test exited during the run
    # Requests that tried to deliver (recorded, refused, malformed, stalled), if the receiver
    # said: its control plane (stats, clock, health) does not count.
    receiver_delivery_attempts: int | None = None
    receiver_url: str | None = None  # where the system was to deliver, if run.json says
    # A fan-out's deliveries to a path no subscriber has, and its subscribers that take the
    # run's events yet got none (analysis.fanout): together, a subscription wired wrong.
    stray_deliveries: int = 0
    silent_subscribers: tuple[str, ...] = ()
    # Those that got each event (nearly) twice or more, with how many times: beside a silent
    # one, two subscriptions wired to one subscriber's path (analysis.fanout).
    doubled_subscribers: tuple[tuple[str, float], ...] = ()


def instrument_failures(e: InstrumentEvidence) -> tuple[str, ...]:
    """Why the instruments cannot be trusted for this run; empty when they can."""
    found = list(e.recorded_failures)
    if e.stray_deliveries and e.silent_subscribers:
        found.append(
            f"nothing came to {', '.join(e.silent_subscribers)} although {e.stray_deliveries} "
            "deliveries came to paths no subscriber has: a subscription wired to the wrong "
            "URL, not the system's collapse; point each at its own (run.json's "
            "sut_settings.subscribers)"
        )
    elif e.silent_subscribers and e.doubled_subscribers:
        found.append(one_path_diagnosis(e.silent_subscribers, e.doubled_subscribers))
    if e.run_status == "running":
        found.append(
            "the run never finished: evbench run stopped before writing its final run.json"
        )
    elif e.run_status == "failed" and not found:
        found.append("run.json says the run failed (see its logs/)")
    if e.sent_files == 0:
        found.append(
            "records missing: no sent records in sent/"
            + (f" although the sender reported {n} sent" if (n := e.sender_reported_sent) else "")
        )
    if e.received_files == 0 and e.receiver_reported_received:
        found.append(
            f"records missing: no received records in received/ although the receiver "
            f"counted {e.receiver_reported_received}"
        )
    elif (
        e.deliveries == 0
        and e.acked > e.acked_decoys
        and _delivery_path_untried(e)
        # the run said it already (evbench run diagnoses it as it ends)
        and not any(f.startswith("nothing received although") for f in found)
    ):
        found.append(
            wiring_diagnosis(e.acked - e.acked_decoys, e.receiver_url, e.receiver_delivery_attempts)
        )
    return tuple(found)


def one_path_diagnosis(silent: Sequence[str], doubled: Sequence[tuple[str, float]]) -> str:
    """A subscriber that got nothing while another got each event twice (or more): two
    subscriptions delivering to one subscriber's path. Read as the system's, every event would
    be lost at one and duplicated at the other; it is wiring, said with what to check."""
    twice = ", ".join(f"{path} got each event {per_event:g} times" for path, per_event in doubled)
    return (
        f"nothing came to {', '.join(silent)} while {twice}: subscriptions wired to one "
        "subscriber's path (a subscription wired to the wrong URL), not the system's losses "
        "and duplicates; point each at its own (run.json's sut_settings.subscribers)"
    )


def delivery_attempts(stats: Mapping[str, Any]) -> int:
    """Requests that came to the receiver to deliver something, whatever became of them
    (recorded, refused by its limits, malformed, stalled, failed inside it): its control
    plane (stats, clock, health checks) is not among them."""
    counts = (
        "received",
        "malformed",
        "not_found",
        "timed_out",
        "internal_errors",
        "refused_connections",
    )
    refused = stats.get("refused") or {}
    return sum(int(stats.get(key) or 0) for key in counts) + sum(refused.values())


def wiring_diagnosis(acked: int, receiver_url: str | None, attempts: int | None) -> str:
    """Acks and no delivery at all: nearly always a wiring mistake (the system delivers
    elsewhere), said as one with what to check, never read as the system's collapse."""
    where = receiver_url or "the receiver's URL"
    if attempts:
        return (
            f"nothing received although {acked} events were acked: {attempts} requests "
            f"reached the receiver at {where} but delivered nothing it could record (see its "
            "malformed and refused counts in run.json)"
        )
    return (
        f"nothing received although {acked} events were acked, and nothing connected to the "
        f"receiver: a wiring mistake, not the system's collapse. Check that the system delivers "
        f"to {where} (its subscriber or sink URL; --receiver-host and --receiver-port; a "
        "trigger filter that matches nothing)"
    )


def _delivery_path_untried(e: InstrumentEvidence) -> bool:
    """Nothing arrived, and the instruments are to blame rather than the system: the receiver
    acked the events itself (direct), or no system process died and nothing ever connected to
    the receiver (a subscription that points elsewhere). A system whose dispatcher died, or
    that connected and delivered nothing usable, has broken, and its steps say so."""
    if e.direct:
        return True
    return not e.sut_processes_died and not e.receiver_delivery_attempts


def under_instrument_failure(verdicts: Sequence[Verdict], failures: Sequence[str]) -> list[Verdict]:
    """A breaking step of a run whose instrument failed may show the instrument's losses, not
    the system's: it is judged instrument-failed. Holding steps held whatever the instruments
    did later."""
    if not failures:
        return list(verdicts)
    return [
        replace(
            v,
            verdict=INSTRUMENT_FAILED,
            reasons=(*v.reasons, "an instrument failed, so these may be the instrument's"),
        )
        if v.verdict == BREAKS
        else v
        for v in verdicts
    ]
