"""The suite's two tiers: `make test` runs every test; `make check` (pytest --fast) only the fast
tier, the tests that need no Spark, no browser and no child process, in seconds.

A test leaves the fast tier by one of three markers, and mark_tiers sets them from what the test
uses, so a new test lands in the right tier without anyone remembering to mark it:

- e2e: its module is under tests/e2e/ (whole runs: `evbench` and the instruments as processes),
  or it asks, however indirectly, for a fixture in PROCESS_FIXTURES, or its module or the test
  says `pytest.mark.e2e` (a module's own fixture that starts processes, brokers, namespaces);
- spark: it asks, however indirectly, for the `spark` fixture (a JVM);
- browser: it says `pytest.mark.browser` (tests/browser.py runs Chromium).

Under --fast the rule is also enforced, not trusted: a fast-tier test whose setup, call or
teardown starts a child process (subprocess, fork, posix_spawn, multiprocessing, os.system)
fails at that call, naming the marker it lacks. An in-process server on loopback (a thread, or
the test's own event loop) is fine in the fast tier.
"""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest

SLOW_MARKERS = ("e2e", "spark", "browser")
# Fixtures of tests/conftest.py that start processes; a module's own such fixture is covered by
# the module's `pytestmark = pytest.mark.e2e` (and --fast fails the module's tests without it).
PROCESS_FIXTURES = frozenset({"receiver"})
E2E_FOLDER = Path(__file__).parent / "e2e"


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier only (no e2e, spark or browser test), and fail a test of it that "
        "starts a child process (make check)",
    )


def mark_tiers(items: list[pytest.Item]) -> None:
    """Each test's slow markers, from its folder and the fixtures it asks for."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "spark" in fixtures:
            item.add_marker(pytest.mark.spark)
        if item.path.is_relative_to(E2E_FOLDER) or fixtures & PROCESS_FIXTURES:
            item.add_marker(pytest.mark.e2e)


def is_fast(item: pytest.Item) -> bool:
    return not any(item.get_closest_marker(name) for name in SLOW_MARKERS)


def keep_fast(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under --fast, deselect the slow tier (as `-m "not e2e and not spark and not browser"`)."""
    if not config.getoption("fast"):
        return
    slow = [item for item in items if not is_fast(item)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if is_fast(item)]


# Every way the standard library starts a process ends in one of these (asyncio's and
# multiprocessing's included); os.system and posix_spawn are C calls of their own.
_SPAWNERS: tuple[tuple[object, str], ...] = (
    (subprocess.Popen, "_execute_child"),
    (_posixsubprocess, "fork_exec"),
    (os, "fork"),
    (os, "forkpty"),
    (os, "posix_spawn"),
    (os, "posix_spawnp"),
    (os, "system"),
)


def guarded(item: pytest.Item) -> bool:
    """Whether no_child_processes applies to this test: under --fast, to every fast one."""
    return bool(item.config.getoption("fast")) and is_fast(item)


@contextmanager
def no_child_processes(nodeid: str, failures: list[str]) -> Iterator[None]:
    """Within: starting a child process fails at that call (on any thread), and the attempt is
    kept in `failures` (conftest fails the test with it: a thread may swallow the exception)."""
    saved = [(owner, name, getattr(owner, name)) for owner, name in _SPAWNERS]

    def refuse(name: str) -> Callable[..., NoReturn]:
        def refused(*args: object, **kwargs: object) -> NoReturn:
            said = (
                f"{nodeid} starts a child process ({name}): the fast tier (make check) runs "
                "none; mark the test or its module pytest.mark.e2e (pytest.mark.browser for "
                "Chromium; Spark comes from the `spark` fixture)"
            )
            failures.append(said)
            pytest.fail(said, pytrace=False)

        return refused

    for owner, name, _ in saved:
        setattr(owner, name, refuse(name))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
