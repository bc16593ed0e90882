"""A precise wake-up for the pacer inside an asyncio event loop.

asyncio's timers (and libuv's, under uvloop) have millisecond resolution, so a pacer that sleeps
with `call_at` wakes up to a millisecond late: too coarse for a lag target of 1 ms at 10,000
slots/s. A Linux timerfd armed at an absolute CLOCK_MONOTONIC instant fires within the kernel's
timer slack (tightened here to 1 µs for this thread), and as an ordinary readable file descriptor
it wakes the event loop like any socket, so answers keep being read while the pacer waits and
nothing spins. Where timerfd is missing, the loop's own timer is used and the coarser wake-ups
show up in the reported wake jitter.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import time
from collections.abc import Awaitable, Callable

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = os.O_CLOEXEC
_TFD_TIMER_ABSTIME = 1
_PR_SET_TIMERSLACK = 29
_NS_PER_S = 1_000_000_000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.timerfd_create  # noqa: B018 - probe: missing on non-Linux systems
    except (OSError, AttributeError):
        return None
    return libc


class Ticker:
    """Calls `callback` once at (or just after) each instant passed to `arm` (monotonic ns)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._callback = callback
        self._handle: asyncio.TimerHandle | None = None
        self._fd = -1
        libc = _libc()
        if libc is not None:
            fd = libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                self._settime = libc.timerfd_settime
                self._spec = _Itimerspec()
                self._spec_ref = ctypes.byref(self._spec)
                # Timer slack defaults to 50 µs per wake-up; the pacer wants its slots on time.
                libc.prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)
                loop.add_reader(fd, self._on_readable)

    @property
    def precise(self) -> bool:
        return self._fd >= 0

    def arm(self, when_mono_ns: int) -> None:
        if self._fd >= 0:
            # An instant already past fires at once (it_value 0 would disarm, so never 0).
            when_mono_ns = max(when_mono_ns, 1)
            value = self._spec.it_value
            value.tv_sec, value.tv_nsec = divmod(when_mono_ns, _NS_PER_S)
            if self._settime(self._fd, _TFD_TIMER_ABSTIME, self._spec_ref, None) != 0:
                raise OSError(ctypes.get_errno(), "timerfd_settime failed")
            return
        if self._handle is not None:
            self._handle.cancel()
        delay_s = max(0.0, (when_mono_ns - time.monotonic_ns()) / _NS_PER_S)
        self._handle = self._loop.call_later(delay_s, self._callback)

    def _on_readable(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            return  # re-armed after it fired but before the loop read it: not due yet
        self._callback()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1


async def every(interval_s: float, action: Callable[[], Awaitable[None]]) -> None:
    """`action` at fixed-rate ticks, forever: a slow one does not stretch the interval."""
    loop = asyncio.get_running_loop()
    next_tick = loop.time()
    while True:
        next_tick += interval_s
        await asyncio.sleep(max(0.0, next_tick - loop.time()))
        await action()
