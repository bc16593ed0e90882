"""argparse types for numbers with a range: a value out of range is refused with the flag's name
(argparse adds it) instead of being used as something else (a port taken modulo 65536, a cap of
0 that refuses every slot). Standard library only: the sender and receiver use them too."""

from __future__ import annotations

import argparse
import math
import os
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from contract.errors import EvbenchError

PORT_MAX = 65535

# An event's payload is JSON around its id (contract.records.PAYLOAD_ID_PREFIX ...): 25 bytes of
# JSON, and an id of a 6-character run tag, a worker index and a slot number of up to 18 digits
# (contract.records.EVENT_ID_SEQ_PATTERN) is at most 39 characters (with 9,999 workers): 64
# bytes hold any run's ids. The sender still checks its own longest id before it starts.
PAYLOAD_MIN_BYTES = 64
# The receiver's default body limit (receivers.limits.Limits.max_body_bytes; a test holds them
# equal): a larger event would be refused by a receiver started with its defaults, and building
# a payload of 10^12 bytes would take the sender all its memory and time before its first slot.
PAYLOAD_MAX_BYTES = 1024 * 1024
# A host's clock off by more than a day is no clock error to correct but a wrong flag.
CLOCK_SHIFT_MAX_MS = 86_400_000.0
# Epoch nanoseconds before this (2001-09-09) are a mistake: a negative or zero instant, or one
# given in seconds or milliseconds; the sender would fire every slot since then at once.
EPOCH_NS_MIN = 10**18
# Sender processes one host may start: each is a busy process of its own, and more than a few
# per core only add lag (measured: two workers on 2 cores held less than one).
WORKERS_PER_CORE = 4
# Repeats of a pace in one run (--repeat): 2019 made five; past a few dozen, a run directory of
# hundreds of systems is a campaign better split into runs.
REPEATS_MAX = 50
# Subscribers of one event (--subscribers, --triggers): each is a path of its own at the receiver,
# whose table of known paths holds 1,024 (receivers.identify.MAX_KNOWN_PATHS; a test holds them
# equal): past it every delivery decodes its path. The lab's channel-imc ran 1,024 (10 events,
# 10,240 deliveries in 6 s); 100,000 URLs passed on a component's command line are more than
# Linux takes ("Argument list too long"), and 10^14 was a MemoryError.
SUBSCRIBERS_MAX = 1024


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


def count_list(
    what: str, most: int | None = None, why: str = ""
) -> Callable[[str], tuple[int, ...]]:
    """A comma-separated list of counts, each 1 to `most` (`why` that bound) and given once, in
    the user's order (`1,10,50`): a campaign's values of one setting (`what`: "partition
    counts"); a bad item is named."""
    accepted = f"1 to {most}" if most else "at least 1"
    because = f" ({why})" if why else ""

    def parse(text: str) -> tuple[int, ...]:
        values: list[int] = []
        for item in text.split(","):
            try:
                value = int(item.strip())
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"'{item.strip()}' in '{text}' is not a number: give {what} like 1,10,50"
                ) from None
            if value < 1 or (most and value > most):
                raise argparse.ArgumentTypeError(f"'{text}': {what} are {accepted}{because}")
            if value in values:
                raise argparse.ArgumentTypeError(f"'{text}': each of the {what} once")
            values.append(value)
        return tuple(values)

    return parse


def matching_triggers(text: str) -> int:
    """--matching: of a broker's triggers, how many take the run's events, 1 to SUBSCRIBERS_MAX
    (and no more than --triggers, which the lab checks with both known): none would deliver
    nothing, which a run cannot tell from a wiring mistake."""
    value = _integer(text)
    if not 1 <= value <= SUBSCRIBERS_MAX:
        raise argparse.ArgumentTypeError(
            f"{value} is out of range: 1 to the --triggers (at most {SUBSCRIBERS_MAX}); with "
            "none taking the run's events nothing is delivered to measure"
        )
    return value


