"""Clock offsets between a sender and the receiver, measured NTP-style (RFC 5905 §8). Pure.

End-to-end latency subtracts a sender's stamp from the receiver's, so it is off by however much
the two hosts' clocks disagree. One exchange of a request and its answer bounds that
disagreement: the sender stamps `sent_ns` just before it writes, the receiver stamps
`remote_received_ns` when the request's first bytes arrive and `remote_replied_ns` when it
answers, and the sender stamps `returned_ns` when the answer arrives. Then

    offset = ((remote_received - sent) + (remote_replied - returned)) / 2   (receiver - sender)
    delay  = (returned - sent) - (remote_replied - remote_received)

and the true offset lies within ±delay/2 of that estimate however unevenly the delay splits
between the two directions. Many exchanges are made; the ones with the shortest delay carry the
tightest intervals, and since every interval holds the true offset, so does their intersection.

The offset drifts during a long run (clocks run at slightly different rates), so it is
measured before and after the run and interpolated linearly in between.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contract.lines import OffsetDoc

# Exchanges kept for the estimate: the shortest delays, whose intervals are the tightest.
KEEP_EXCHANGES = 8


@dataclass(frozen=True)
class Exchange:
    """One request to the receiver's clock endpoint and its answer; each time on the clock of
    the host that read it."""

    sent_ns: int
    remote_received_ns: int
    remote_replied_ns: int
    returned_ns: int

    @property
    def delay_ns(self) -> int:
        return (self.returned_ns - self.sent_ns) - (
            self.remote_replied_ns - self.remote_received_ns
        )

    @property
    def low_ns(self) -> int:
        """The smallest offset this exchange allows: the answer arrived the instant it left."""
        return self.remote_replied_ns - self.returned_ns

    @property
    def high_ns(self) -> int:
        """The largest: the request arrived the instant it left."""
        return self.remote_received_ns - self.sent_ns


@dataclass(frozen=True)
class OffsetEstimate:
    """The receiver's clock minus the sender's at `at_ns` (sender's clock), within ±bound_ns."""

    at_ns: int
    offset_ns: int
    bound_ns: int
    exchanges: int  # made
    kept: int  # of which the estimate uses
    min_delay_ns: int

    def as_doc(self) -> OffsetDoc:
        return {
            "at_ns": self.at_ns,
            "offset_ns": self.offset_ns,
            "bound_ns": self.bound_ns,
            "exchanges": self.exchanges,
            "kept": self.kept,
            "min_delay_ns": self.min_delay_ns,
        }

    @staticmethod
    def from_doc(doc: Mapping[str, int]) -> OffsetEstimate:
        return OffsetEstimate(**{key: int(doc[key]) for key in _ESTIMATE_KEYS})


_ESTIMATE_KEYS = ("at_ns", "offset_ns", "bound_ns", "exchanges", "kept", "min_delay_ns")


def estimate(exchanges: Sequence[Exchange], keep: int = KEEP_EXCHANGES) -> OffsetEstimate:
    """The offset from the `keep` shortest-delay exchanges: the middle of the intersection of
    their intervals, bounded by its half-width. An empty intersection means an interval was
    wrong (a clock stepped during the exchanges, or a stamp was not where it should be); then
    the single shortest exchange is all that is trusted."""
    usable = [e for e in exchanges if e.delay_ns >= 0]
    if not usable:
        raise ValueError("no usable clock exchange (every one had a negative delay)")
    best = sorted(usable, key=lambda e: e.delay_ns)[: max(1, keep)]
    low = max(e.low_ns for e in best)
    high = min(e.high_ns for e in best)
    if low > high:
        best = best[:1]
        low, high = best[0].low_ns, best[0].high_ns
    at_ns = sum((e.sent_ns + e.returned_ns) // 2 for e in best) // len(best)
    return OffsetEstimate(
        at_ns=at_ns,
        offset_ns=round((low + high) / 2),
        bound_ns=-(-(high - low) // 2),  # rounded up: a bound never understates
        exchanges=len(exchanges),
        kept=len(best),
        min_delay_ns=best[0].delay_ns,
    )


@dataclass(frozen=True)
class Correction:
    """One sender's offset over a run: measured before and (if it got that far) after, linear
    in between and beyond (a clock's rate error is constant over minutes)."""

    before: OffsetEstimate
    after: OffsetEstimate | None = None

    @property
    def slope(self) -> float:
        """Drift, in ns of offset per ns of the sender's clock."""
        if self.after is None or self.after.at_ns == self.before.at_ns:
            return 0.0
        return (self.after.offset_ns - self.before.offset_ns) / (
            self.after.at_ns - self.before.at_ns
        )

    @property
    def drift_ns(self) -> int:
        return 0 if self.after is None else self.after.offset_ns - self.before.offset_ns

    @property
    def bound_ns(self) -> int:
        """A line through two points each within its bound stays, between them, within the
        larger bound."""
        return max(self.before.bound_ns, self.after.bound_ns if self.after else 0)

    def offset_at(self, t_ns: int) -> float:
        return self.before.offset_ns + self.slope * (t_ns - self.before.at_ns)

    def significant(self) -> bool:
        """Whether the clocks measurably disagree: some offset outside its own bound. Within the
        bound, subtracting the estimate could add as much error as it removes."""
        ends = (self.before, self.after) if self.after else (self.before,)
        return any(abs(end.offset_ns) > end.bound_ns for end in ends)


CORRECTION_MODES = ("auto", "on", "off")
# What `analyze` applies unless told otherwise, and so what a capacity probe is judged with.
DEFAULT_CORRECTION = "auto"


def corrections_from(clock_doc: Mapping[str, Any] | None) -> dict[int, Correction]:
    """Each sender worker's measured offsets, from run.json's `clock` (a SenderClock per worker
    under `senders`); workers whose offset was never measured are absent."""
    found: dict[int, Correction] = {}
    for worker, sender in ((clock_doc or {}).get("senders") or {}).items():
        before, after = sender.get("before"), sender.get("after")
        if before:
            found[int(worker)] = Correction(
                OffsetEstimate.from_doc(before), OffsetEstimate.from_doc(after) if after else None
            )
    return found


def to_apply(corrections: dict[int, Correction], mode: str) -> dict[int, Correction]:
    """The workers whose received stamps the analysis moves onto the sender's clock: with
    "auto", those whose clocks measurably disagree with the receiver's (the same clock read
    twice is left alone, since its estimate only adds noise); "on" every measured worker;
    "off" none."""
    if mode not in CORRECTION_MODES:
        raise ValueError(f"clock correction '{mode}': use one of {', '.join(CORRECTION_MODES)}")
    if mode == "off":
        return {}
    return {w: c for w, c in corrections.items() if mode == "on" or c.significant()}
