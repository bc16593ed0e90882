"""The fast tier's guard (tests/tiers.py): every way the standard library starts a process is
refused inside it, on the test's thread or another, and all of them work again after it. Were
the guard to let one through, the process started is a harmless `true` (a fork's child exits at
once), and the test fails for the missing refusal."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from tests.tiers import _SPAWNERS, no_child_processes

TRUE = "/bin/true"


def _fork() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _posix_spawn() -> None:
    os.waitpid(os.posix_spawn(TRUE, [TRUE], dict(os.environ)), 0)


def _asyncio() -> None:
    async def spawn() -> None:
        await (await asyncio.create_subprocess_exec(TRUE)).wait()

    asyncio.run(spawn())


def _multiprocessing(method: str) -> Callable[[], None]:
    def spawn() -> None:
        child = multiprocessing.get_context(method).Process(target=sys.exit)
        child.start()
        child.join()

    return spawn


SPAWNS: dict[str, Callable[[], object]] = {
    "subprocess.run": lambda: subprocess.run([TRUE], check=True),
    "os.system": lambda: os.system(TRUE),
    "os.fork": _fork,
    "os.posix_spawn": _posix_spawn,
    "asyncio": _asyncio,
    "multiprocessing fork": _multiprocessing("fork"),
    "multiprocessing spawn": _multiprocessing("spawn"),
}


@pytest.mark.parametrize("how", SPAWNS)
def test_a_child_process_is_refused_on_the_tests_thread(how: str) -> None:
    failures: list[str] = []
    with no_child_processes("t::x", failures), pytest.raises(pytest.fail.Exception):
        SPAWNS[how]()
    assert failures and "t::x starts a child process" in failures[0]
    assert "pytest.mark.e2e" in failures[0]


def test_a_child_process_is_refused_on_another_thread_and_kept_for_the_report() -> None:
    failures: list[str] = []
    caught: list[BaseException] = []

    def spawn() -> None:
        try:
            subprocess.run([TRUE], check=True)
        except BaseException as exc:  # pytest.fail's exception is a BaseException
            caught.append(exc)

    with no_child_processes("t::y", failures):
        thread = threading.Thread(target=spawn)
        thread.start()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert [type(exc) for exc in caught] == [pytest.fail.Exception]
    assert len(failures) == 1 and failures[0].startswith("t::y starts a child process")


def test_every_spawner_is_restored_after_the_guard() -> None:
    before = [getattr(owner, name) for owner, name in _SPAWNERS]
    with pytest.raises(ZeroDivisionError), no_child_processes("t::z", []):
        assert [getattr(owner, name) for owner, name in _SPAWNERS] != before
        raise ZeroDivisionError  # restored on the way out of a failing test too
    assert [getattr(owner, name) for owner, name in _SPAWNERS] == before
