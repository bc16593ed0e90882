"""The JSON lines child processes print on stdout, one object a line, each typed once: what
several children print, and how every reader parses a line (the lines of each child are in a
module of their own: contract.senderlines, receiverlines, consumerlines, metricslines).

Every line has an `event` key naming its kind (a Literal: a union of line types narrows on it).
Writers build each line as its type, so the type checker holds their keys; readers parse a
child's line once where they read it (`parse_sender_line`, `parse_consumer_line`, ...) and work
on the typed union from there. The wire stays plain JSON: a line printed before reads the same
after (an older sender's `inflight_cap_hits` reads as `inflight_cap_refused`). Stdlib only.
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired[...] from the class
# body at definition time, and Python 3.11 cannot see it inside a string annotation.
from collections.abc import Mapping
from typing import Any, Literal, TypedDict, get_args, get_type_hints

from contract.errors import EvbenchError


# shared by several children ----------------------------------------------------------------
class OutputLine(TypedDict):
    """What runtime.procs.Child makes of a stdout line that is not a JSON object."""

    event: Literal["output"]
    text: str


class WarningLine(TypedDict):
    event: Literal["warning"]
    message: str


class OffsetDoc(TypedDict):  # runtime.clocks.OffsetEstimate: receiver's clock - sender's
    at_ns: int
    offset_ns: int
    bound_ns: int
    exchanges: int
    kept: int
    min_delay_ns: int


class SenderClock(TypedDict):
    """A sender's offsets to the receiver's clock (`--clock-url`), before and after its run;
    None where it could not be measured, and why in `errors`."""

    url: str
    before: OffsetDoc | None
    after: OffsetDoc | None
    errors: list[str]


# parsing -----------------------------------------------------------------------------------
# Keys older writers used, by their name now: a line printed before reads the same after.
_RENAMED = {"inflight_cap_hits": "inflight_cap_refused"}


def by_event(*kinds: type) -> dict[str, type]:
    """Each line type by its `event` Literal, read from the type itself."""
    table: dict[str, type] = {}
    for kind in kinds:
        (event,) = get_args(get_type_hints(kind)["event"])
        table[event] = kind
    return table


def renamed_keys(doc: Mapping[str, Any]) -> dict[str, Any]:
    """`doc` with keys an older writer named otherwise under today's names, at any depth."""
    return {_RENAMED.get(key, key): _renamed_in(value) for key, value in doc.items()}


def _renamed_in(value: object) -> object:
    if isinstance(value, dict):
        return renamed_keys(value)
    if isinstance(value, list):
        return [_renamed_in(item) for item in value]
    return value


def checked(doc: Mapping[str, Any], kind: type, what: str) -> dict[str, Any]:
    """`doc` with today's key names, once it has every key `kind` requires (an EvbenchError
    names the missing ones)."""
    line = renamed_keys(doc) if _RENAMED.keys() & doc.keys() else dict(doc)
    required: frozenset[str] = vars(kind)["__required_keys__"]
    if missing := sorted(required - line.keys()):
        raise EvbenchError(f"{what} without {', '.join(missing)}")
    return line


def parse_line(doc: Mapping[str, Any], kinds: dict[str, type], who: str) -> dict[str, Any] | None:
    """`doc` checked against the line type its `event` names; None for a kind `kinds` does not
    hold."""
    kind = kinds.get(str(doc.get("event")))
    if kind is None:
        return None
    return checked(doc, kind, f"{who} printed a '{doc['event']}' line")
