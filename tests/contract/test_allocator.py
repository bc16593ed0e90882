"""The instruments' entry modules choose Arrow's allocator before pyarrow loads (it reads the
choice once, at load) and Python's before anything else (read as the interpreter starts, so they
start themselves again): run as programs, they are on the system allocator for both, the same
process throughout, and a choice the user named is kept."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import psutil
import pytest

from runtime.allocator import (
    ARROW_POOL_ENV,
    PYTHON_MALLOC_ENV,
    HeapTrimmer,
    release_free_heap,
    restart_argv,
    trim_due,
)

# Runs MODULE as `python -m MODULE --help` would (its imports, then argparse's exit), then says
# its pid, which pool Arrow ended up with, and (on stderr) Python's allocator statistics: only
# pymalloc has size classes to list.
_PROBE = """
import os, runpy, sys
sys.argv = [sys.argv[1], "--help"]
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
except SystemExit:
    pass
import pyarrow
print(os.getpid(), pyarrow.default_memory_pool().backend_name)
sys._debugmallocstats()
"""
_PYMALLOC_SAYS = "Small block threshold"


def _allocators_of(module: str, **chosen: str) -> tuple[str, str]:
    """(Arrow's pool, Python's allocator) of MODULE run with the choices in `chosen` only."""
    env = {k: v for k, v in os.environ.items() if k not in (ARROW_POOL_ENV, PYTHON_MALLOC_ENV)}
    env.update(chosen)
    probe = subprocess.Popen(
        [sys.executable, "-c", _PROBE, module],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    out, err = probe.communicate(timeout=60)
    assert probe.returncode == 0, err
    pid, pool = out.strip().splitlines()[-1].split()
    assert int(pid) == probe.pid  # started again in place: the pid a caller stops is the same
    return pool, "pymalloc" if _PYMALLOC_SAYS in err else "malloc"


@pytest.mark.e2e
@pytest.mark.parametrize("module", ["loadgen", "receivers"])
def test_an_instrument_runs_arrow_and_python_on_the_system_allocator(module):
    assert _allocators_of(module) == ("system", "malloc")


@pytest.mark.e2e
def test_choices_the_user_named_are_kept():
    chosen = {ARROW_POOL_ENV: "mimalloc", PYTHON_MALLOC_ENV: "pymalloc"}
    assert _allocators_of("receivers", **chosen) == ("mimalloc", "pymalloc")


@pytest.mark.parametrize(
    ("environ", "executable", "orig_argv", "argv"),
    [
        (
            {},
            "/py",
            ["python3", "-m", "receivers", "--port", "0"],
            ["/py", "-m", "receivers", "--port", "0"],
        ),
        (
            {},
            "/py",
            ["python3", "-X", "dev", "-m", "loadgen"],
            ["/py", "-X", "dev", "-m", "loadgen"],
        ),
        ({PYTHON_MALLOC_ENV: "malloc"}, "/py", ["python3", "-m", "loadgen"], None),  # started again
        ({PYTHON_MALLOC_ENV: "pymalloc"}, "/py", ["python3", "-m", "loadgen"], None),  # the user's
        ({}, "", ["python3", "-m", "loadgen"], None),  # embedded: nothing to start
    ],
)
def test_the_restart_command(environ, executable, orig_argv, argv):
    assert restart_argv(environ, executable, orig_argv) == argv


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
