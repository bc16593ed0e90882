"""Ctrl-C and SIGTERM for every command that drives a system: one strategy, one place.

While a sender runs, an interrupt is the sender's to take: it is forwarded as SIGINT, the sender
stops scheduling and flushes, and its done line says it was interrupted (a second one stops
waiting for in-flight answers). Otherwise (starting up, between a search's probes, a memory
scenario) there is nothing to stop gracefully: KeyboardInterrupt unwinds to the policy, and the
session's teardown stops everything started, keeping every record written so far.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from runtime.procs import Child


class Interrupts:
    """SIGINT/SIGTERM during a run: forwarded to the sender, which stops scheduling and flushes.

    Before the sender starts there is nothing to stop gracefully, so the handler raises
    KeyboardInterrupt to unwind the start-up. Raised where Python cannot propagate it (a fork
    hook while a child starts, a finalizer) it is only printed as "Exception ignored" and the
    start-up goes on: so the count is kept, `checkpoint` raises it again between the start-up's
    phases and when the sender has just started (which is still importing: a SIGINT would kill
    it, and the run would read as the sender's failure), and such a swallowed interrupt is not
    printed as a traceback."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.count = 0
        self.forwarded = 0  # interrupts the sender has been sent
        self.sender: Child | None = None
        self.cleaning_up = False
        self._previous: dict[int, object] = {}
        self._unraisable = sys.unraisablehook

    def __enter__(self) -> Interrupts:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = self._ignored
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        sys.unraisablehook = self._unraisable

    def _ignored(self, unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and self.count:
            return  # ours, swallowed where it was raised: `checkpoint` and `attach` act on it
        self._unraisable(unraisable)

    def checkpoint(self) -> None:
        """Between the start-up's phases: an interrupt swallowed where it was raised unwinds
        the start-up now."""
        if self.count and self.sender is None and not self.cleaning_up:
            raise KeyboardInterrupt

    def attach(self, sender: Child) -> None:
        """The sender started: interrupts from now on stop it. One that came while it was
        starting (swallowed where it was raised) unwinds the start-up, which stops it."""
        self.checkpoint()
        self.sender = sender

    def cleaning(self) -> None:
        """The teardown has begun: an interrupt from now on is nobody's to take (the
        teardown ignores them, and no start-up is left to unwind)."""
        self.cleaning_up = True

    def detach(self) -> None:
        """The sender has ended (a search's probe): interrupts from now on unwind again."""
        self.sender = None

    def _handle(self, signum: int, frame: object) -> None:
        self.count += 1
        if self.sender is None:
            if not self.cleaning_up:
                raise KeyboardInterrupt  # nothing to stop gracefully yet: unwind and clean up
            return
        self._forward()

    def _forward(self) -> None:
        assert self.sender is not None
        if self.forwarded == 0:
            self.echo("interrupted: stopping the sender; every record written so far is kept")
        else:
            self.echo("interrupted again: not waiting for in-flight answers")
        self.forwarded += 1
        self.sender.signal(signal.SIGINT)


_STOPPING = (signal.SIGINT, signal.SIGTERM)


def ignore_signals_later(stack: ExitStack) -> Callable[[], None]:
    """A callable that ignores Ctrl-C and SIGTERM for the rest of the teardown, and on
    `stack`'s way out the handlers from before restored (main thread only: signals are the
    main thread's)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    for sig in _STOPPING:
        stack.callback(signal.signal, sig, signal.getsignal(sig))

    def ignore() -> None:
        for sig in _STOPPING:
            signal.signal(sig, signal.SIG_IGN)

    return ignore
