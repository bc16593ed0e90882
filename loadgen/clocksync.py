"""The sender's side of the clock exchanges (runtime.clocks): GETs to the receiver's
/clock over one kept-alive connection, stamped on this host's wall clock (the clock the sent
records use).

Done before the first slot and after the last, never during the run: the pacer's thread is
then free, and an exchange never competes with the load it would measure.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

from runtime.clocks import Exchange, OffsetEstimate, estimate

EXCHANGES = 32
_TIMEOUT_S = 2.0


def parse_answer(data: bytes) -> tuple[int, int] | None:
    """The receiver's two stamps from a complete /clock answer; None while it is incomplete.
    Raises ValueError for an answer that is not one."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    status, *headers = head.split(b"\r\n")
    if not status.startswith(b"HTTP/1.1 200"):
        raise ValueError(f"the clock endpoint answered {status.decode(errors='replace')!r}")
    length = next(
        (
            int(v)
            for k, _, v in (h.partition(b":") for h in headers)
            if k.lower() == b"content-length"
        ),
        None,
    )
    if length is None:
        raise ValueError("the clock endpoint's answer has no Content-Length")
    if len(body) < length:
        return None
    try:
        doc = json.loads(body[:length])
        return int(doc["received_ns"]), int(doc["replied_ns"])
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"not a clock answer: {body[:length][:200]!r}") from None


def exchange_with(
    url: str, count: int = EXCHANGES, timeout_s: float = _TIMEOUT_S
) -> list[Exchange]:
    """`count` exchanges with the clock endpoint at `url` (http only). Raises OSError or
    ValueError when the endpoint cannot be reached or does not answer as one."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"the clock URL must be http://host:port/clock, not {url!r}")
    port = parts.port or 80
    request = f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode()
    done: list[Exchange] = []
    with socket.create_connection((parts.hostname, port), timeout=timeout_s) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            sent_ns = time.time_ns()
            sock.sendall(request)
            data = sock.recv(4096)
            returned_ns = time.time_ns()  # the answer's first bytes: the stamp that matters
            while (stamps := parse_answer(data)) is None:
                more = sock.recv(4096)
                if not more:
                    raise ValueError("the clock endpoint closed the connection mid-answer")
                data += more
            done.append(Exchange(sent_ns, stamps[0], stamps[1], returned_ns))
    return done


def measure(url: str) -> tuple[OffsetEstimate | None, str | None]:
    """The offset to the receiver now, or why it could not be measured."""
    try:
        return estimate(exchange_with(url)), None
    except (OSError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
