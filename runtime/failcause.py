"""Why a send failed, in one word each (docs/definitions.md: send failure), pure: the sender's
live lines, the run's early wiring diagnosis and the analysis count failures by these causes,
from the same (status, error) the sent records keep, so every place gives the same number.

A cause is one of: `connection refused` (nothing listens at the target), `connection failed`
(no route, no such host, any other connect error), `no connection in time` (the connect
timeout), `timeout` (no answer within the request or drain timeout), `connection closed`
(closed before the answer), `unreadable answer`, `HTTP <code>` (each non-2xx status on its
own), `in-flight cap` (the sender's own cap refused the slot: also a send failure, and the one
cause that is the sender's), `Kafka <error name>` (a produce error by kind), `producer queue
full`, or `other`.
"""

from __future__ import annotations

from collections.abc import Mapping

from contract.records import INFLIGHT_CAP_ERROR

INFLIGHT_CAP = "in-flight cap"
# Causes that say the target was never reached or never meant to take these events: a wrong
# URL, port, path, protocol or credentials, or a proxy with nothing behind it (nginx's 502).
# Load gives timeouts, closed connections, 429, 500 and 503, never these, on a first step
# where not one event got through.
_WIRING = frozenset(
    {
        "connection refused",
        "connection failed",
        "no connection in time",
        "HTTP 502",
        "Kafka _UNKNOWN_TOPIC",
        "Kafka UNKNOWN_TOPIC_OR_PART",
    }
)
_WIRING_STATUS_4XX_EXCEPT = frozenset({408, 429})  # a timeout and a rate limit are load


def failure_cause(status: int, error: str | None) -> str | None:
    """The cause of one attempt's failure; None for a 2xx answer (or a Kafka ack)."""
    if 200 <= status < 300:
        return None
    if status:
        return f"HTTP {status}"
    text = error or ""
    if text == INFLIGHT_CAP_ERROR:
        return INFLIGHT_CAP
    if text.startswith("connect: "):
        if "ConnectionRefused" in text or "Connection refused" in text:
            return "connection refused"
        if "no connection within" in text:
            return "no connection in time"
        return "connection failed"
    for prefix, cause in _PREFIXES:
        if text.startswith(prefix):
            return cause
    if text.startswith("Kafka ") and ":" in text:
        return text.split(":", 1)[0]  # "Kafka _MSG_TIMED_OUT"
    return "other"


_PREFIXES = (
    ("no answer within", "timeout"),
    ("connection closed before the answer", "connection closed"),
    ("unreadable answer", "unreadable answer"),
    ("producer queue full", "producer queue full"),
)


def is_wiring(cause: str) -> bool:
    """Whether a cause says the target was never reached as meant (see `_WIRING`)."""
    if cause in _WIRING:
        return True
    if cause.startswith("HTTP 4"):
        code = int(cause.removeprefix("HTTP "))
        return code not in _WIRING_STATUS_4XX_EXCEPT
    return False


def added(counts: Mapping[str, int], more: Mapping[str, int]) -> dict[str, int]:
    """Two tallies of causes as one."""
    out = dict(counts)
    for cause, n in more.items():
        out[cause] = out.get(cause, 0) + n
    return out


def causes_text(counts: Mapping[str, int]) -> str:
    """`connection refused 998, timeout 2`: most first, then by name; empty when none."""
    ranked = sorted(((n, c) for c, n in counts.items() if n), key=lambda p: (-p[0], p[1]))
    return ", ".join(f"{cause} {n}" for n, cause in ranked)


def wiring_cause(
    counts: Mapping[str, int], ok: int, failures: int, min_failures: int = 100
) -> str | None:
    """The one wiring cause (`is_wiring`) behind (nearly) every failure of a step in which
    nothing was acked, once there are `min_failures` of them; None when the step says nothing
    of wiring (something got through, too few failures yet, mixed or load-like causes). The
    sender's own cap refusals are none of the target's answers: left out of both counts (a
    target that never answers fills the cap while its connects time out)."""
    failures -= counts.get(INFLIGHT_CAP, 0)
    counts = {cause: n for cause, n in counts.items() if cause != INFLIGHT_CAP}
    if ok or failures < min_failures:
        return None
    cause, n = max(counts.items(), key=lambda p: p[1], default=("", 0))
    if cause and is_wiring(cause) and n >= 0.99 * failures:
        return cause
    return None


def wiring_text(cause: str, failures: int, target: str) -> str:
    """The early diagnosis of a first step that failed every event of one wiring cause
    (`wiring_cause`), with what to check: a wiring mistake, never the system's collapse."""
    where = target or "the target"
    check = _CHECKS.get(
        cause,
        "{where} does not take these events as sent: check its URL and the CloudEvents it expects",
    )
    return (
        f"wiring: all {failures} events sent so far failed with {cause}, none acked: "
        f"{check.format(where=where)}. A wiring mistake, not the system's collapse"
    )


_CHECKS = {
    "connection refused": "nothing listens at {where}: check --ingress's host and port, and "
    "that the system is up",
    "connection failed": "{where} cannot be reached (no route, or no such host): check "
    "--ingress's host",
    "no connection in time": "{where} never accepted a connection: check --ingress's host and "
    "port, and any firewall",
    "HTTP 404": "{where} has no such path: check --ingress's path (a broker's is "
    "/<namespace>/<name>)",
    "HTTP 502": "the proxy at {where} has nothing working behind it: check the service it "
    "forwards to",
    "Kafka _UNKNOWN_TOPIC": "{where} has no such topic: check --topic and --kafka-bootstrap",
    "Kafka UNKNOWN_TOPIC_OR_PART": "{where} has no such topic: check --topic and --kafka-bootstrap",
    "HTTP 401": "{where} refused the sender: check the credentials it needs",
    "HTTP 403": "{where} refused the sender: check the credentials it needs",
}
