"""How the instruments ended, judged the one way every command judges them (pure).

A receiver or sender that failed makes its records untrustworthy: the session records why, and
the run (or the search) fails as an instrument failure, never as a break of the system.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from contract.documents import NotReported, parse_receiver_stats
from contract.errors import EvbenchError
from contract.receiverlines import ReceiverStats
from contract.senderlines import SenderDone
from receivers.limits import Limits


def receiver_limits(payload_bytes: int) -> Limits:
    """The receiver's defaults, with room for the run's own events (and any envelope a system
    wraps them in) whatever --payload-bytes asks for."""
    default = Limits()
    return replace(default, max_body_bytes=max(default.max_body_bytes, 2 * payload_bytes))


def exit_text(code: int) -> str:
    """An exit code as people read it: negative codes are the signal that ended the process."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def receiver_failure(
    died_during_run: bool, exit_code: int, final_stats: ReceiverStats | NotReported
) -> str | None:
    """How the receiver ended, when that makes its records untrustworthy (None: it did not).

    A healthy receiver, stopped by SIGTERM, flushes, prints its stopped line with its stats and
    exits 0. Anything else (say, it could not write its records) means deliveries may be
    missing that the system under test made.
    """
    if died_during_run:
        return f"receiver died during the run ({exit_text(exit_code)})"
    if exit_code != 0:
        return f"receiver failed at stop ({exit_text(exit_code)}): its records may be incomplete"
    if not final_stats:
        return "receiver ended without its final report: its records may be incomplete"
    return receiver_refusals(final_stats)


# Answers with which the receiver turned away what a system delivered because of its own limits
# or faults. 400 (not an event) and 408 (a stalled request) are the sender's side's doing.
_INSTRUMENT_REFUSALS = ("413", "414", "431", "503")


def receiver_refusals(stats: ReceiverStats | NotReported) -> str | None:
    """Deliveries the receiver refused, could not parse for its own fault, or could not write:
    the events they carried would count as lost to the system under test."""
    if not stats:
        return None
    refused = {
        code: n for code, n in stats["refused"].items() if code in _INSTRUMENT_REFUSALS and n
    }
    parts = [f"{n} answered {code}" for code, n in sorted(refused.items())]
    for count, what in (
        (stats["internal_errors"], "failed inside the receiver (500)"),
        (stats["quarantined"], "could not be written (see received-quarantine.jsonl)"),
        (stats["unwritten_rows"], "were never written"),
    ):
        if count:
            parts.append(f"{count} {what}")
    if not parts:
        return None
    return "receiver turned deliveries away by its own limits or faults: " + ", ".join(parts)


def sender_failure(exit_code: int, summary: SenderDone | None) -> str | None:
    """How the sender ended, when its records do not cover the pace it was given (None: they
    do). 130 is an interrupted sender that stopped scheduling and flushed, as asked. A fleet
    that lost workers finished without their share of the pace. One that could not write all
    its records sent events that its records do not hold: their deliveries would read as sent
    by no one, and their losses would go uncounted."""
    if summary is None:
        return f"sender ended without finishing ({exit_text(exit_code)})"
    if unwritten := summary.get("unwritten_rows"):
        why = summary.get("records_error") or "a write failed"
        return f"sender could not write {unwritten} of its sent records ({why})"
    if failed := summary.get("failed_workers"):
        lost = "; ".join(f"worker {i}: {why}" for i, why in sorted(failed.items()))
        return f"sender fleet lost {len(failed)} of {summary['workers']} workers ({lost})"
    if exit_code not in (0, 130):
        return f"sender failed ({exit_text(exit_code)})"
    return None


# The receiver counts deliveries, not distinct events: once there are as many as were acked, some
# may be duplicates standing in for events still on their way (a Kafka dispatcher started again
# from its last commit delivers some twice while the rest of its backlog is still coming), so the
# count ends the wait only after this long without a new delivery.
ALL_IN_QUIET_S = 0.5


def grace_verdict(
    received: int,
    expected: int,
    since_change_s: float,
    elapsed_s: float,
    grace_s: float,
    cap_s: float,
) -> str | None:
    """Why waiting for stragglers may stop now (None: keep waiting).

    Stops once as many deliveries as acked events have arrived and nothing new for
    `ALL_IN_QUIET_S` (or the grace, if shorter); otherwise once nothing new has arrived for
    `grace_s`, and in any case after `cap_s`, so a system that trickles cannot hold a run forever.
    """
    quiet = since_change_s >= min(grace_s, ALL_IN_QUIET_S)
    if received >= expected and (quiet or (elapsed_s >= cap_s and received == expected)):
        if received == expected:
            return "all acked events received"
        return (
            f"{received - expected} deliveries more than acked events (duplicates or foreign), "
            f"then nothing new for {min(grace_s, ALL_IN_QUIET_S):g} s"
        )
    if since_change_s >= grace_s:
        return f"nothing new for {grace_s:g} s"
    if elapsed_s >= cap_s:
        return f"cap of {cap_s:g} s reached"
    return None


def wait_for_stragglers(
    stats: Callable[[], ReceiverStats | None],
    expected: int,
    grace_s: float,
    cap_s: float,
    interrupts: Callable[[], int] = lambda: 0,
) -> dict[str, Any]:
    """Wait until the receiver holds `expected` deliveries, or nothing new came for `grace_s`,
    or `cap_s` passed; returns how it ended."""
    started = last_change = time.monotonic()
    first = stats()
    last = first["received"] if first is not None else 0
    while True:
        now = time.monotonic()
        # After a Ctrl-C the user wants out: a short grace; after a second one, none.
        grace_now_s = grace_s if not interrupts() else min(grace_s, 1.0)
        reason = grace_verdict(last, expected, now - last_change, now - started, grace_now_s, cap_s)
        if interrupts() >= 2:
            reason = reason or "interrupted twice"
        if reason:
            return {
                "waited_s": round(now - started, 3),
                "reason": reason,
                "expected": expected,
                "received": last,
            }
        time.sleep(0.1)
        current = stats()
        if current is not None and current["received"] != last:
            last, last_change = current["received"], time.monotonic()


def stats_or_none(doc: object) -> ReceiverStats | None:
    """The receiver's counters, or None when it did not say them (it never answered, or died
    before its last line)."""
    try:
        return parse_receiver_stats(doc)
    except EvbenchError:
        return None


def receiver_trouble(
    alive: bool,
    received: Callable[[], int],
    stats: Callable[[], ReceiverStats | None],
    timeout_s: float = 10.0,
) -> str | None:
    """Why the receiver's records cannot be judged now (None: they can). It counts a delivery
    when it arrives and writes it on its next flush, so wait until the files hold everything
    counted by now (a system still delivering goes on adding to the count); then deliveries
    it turned away would read as the system's losses."""
    if not alive:
        return "the receiver died (see logs/receiver.log)"
    counted = received()
    deadline = time.monotonic() + timeout_s
    now = stats()
    while now is None or now["rows_written"] + now["quarantined"] < counted:
        if time.monotonic() >= deadline:
            return f"the receiver did not write its records within {timeout_s:g} s"
        time.sleep(0.1)
        now = stats()
    return receiver_refusals(now)
