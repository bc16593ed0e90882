"""A consumer's memory over a backlog, in the figures seeds 000 and 001 read by hand. Pure.

Phases: idle (before its first message), the drain (the backlog consumed), and after it. The
figures: the idle baseline, the peak, the plateau after the drain, and whether memory came
back to idle, judged with a stated tolerance (allocators keep freed pages; a few MiB either
side is noise, not a leak).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contract.memorydocs import ScenarioDoc

MIB = 2**20
# Back to idle: within 10 % of the idle baseline or 2 MiB, whichever is larger.
RETURN_TOLERANCE = 0.10
RETURN_SLACK_BYTES = 2 * MIB
# The plateau: the median of the last seconds after the drain, once at least SETTLE_S have
# passed since it (else the drain's own peak would be read as where memory settled).
PLATEAU_S = 10.0
SETTLE_S = 2.0


@dataclass(frozen=True)
class MemoryFigures:
    idle_bytes: int | None  # median before the first message (None: no sample before it)
    peak_bytes: int  # the largest sample, or the kernel's high-water mark if larger
    plateau_bytes: int | None  # median of the last PLATEAU_S after the drain (None: no drain,
    # or less than SETTLE_S of samples after it)
    returned_to_idle: bool | None  # None when idle or plateau is unknown
    tolerance_bytes: int | None  # how far above idle still counts as returned


def memory_figures(
    series: Sequence[tuple[float, int]],
    first_message_s: float | None,
    drained_s: float | None,
    high_water_bytes: int | None = None,
) -> MemoryFigures:
    """`series`: (seconds since the consumer started, bytes) samples, in time order."""
    if not series:
        raise ValueError("no memory samples")
    before = [b for t, b in series if first_message_s is None or t < first_message_s]
    idle = int(statistics.median(before)) if before and first_message_s is not None else None
    peak = max(max(b for _, b in series), high_water_bytes or 0)
    plateau = None
    if drained_s is not None and series[-1][0] - drained_s >= SETTLE_S:
        end_s = series[-1][0]
        after = [b for t, b in series if t >= max(drained_s, end_s - PLATEAU_S)]
        plateau = int(statistics.median(after)) if after else None
    tolerance = None if idle is None else max(int(idle * RETURN_TOLERANCE), RETURN_SLACK_BYTES)
    returned = (
        None
        if idle is None or plateau is None or tolerance is None
        else plateau <= idle + tolerance
    )
    return MemoryFigures(idle, peak, plateau, returned, tolerance)


DESCRIBE_COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)


def describe_lines(
    group: str,
    topic: str,
    partitions: list[tuple[int, int | None, int]],
    member: tuple[str, str, str] | None = None,
) -> list[str]:
    """`kafka-consumer-groups --describe --group G` as Kafka's tool prints it, from (partition,
    committed offset or None, log-end offset) rows: columns padded to at least 15, and `-` for
    the offset and the lag of a partition with nothing committed and for an absent member."""
    consumer_id, host, client_id = member or ("-", "-", "-")
    widths = [max(15, len(group)), max(15, len(topic)), 10, 15, 15, 15]
    widths += [max(15, len(consumer_id)), max(15, len(host))]

    def line(values: tuple[str, ...]) -> str:
        padded = [v.ljust(w) for v, w in zip(values, widths, strict=False)]
        return " ".join([*padded, values[-1]])

    rows = [line(DESCRIBE_COLUMNS)]
    for partition, committed, end in partitions:
        current, lag = ("-", "-")
        if committed is not None and committed >= 0:
            current, lag = str(committed), str(end - committed)
        rows.append(
            line(
                (group, topic, str(partition), current, str(end), lag, consumer_id, host, client_id)
            )
        )
    return rows


def peak_table(rows: Sequence[ScenarioDoc]) -> list[str]:
    """Seed 000's table, one row per scenario: idle, peak and post-drain MiB, whether memory
    came back to idle, the predicted buffer bound, when the first message came, and the
    partitions never consumed. Pure."""

    def mib(value: int | None) -> str:
        return "-" if value is None else f"{value / 2**20:.1f}"

    # With --subscriptions: how many, and seed 003's rule for as many beside the bound.
    fanned = any(row.get("subscriptions", 1) > 1 for row in rows)
    lines = [
        f"{'consumer':<18} {'P':>4} " + (f"{'S':>3} {'seed 003 MiB':>12} " if fanned else "")
        + f"{'idle MiB':>9} {'peak MiB':>9} {'after MiB':>10} "
        f"{'back to idle':>12} {'predicted buffers MiB':>21} {'first msg s':>11} never consumed"
    ]  # fmt: skip
    for row in rows:
        f: Mapping[str, Any] = row["figures"] or {}
        returned = f.get("returned_to_idle")
        first = row["first_message_s"]
        seed = f"{row.get('subscriptions', 1):>3} {mib(row.get('seed_rule_bytes')):>12} "
        lines.append(
            f"{row['consumer']:<18} {row['partitions']:>4} {seed if fanned else ''}"
            f"{mib(f.get('idle_bytes')):>9} "
            f"{mib(f.get('peak_bytes')):>9} {mib(f.get('plateau_bytes')):>10} "
            f"{'-' if returned is None else 'yes' if returned else 'no':>12} "
            f"{mib(row['predicted_buffer_bytes']):>21} "
            f"{'-' if first is None else f'{first:.1f}':>11} "
            f"{', '.join(map(str, row['never_consumed'])) or '-'}"
        )
    return lines
