"""The custom Locust messages between the fleet's master and its workers, each typed once.

Locust carries them with msgpack: plain dicts, lists, strings and numbers only (a tuple comes
back a list). Every type is prefixed `evb_`, so that none shadows one of Locust's own.
"""

from __future__ import annotations

from typing import Any, TypedDict

READY = "evb_ready"  # worker -> master: listening for a plan (sent after registering for it)
PLAN = "evb_plan"  # master -> worker: what to send, as whom, from when
PLAN_OK = "evb_plan_ok"  # worker -> master: the pacer started
LINE = "evb_line"  # worker -> master: one JSON line of its pacer
EXIT = "evb_exit"  # worker -> master: its pacer ended, with this exit code
STOP = "evb_stop"  # master -> worker: stop sending (as Ctrl-C does), keep every record


class Plan(TypedDict):
    index: int  # 0..count-1, assigned by the master (Locust's own indexes are never reused)
    count: int
    argv: list[str]  # `python -m loadgen` flags: settings, --worker/--workers, --start-at-ns


class PlanOk(TypedDict):
    index: int
    pid: int
    host: str


class Line(TypedDict):
    index: int
    line: dict[str, Any]  # a sender line as printed (contract.senderlines.SenderLine: parsed there)


class Exit(TypedDict):
    index: int
    code: int
