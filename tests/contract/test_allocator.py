"""The instruments' entry modules choose Arrow's allocator before pyarrow loads (it reads the
choice once, at load): run as programs, they leave Arrow on the system allocator, and a pool the
user named is kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runtime.allocator import ARROW_POOL_ENV

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
