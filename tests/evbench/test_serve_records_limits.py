"""`evbench serve-records` held by hostile clients, as a real subprocess on loopback: many
half-sent requests neither pin a thread each nor stay open past the head's deadline, a head
trickled a byte at a time is cut at that deadline, and a real GET /records is answered all the
while (at worst told 503 until a slot frees). And a directory that is not there is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from runtime.procs import Child
from tests.conftest import wait_until
from tests.slowclients import close_all, open_count, open_many, patient_get, trickle

pytestmark = pytest.mark.e2e

DEFAULT_HEADER_TIMEOUT_S = 10.0  # what a user gets without the flag: the one under test
DEFAULT_MAX_CONNECTIONS = 64


@contextmanager
def _serving(directory: Path, log: Path, *flags: str) -> Iterator[tuple[Child, int]]:
    command = [sys.executable, "-m", "evbench", "serve-records", str(directory), "--port", "0"]
    child = Child("serve", [*command, *flags], log)
    try:
        yield child, int(child.wait_for("listening", 30)["port"])
    finally:
        child.stop()


def _records(tmp_path: Path) -> Path:
    served = tmp_path / "served"
    served.mkdir()
    (served / "_sender-w0.json").write_text("{}")
    return served


def test_half_sent_requests_are_closed_and_hold_a_bounded_number_of_threads(tmp_path):
    # Before: a thread per connection, held forever (2,000 held 723 threads, never closed).
    with _serving(_records(tmp_path), tmp_path / "serve.log") as (child, port):
        held = open_many(port, 300)
        try:
            # Accepted in order: once a later GET is answered, all 300 have been accepted.
            status, body = patient_get(f"http://127.0.0.1:{port}/records", 60)
            assert status == 200 and json.loads(body)["files"][0]["path"] == "_sender-w0.json"
            threads = psutil.Process(child.pid).num_threads()
            assert threads <= DEFAULT_MAX_CONNECTIONS + 8, f"{threads} threads for 300 clients"
            # Every one closed once the head's deadline has passed (3x it for a slow CI).
            wait_until(
                lambda: open_count(held) == 0,
                3 * DEFAULT_HEADER_TIMEOUT_S,
                "the half-sent connections to be closed",
            )
            assert child.alive()
        finally:
            close_all(held)


def test_a_get_is_answered_while_fewer_than_the_bound_are_held(tmp_path):
    # The bound costs the slow ones only: a collector is not kept waiting behind them.
    with _serving(_records(tmp_path), tmp_path / "serve.log") as (_, port):
        held = open_many(port, DEFAULT_MAX_CONNECTIONS - 4)
        try:
            status, _ = patient_get(f"http://127.0.0.1:{port}/records", 60)
            assert status == 200
            assert open_count(held) == len(held), "answered only once the slow ones were dropped"
        finally:
            close_all(held)


def test_a_head_trickled_a_byte_at_a_time_is_cut_at_its_deadline(tmp_path):
    # Before: every byte renewed the wait, so a byte every half second held it for good.
    with _serving(_records(tmp_path), tmp_path / "serve.log") as (_, port):
        held_s = trickle(port, every_s=0.5, for_s=4 * DEFAULT_HEADER_TIMEOUT_S)
        assert held_s is not None, "a trickling client held serve-records past 4x its deadline"
        status, _ = patient_get(f"http://127.0.0.1:{port}/records", 30)
        assert status == 200


def test_flags_set_the_limits(tmp_path):
    flags = ("--header-timeout", "1", "--max-connections", "4")
    with _serving(_records(tmp_path), tmp_path / "serve.log", *flags) as (child, port):
        held = open_many(port, 40, send=b"")  # silent
        try:
            status, _ = patient_get(f"http://127.0.0.1:{port}/records", 30)
            assert status == 200
            assert psutil.Process(child.pid).num_threads() <= 4 + 8
            wait_until(lambda: open_count(held) == 0, 15, "the silent connections to be closed")
        finally:
            close_all(held)
        assert trickle(port, every_s=0.1, for_s=15) is not None


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_a_directory_that_is_not_one_is_refused_in_one_line(tmp_path, kind):
    # Before: an empty listing served, and exit 0 at the end of --for.
    directory = tmp_path / "nowhere"
    if kind == "a file":
        directory.write_text("not a directory")
    command = [sys.executable, "-m", "evbench", "serve-records", str(directory), "--port", "0"]
    done = subprocess.run(
        [*command, "--for", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(directory) in lines[0], done.stderr
