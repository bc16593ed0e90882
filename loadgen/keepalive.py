"""How long the sender keeps an idle keep-alive connection: a margin under the limit its server
tells (pure; the pool in `loadgen.http` applies it).

A server may close a connection it holds idle at any moment, and a request written on it just
then fails without ever reaching the server ("connection closed before the answer"). The client
cannot tell such a request from one the server took before it closed, so the sender never
retries it (a retry could duplicate the event, and would move its latency off its slot); it
keeps no connection long enough for that to happen. A server says its limit in each answer,
`Keep-Alive: timeout=N` (the receiver does, RFC 9110's Keep-Alive as HTTP/1.1 servers send it),
and holds a connection that has not yet begun a request for that same limit (the receiver
does); the sender retires an idle connection a margin before the limit, counting from its last
answer, or from its connect when it has not had one. A server that tells no limit is trusted to
keep its connections open.
"""

from __future__ import annotations

from contract.units import NS_PER_S

# The margin: a tenth of the limit, at least a second (a request written just before it still
# arrives in time across a slow network, from a loop running a little late), at most half.
_MARGIN_MIN_NS = NS_PER_S
NEVER_NS = 1 << 62  # the age for a server that tells no limit: none is ever too old


def keep_alive_timeout_s(value: bytes) -> int | None:
    """The `timeout` of a Keep-Alive header's value (`timeout=5, max=100`): whole seconds, or
    None when it says none."""
    for param in value.split(b","):
        name, _, number = param.partition(b"=")
        if name.strip().lower() == b"timeout":
            digits = number.strip()
            return int(digits) if digits.isdigit() else None
    return None


def retire_age_ns(timeout_s: int) -> int:
    """How long an idle connection is kept when its server closes it after `timeout_s`."""
    limit_ns = timeout_s * NS_PER_S
    return limit_ns - min(limit_ns // 2, max(_MARGIN_MIN_NS, limit_ns // 10))
