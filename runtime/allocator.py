"""Arrow's allocator in the processes that write records for hours: the C library's malloc.

Arrow's bundled mimalloc keeps what a roll or a burst freed in the writing thread's segments, so
each new high of the writer thread's work (the first roll of the records, the batch after a
stall) stepped the instruments' RSS up and kept it: 20,000/s on `direct` for 240 s, the sender
+6 MiB and the receiver +14 MiB at the first roll, slopes after the first minute of +4.5 and
+161 MiB/h. With the system allocator neither stepped: a 10-minute soak at 20,000/s held the
sender within 174-178 MiB and the receiver within 182-187 MiB after its first minute (slopes
+3.8 and +1.9 MiB/h; `benchmarks/soak.py`, docs/analysis.md). Their Arrow work is one second's
batch at a time, where the allocators' speeds do not show.

Arrow reads `ARROW_DEFAULT_MEMORY_POOL` once, when pyarrow loads (and `pa.set_memory_pool` does
not reach the Parquet writer), so the instruments' entry modules (`python -m loadgen`,
`python -m receivers`) call `prefer_system_allocator` before anything imports pyarrow. A value
the user set is kept. Standard library only: this module must not import pyarrow itself.

The C library's malloc has the same habit on a smaller scale: what a burst freed (a stall's
waiting connections, the 8 KB request buffers on them, a late batch of records) leaves free
chunks between live ones, which glibc keeps as the process's own until asked. `HeapTrimmer` asks
(`malloc_trim`) at most once a minute, from the records' writer thread, so that what a burst
freed does not stay the instruments' for good: in a 10-minute soak at 20,000/s a trim took
0.4-1.8 ms and the sender's RSS fell by up to 5 MiB at one.

Python's own allocator (pymalloc) was the last to grow: over an hour at 2,000/s on channel-imc
the C heap, glibc's thread arenas and the stacks stayed flat, but the anonymous maps where
pymalloc keeps its 1 MiB arenas grew +1.2 MiB in the sender and +2.4 MiB in the receiver, in
steps of 0.3-1 MiB tens of minutes apart (`benchmarks/soak.py`, its smaps by kind). An arena
goes back only once every object in it is dead, so each new high of live small objects (a burst
of requests in flight) leaves one kept. On malloc those objects share the C heap, whose free
pages the trim above hands back 4 KiB at a time. The hour again on malloc: slopes +1.1 and
+1.8 MiB/h (+1.2 and +2.1 before), the anonymous maps +0.92 MiB each (+1.21 and +2.37). That
+0.92 MiB, alike in both, was not an allocator's: it was the interpreter's table of interned
strings doubling once, filled with the dead names of record files (runtime/parquet.py's doc).
Priced with `benchmarks/sender_rate.py` (CPU per 1,000 events unchanged, 0.039-0.042 s at
20,000/s) and `benchmarks/receiver_rate.py` (77,500-82,300 against 86,700-89,600 events/s:
~9 %, still far beyond the systems measured).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping

ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
SYSTEM_POOL = "system"
PYTHON_MALLOC_ENV = "PYTHONMALLOC"
PYTHON_MALLOC = "malloc"


def prefer_system_allocator() -> None:
    """Arrow's default pool and Python's own small objects both on the C library's malloc, for
    this process and its children, unless the environment names a choice already. Python reads
    PYTHONMALLOC only as it starts, so a process that has to set it starts itself again (same
    pid, same argv) before doing anything else. Too late once pyarrow is loaded: that is a
    mistake in the caller's imports, said at once rather than measured an hour later."""
    if "pyarrow" in sys.modules:
        raise RuntimeError("prefer_system_allocator() after pyarrow was imported: call it first")
    os.environ.setdefault(ARROW_POOL_ENV, SYSTEM_POOL)
    argv = restart_argv(os.environ, sys.executable, sys.orig_argv)
    if argv is not None:
        os.environ[PYTHON_MALLOC_ENV] = PYTHON_MALLOC
        os.execv(argv[0], argv)


def restart_argv(
    environ: Mapping[str, str], executable: str, orig_argv: list[str]
) -> list[str] | None:
    """The command that starts this process again with Python's allocator chosen, or None when
    the environment already chose one (ours, or the user's: `PYTHONMALLOC=pymalloc` to compare)
    or there is no interpreter to start (embedded)."""
    if PYTHON_MALLOC_ENV in environ or not executable or not orig_argv:
        return None
    return [executable, *orig_argv[1:]]


# Once a minute: a trim walks the whole heap (0.4-1.8 ms each in the sender at 20,000/s; 2-9 ms
# for a fragmented 100 MiB in a probe), and a step that lasts a minute is not one a soak's slope
# can read.
TRIM_INTERVAL_S = 60.0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim` from the symbols already loaded, or None where the C library has
    none (musl, macOS). ctypes lets go of the GIL for the call, but glibc holds each arena's
    lock while it trims it: an event loop that mallocs meanwhile (a request buffer) waits out
    that arena's part, which is why trims are rare."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def release_free_heap() -> bool:
    """Ask the C library to hand the heap's free pages back to the system now; True if it
    could ask (glibc), False where there is nothing to ask."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def trim_due(now_s: float, last_s: float, interval_s: float = TRIM_INTERVAL_S) -> bool:
    """Whether a trim is due: `interval_s` since the last one (or since the process began)."""
    return now_s - last_s >= interval_s


class HeapTrimmer:
    """Trims the C heap at most once per interval, from whichever thread asks first. Process
    wide, since the heap is: every records writer in a process shares one."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        trim: Callable[[], bool] = release_free_heap,
    ) -> None:
        self._clock = clock
        self._trim = trim
        self._last_s = clock()
        self._lock = threading.Lock()

    def now_and_then(self) -> None:
        """Trim if one is due and no other thread is trimming. Call it off the event loop."""
        if not trim_due(self._clock(), self._last_s) or not self._lock.acquire(blocking=False):
            return
        try:
            now_s = self._clock()
            if not trim_due(now_s, self._last_s):  # another thread trimmed in between
                return
            self._last_s = now_s
            self._trim()
        finally:
            self._lock.release()


HEAP = HeapTrimmer()
