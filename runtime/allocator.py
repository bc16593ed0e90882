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
"""

from __future__ import annotations

import os
import sys

ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
SYSTEM_POOL = "system"


def prefer_system_allocator() -> None:
    """Arrow's default pool set to the system allocator for this process (and its children),
    unless the environment names one already. Too late once pyarrow is loaded: that is a
    mistake in the caller's imports, said at once rather than measured an hour later."""
    if "pyarrow" in sys.modules:
        raise RuntimeError("prefer_system_allocator() after pyarrow was imported: call it first")
    os.environ.setdefault(ARROW_POOL_ENV, SYSTEM_POOL)
