"""argparse types for numbers with a range: a value out of range is refused with the flag's name
(argparse adds it) instead of being used as something else (a port taken modulo 65536, a cap of
0 that refuses every slot). Standard library only: the sender and receiver use them too."""

from __future__ import annotations

import argparse
import math

PORT_MAX = 65535


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None


def port_number(text: str) -> int:
    """A TCP port, 0..65535; 0 lets the system pick a free one."""
    port = _integer(text)
    if not 0 <= port <= PORT_MAX:
        raise argparse.ArgumentTypeError(
            f"{port} is not a port: use 0..{PORT_MAX} (0 picks a free one)"
        )
    return port


def at_least_one(text: str) -> int:
    """A cap or a count that must allow at least one (in-flight requests, partitions, ...)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too small: it must be at least 1")
    return value


def non_negative(text: str) -> int:
    """A whole number where 0 means none (retries, every Nth decoy)."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must not be negative")
    return value


def positive_seconds(text: str) -> float:
    """A duration above 0, finite (float('nan') and 'inf' parse, and would disable a timeout);
    a trailing `s` is allowed."""
    try:
        value = float(text.removesuffix("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of seconds above 0")
    return value


def seconds(text: str) -> float:
    """A duration of 0 or more seconds, finite; a trailing `s` is allowed (`2` or `2s`)."""
    try:
        value = float(text.removesuffix("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of seconds, 0 or more")
    return value


def milliseconds(text: str) -> float:
    """A delay of 0 or more milliseconds, finite."""
    try:
        value = float(text.removesuffix("ms"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of milliseconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of ms, 0 or more")
    return value
