"""Which offsets a dispatcher may commit (pure): only up to the first one not yet delivered.

Deliveries finish out of order (bounded concurrency), but a commit says "everything before this
offset is done"; committing past an undelivered event would lose it on a restart.
"""

from __future__ import annotations


class PartitionOffsets:
    def __init__(self) -> None:
        self.pending: set[int] = set()
        self.next_offset: int | None = None  # one past the highest offset seen

    def taken(self, offset: int) -> None:
        self.pending.add(offset)
        if self.next_offset is None or offset >= self.next_offset:
            self.next_offset = offset + 1

    def done(self, offset: int) -> None:
        self.pending.discard(offset)

    def committable(self) -> int | None:
        """The offset to commit (the next one to read after a restart), None before any."""
        if self.pending:
            return min(self.pending)
        return self.next_offset


class OffsetBook:
    """Per-partition offsets of one topic; remembers what was last handed to commit."""

    def __init__(self) -> None:
        self.partitions: dict[int, PartitionOffsets] = {}
        self.committed: dict[int, int] = {}

    def taken(self, partition: int, offset: int) -> None:
        self.partitions.setdefault(partition, PartitionOffsets()).taken(offset)

    def done(self, partition: int, offset: int) -> None:
        self.partitions[partition].done(offset)

    def to_commit(self) -> dict[int, int]:
        """Partitions whose committable offset moved since the last call."""
        moved = {}
        for partition, offsets in self.partitions.items():
            offset = offsets.committable()
            if offset is not None and self.committed.get(partition) != offset:
                moved[partition] = offset
        self.committed.update(moved)
        return moved

    def forget(self, partitions: list[int]) -> None:
        """Revoked partitions: their pending work now belongs to another consumer."""
        for partition in partitions:
            self.partitions.pop(partition, None)
            self.committed.pop(partition, None)
