"""argparse types for numbers with a range: a value out of range is refused with the flag's name
(argparse adds it) instead of being used as something else (a port taken modulo 65536, a cap of
0 that refuses every slot). Standard library only: the sender and receiver use them too."""

from __future__ import annotations

import argparse
import math
import re
import urllib.parse
from collections.abc import Callable

from contract.errors import EvbenchError

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


def _finite(text: str, suffix: str, unit: str, above_zero: bool) -> float:
    """A finite number of `unit`, optionally followed by `suffix`; 0 allowed unless
    `above_zero` (float() also takes 'nan' and 'inf', which would disable a timeout)."""
    try:
        value = float(text.removesuffix(suffix))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of {unit}") from None
    if not math.isfinite(value) or value < 0 or (above_zero and value == 0):
        bound = "above 0" if above_zero else "0 or more"
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of {unit}, {bound}")
    return value


def positive_seconds(text: str) -> float:
    """A duration above 0 (a timeout, an interval); `2` or `2s`."""
    return _finite(text, "s", "seconds", above_zero=True)


def seconds(text: str) -> float:
    """A duration of 0 or more seconds (a pause, a delay); `2` or `2s`."""
    return _finite(text, "s", "seconds", above_zero=False)


def milliseconds(text: str) -> float:
    """A delay of 0 or more milliseconds; `100` or `100ms`."""
    return _finite(text, "ms", "milliseconds", above_zero=False)


def signed_milliseconds(text: str) -> float:
    """A finite number of milliseconds either side of 0 (a clock shift); `-250` or `250ms`."""
    try:
        value = float(text.removesuffix("ms"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of milliseconds") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of milliseconds")
    return value


# What no URL holds unencoded, and urllib refuses with a traceback.
_UNSAFE_IN_URL = re.compile(r"[\x00-\x20\x7f]")


def http_url(text: str) -> str:
    """An http:// or https:// URL with a host (and a port in range, if given): a typo is
    named here, not found later as a connection error."""
    if _UNSAFE_IN_URL.search(text):
        raise argparse.ArgumentTypeError(f"{text!r} holds a space or a control character")
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not an http:// or https:// URL (e.g. http://10.0.0.5:9090/metrics)"
        )
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if not parsed.hostname or port == -1 or port == 0:
        raise argparse.ArgumentTypeError(f"'{text}' has no usable host and port")
    return text


def named_url(text: str) -> tuple[str | None, str]:
    """`NAME=URL` or `URL`: the name (None when not given) and the checked URL. The name is
    what stands before the first '=' if it is no URL itself (a URL's query may hold '=')."""
    name, sep, rest = text.partition("=")
    if sep and "/" not in name and ":" not in name:
        if not name:
            raise argparse.ArgumentTypeError(f"'{text}': the name before '=' is empty")
        return name, http_url(rest)
    return None, http_url(text)


def path_component(kind: str) -> Callable[[str], str]:
    """An argparse type for a name that becomes a directory (a run id, a SUT name): checked by
    contract.layout.safe_component before anything is fetched or written."""
    from contract.layout import safe_component

    def checked(text: str) -> str:
        try:
            return safe_component(kind, text)
        except EvbenchError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return checked
