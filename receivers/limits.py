"""What one client may cost the receiver, and how long it may take (defaults and CLI flags).

The receiver is often bound to 0.0.0.0 next to a cluster, so every resource a client can pin is
bounded: bytes before the headers end, body bytes per request and in all, connections, time per
request phase, and answers queued for a client that does not read them. A legitimate sender of
8 KB events comes nowhere near any of these.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

from runtime.argtypes import at_least_one, positive_seconds

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Limits:
    max_url_bytes: int = 8 * KIB  # 414 beyond
    max_header_bytes: int = 64 * KIB  # request line and headers; 431 beyond
    max_body_bytes: int = 1 * MIB  # per event; 413 beyond (Kafka's default record limit)
    max_buffered_bytes: int = 256 * MIB  # bodies being received, all connections; 503 beyond
    max_connections: int = 10_000  # open at once; 503 and close beyond
    header_timeout_s: float = 10.0  # first byte of a request to the end of its headers; 408
    body_timeout_s: float = 30.0  # end of headers to the end of the body; 408
    # A connection waiting for a request (its first too), told on every answer as
    # Keep-Alive: timeout=N so that a client retires it first (loadgen.keepalive).
    idle_timeout_s: float = 120.0
    max_queued_answer_bytes: int = 64 * KIB  # stop reading a client that does not read answers

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not value > 0:
                raise ValueError(f"{f.name} must be positive, not {value}")


_HELP = {
    "max_url_bytes": "longest request target, answered 414 beyond",
    "max_header_bytes": "request line and headers, answered 431 beyond",
    "max_body_bytes": "largest event body, answered 413 beyond",
    "max_buffered_bytes": "event bodies held at once across connections, 503 beyond",
    "max_connections": "connections open at once (raised fd limit permitting), 503 beyond",
    "header_timeout_s": "seconds from a request's first byte to the end of its headers, 408",
    "body_timeout_s": "seconds from the end of the headers to the end of the body, 408",
    "idle_timeout_s": "seconds a connection may wait for a request, its first too; told to "
    "clients on every answer (Keep-Alive: timeout=N)",
    "max_queued_answer_bytes": "answers queued for a client before reading from it pauses",
}


def _flag(name: str) -> str:
    return "--" + name.removesuffix("_s").replace("_", "-")


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("limits (what one client may cost the receiver)")
    for f in fields(Limits):
        kind = float if f.name.endswith("_s") else int
        group.add_argument(
            _flag(f.name),
            dest=f.name,
            type=positive_seconds if kind is float else at_least_one,
            default=f.default,
            metavar="S" if kind is float else "N",
            help=f"{_HELP[f.name]} (default {f.default})",
        )


def limits_from(args: argparse.Namespace) -> Limits:
    return Limits(**{f.name: getattr(args, f.name) for f in fields(Limits)})


def limit_argv(limits: Limits) -> list[str]:
    """The flags that reproduce `limits` in a receiver process (only those off the defaults)."""
    argv: list[str] = []
    for f in fields(Limits):
        value = getattr(limits, f.name)
        if value != f.default:
            argv += [_flag(f.name), str(value)]
    return argv