def repeats(text: str) -> int:
    """How many times a run sends its whole pace: 1..REPEATS_MAX."""
    value = at_least_one(text)
    if value > REPEATS_MAX:
        raise argparse.ArgumentTypeError(
            f"{value} repeats is more than one run directory should hold: at most {REPEATS_MAX} "
            "(run more under other run ids and compare them)"
        )
    return value


def payload_bytes(text: str) -> int:
    """An event payload size: room for the event id, and within the receiver's body limit."""
    value = _integer(text)
    if not PAYLOAD_MIN_BYTES <= value <= PAYLOAD_MAX_BYTES:
        raise argparse.ArgumentTypeError(
            f"{value} is out of range: use at least {PAYLOAD_MIN_BYTES} bytes (the payload "
            f"carries the event id in JSON) and at most {PAYLOAD_MAX_BYTES} (the receiver's "
            "body limit)"
        )
    return value


def workers_on_this_host(text: str) -> int:
    """Sender processes on this host: at least 1, at most WORKERS_PER_CORE per core."""
    value = at_least_one(text)
    cores = os.cpu_count() or 1
    most = WORKERS_PER_CORE * cores
    if value > most:
        raise argparse.ArgumentTypeError(
            f"{value} sender processes is more than this host runs usefully: at most {most} "
            f"({WORKERS_PER_CORE} per core, {cores} cores); across hosts use `evbench send "
            "--master`"
        )
    return value


def epoch_ns(text: str) -> int:
    """An instant in nanoseconds since the epoch (a schedule start)."""
    value = _integer(text)
    if value < EPOCH_NS_MIN:
        raise argparse.ArgumentTypeError(
            f"{value} is no instant in nanoseconds since the epoch (it is before 2001): give "
            "e.g. $(date +%s%N) plus a lead"
        )
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


def clock_shift_ms(text: str) -> float:
    """A clock shift in milliseconds either side of 0, within a day."""
    value = signed_milliseconds(text)
    if abs(value) > CLOCK_SHIFT_MAX_MS:
        raise argparse.ArgumentTypeError(
            f"{text} ms is more than a day ({CLOCK_SHIFT_MAX_MS:.0f} ms) either way: every "
            "delivery would be stamped outside its run"
        )
    return value


def directory_path(text: str) -> Path:
    """A directory to use (it may not exist yet): an empty one would silently be the working
    directory."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path: name a directory (e.g. runs)")
    if "\x00" in text:
        raise argparse.ArgumentTypeError(f"{text!r} holds a NUL byte")
    return Path(text)


# Spark's master URLs (what SparkContext takes): local, local[N], local[*], local[N,F],
# local-cluster[N,C,M], spark://, yarn, k8s://, mesos://. A Spark Connect endpoint (sc://) is
# no master: it is --spark-remote's.
_SPARK_MASTER = re.compile(
    r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?|local-cluster\[[0-9]+,[0-9]+,[0-9]+\]"
    r"|yarn|(spark|k8s|mesos)://[^\s/]\S*"
)


def spark_master(text: str) -> str:
    """A Spark master URL Spark accepts, checked before Spark starts (a JVM's 51-line
    traceback otherwise)."""
    if text.startswith("sc://"):
        raise argparse.ArgumentTypeError(f"'{text}' is Spark Connect: use --spark-remote {text}")
    if not _SPARK_MASTER.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a Spark master: use local, local[N], local[*], spark://HOST:PORT, "
            "yarn, k8s://URL or mesos://URL (Spark Connect: --spark-remote sc://HOST:PORT)"
        )
    return text


def spark_remote(text: str) -> str:
    """A Spark Connect endpoint, sc://HOST[:PORT][/;params]."""
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme != "sc" or not parsed.netloc or _UNSAFE_IN_URL.search(text):
        raise argparse.ArgumentTypeError(f"'{text}' is not a Spark Connect URL: use sc://HOST:PORT")
    return text


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


def share(text: str) -> float:
    """A share from 0 to 100 %: `5%` (or `5`) -> 0.05."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: not a share like 5%") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text}: a share is from 0% to 100%")
    return value / 100
