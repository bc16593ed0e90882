"""Clients that try to hold a server: silent or half-sent connections, a head trickled a byte at
a time; and a patient GET that a busy server may refuse (503) for a while. Raw sockets on
loopback, for the tests of every listening server's limits."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request

HALF_SENT = b"GET /records HTTP/1.1\r\nHost: x\r\nX-Never-Ends: "


def open_many(port: int, count: int, send: bytes = HALF_SENT) -> list[socket.socket]:
    """`count` connections to 127.0.0.1:`port`, each having sent `send` (b"" for silent)."""
    held = []
    for _ in range(count):
        connection = socket.create_connection(("127.0.0.1", port), timeout=10)
        if send:
            connection.sendall(send)
        connection.setblocking(False)
        held.append(connection)
    return held


def still_open(connection: socket.socket) -> bool:
    """Whether the server still holds `connection` (what it sent, a 503 say, is read away)."""
    try:
        while True:
            if connection.recv(65536) == b"":
                return False
    except BlockingIOError:
        return True
    except OSError:  # reset: closed too
        return False


def open_count(held: list[socket.socket]) -> int:
    return sum(still_open(c) for c in held)


def close_all(held: list[socket.socket]) -> None:
    for connection in held:
        connection.close()


def trickle(port: int, every_s: float, for_s: float, start: bytes = HALF_SENT) -> float | None:
    """Send `start`, then one byte of a header every `every_s`; the seconds until the server
    closed the connection, or None if it still held it after `for_s`."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(start)
        connection.setblocking(False)
        while (held_s := time.monotonic() - began) < for_s:
            if not still_open(connection):
                return held_s
            try:
                connection.send(b"a")
            except OSError:
                return held_s
            time.sleep(every_s)  # the trickle's pace, not a wait for a condition
    return None


def patient_get(url: str, timeout_s: float) -> tuple[int, bytes]:
    """GET `url` until it is answered with anything but 503 (a server whose every slot is
    held says so) or a reset, within `timeout_s`; its status and body."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as answer:
                return int(answer.status), answer.read()
        except urllib.error.HTTPError as exc:
            if exc.code != 503:
                return exc.code, exc.read()
        except (urllib.error.URLError, ConnectionError):
            pass  # refused by a full server, as a 503 is: try again
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} not answered within {timeout_s:g} s")
        time.sleep(0.1)
