"""The instruments' entry modules choose Arrow's allocator before pyarrow loads (it reads the
choice once, at load): run as programs, they leave Arrow on the system allocator, and a pool the
user named is kept."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import psutil
import pytest

from runtime.allocator import ARROW_POOL_ENV, HeapTrimmer, release_free_heap, trim_due

# Runs MODULE as `python -m MODULE --help` would (its imports, then argparse's exit), then says
# which pool Arrow ended up with.
_PROBE = """
import runpy, sys
sys.argv = [sys.argv[1], "--help"]
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
except SystemExit:
    pass
import pyarrow
print(pyarrow.default_memory_pool().backend_name)
"""


def _pool_after(module: str, pool_env: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != ARROW_POOL_ENV}
    if pool_env is not None:
        env[ARROW_POOL_ENV] = pool_env
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, module],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.e2e
@pytest.mark.parametrize("module", ["loadgen", "receivers"])
def test_an_instrument_runs_arrow_on_the_system_allocator(module):
    assert _pool_after(module, None) == "system"


@pytest.mark.e2e
def test_a_pool_the_user_named_is_kept():
    assert _pool_after("receivers", "mimalloc") == "mimalloc"


@pytest.mark.parametrize(
    ("now_s", "last_s", "due"),
    [
        (0.0, 0.0, False),  # the process just began
        (59.9, 0.0, False),
        (60.0, 0.0, True),
        (1000.0, 900.0, True),
        (930.0, 900.0, False),
    ],
)
def test_a_trim_is_due_once_a_minute(now_s, last_s, due):
    assert trim_due(now_s, last_s) is due


class _Clock:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


class _Trims:
    def __init__(self) -> None:
        self.at_s: list[float] = []
        self.clock = _Clock()

    def __call__(self) -> bool:
        self.at_s.append(self.clock.now_s)
        return True


def test_the_trimmer_trims_once_per_interval_however_often_it_is_asked():
    trims = _Trims()
    trimmer = HeapTrimmer(trims.clock, trims)
    for second in range(0, 185):
        trims.clock.now_s = float(second)
        trimmer.now_and_then()
        trimmer.now_and_then()
    assert trims.at_s == [60.0, 120.0, 180.0]


def test_a_thread_asking_while_another_trims_does_not_trim_too():
    trims = _Trims()
    trimmer = HeapTrimmer(trims.clock, trims)
    trims.clock.now_s = 61.0
    with trimmer._lock:  # another thread is trimming
        trimmer.now_and_then()
    assert trims.at_s == []
    trimmer.now_and_then()
    assert trims.at_s == [61.0]


def test_freed_heap_pages_go_back_to_the_system():
    # 8 KB blocks, written to, with every other one freed: free chunks between live ones, which
    # glibc keeps as the process's own until asked (the open-loop sender's request buffers
    # after a stall, in small). Each freed block holds at least one whole page.
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    blocks = [b"x" * 8200 for _ in range(8000)]  # ~64 MiB
    release_free_heap()  # whatever was free before
    del blocks[::2]
    me = psutil.Process()
    freed = me.memory_info().rss
    assert release_free_heap() is True
    given_back = freed - me.memory_info().rss
    assert given_back >= 8 * 2**20, f"only {given_back / 2**20:.1f} MiB of ~32 MiB came back"
    assert len(blocks) == 4000  # the live half stays live to here
