"""The lines the memory study's consumers (python -m suts.consumers) print, each typed once
(contract.lines).
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired[...] from the class
# body at definition time, and Python 3.11 cannot see it inside a string annotation.
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, cast, get_args

from contract.lines import (
    OutputLine,
    by_event,
    parse_line,
)


# the memory study's consumers (python -m suts.consumers) -----------------------------------
class ConsumerReady(TypedDict):
    event: Literal["ready"]
    pid: int
    client: str
    settings: dict[str, str]


class ConsumerQueue(TypedDict, total=False):  # librdkafka's fetch queue (confluent only)
    fetchq_bytes: int
    fetchq_messages: int
    replyq: int


class ConsumerProgress(ConsumerQueue):
    event: Literal["progress"]
    t_s: float
    consumed: int
    first_message_ns: int | None  # wall clock
    py_traced_bytes: NotRequired[int]  # with --tracemalloc: the Python heap
    py_peak_bytes: NotRequired[int]
    tracemalloc_overhead_bytes: NotRequired[int]


class ConsumerTrimmed(TypedDict):
    event: Literal["trimmed"]
    released: bool
    consumed: int


class ConsumerDone(TypedDict):
    event: Literal["done"]
    stop: str  # the signal's name
    consumed: int
    first_message_ns: int | None
    per_partition: dict[str, int]
    errors: list[str]


ConsumerLine: TypeAlias = (
    ConsumerReady | ConsumerProgress | ConsumerTrimmed | ConsumerDone | OutputLine
)


_CONSUMER_KINDS = by_event(*get_args(ConsumerLine))


def parse_consumer_line(doc: Mapping[str, Any]) -> ConsumerLine | None:
    """A memory-study consumer's line (python -m suts.consumers) as its type; None for an
    unknown event."""
    return cast(ConsumerLine | None, parse_line(doc, _CONSUMER_KINDS, "the consumer"))
