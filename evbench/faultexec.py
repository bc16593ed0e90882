"""The user's own command of a fault (`--fault-exec`): run in a session and process group of its
own, waited for as a process (not for the end of its output), its output read in chunks into a
bounded tail, and what it left behind found at the end of the run.

A shell command that starts a child in the background (`daemon &`) ends at once, but the child
keeps the command's stdout open: waiting for the end of the output waited for the child (207 s
for a 10 s run, then said "killed" though nothing was). So the command is waited for itself,
and its output drained by a thread of its own, keeping only the end of it (600 MB of output
held whole took 1.9 GiB). What it left running in its process group is killed when the run
ends, and said; a process it started in a session of its own (`setsid daemon`) is out of the
group's reach, but found by its holding the command's output open, and said.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
from pathlib import Path

OUTPUT_CHARS = 2000  # the end of what a command printed, kept in run.json
_CHUNK_BYTES = 64 * 1024
_KEPT_BYTES = OUTPUT_CHARS * 4  # a UTF-8 character is at most 4 bytes
_PROC = Path("/proc")


class Command:
    """One `--fault-exec` command, started now."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.process = subprocess.Popen(
            text,
            shell=True,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.pgid = self.process.pid  # the leader of its own group and session
        assert self.process.stdout is not None
        self._pipe = self.process.stdout.fileno()
        self._pipe_inode = os.fstat(self._pipe).st_ino
        self._tail = b""
        self._tail_lock = threading.Lock()
        self._closing = threading.Event()
        self._eof = threading.Event()
        self._reader = threading.Thread(target=self._drain, name=f"exec-{self.pid}", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        """Read the output as it comes, keeping its last _KEPT_BYTES, until its end or close."""
        while not self._closing.is_set():
            ready, _, _ = select.select([self._pipe], [], [], 0.2)
            if not ready:
                continue
            chunk = os.read(self._pipe, _CHUNK_BYTES)
            if not chunk:
                self._eof.set()
                return
            with self._tail_lock:
                self._tail = (self._tail + chunk[-_KEPT_BYTES:])[-_KEPT_BYTES:]

    def wait(self, timeout_s: float) -> int | None:
        """The command's exit code, or None while it still runs after `timeout_s`."""
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def output(self, settle_s: float = 0.5) -> str:
        """The end of what it printed (stdout and stderr), at most OUTPUT_CHARS characters;
        what was still in the pipe when it ended read first (`settle_s` at most, since a child
        of its own may hold the pipe open)."""
        self._eof.wait(settle_s)
        with self._tail_lock:
            tail = self._tail
        return tail.decode(errors="replace")[-OUTPUT_CHARS:]

    def kill_group(self) -> list[tuple[int, str]]:
        """SIGKILL to every live process of its group (the command itself, if it still runs,
        and what it started that stayed in the group); their pids and names."""
        members = [(pid, process_name(pid)) for pid in group_members(self.pgid)]
        if members:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                return []  # all gone in between
        return members

    def escaped(self, settle_s: float = 1.0) -> list[tuple[int, str]]:
        """Processes outside its group that still hold its output open (started with setsid,
        say): no group kill reaches them. Asked after kill_group, whose processes close the
        pipe as they die."""
        if self._eof.wait(settle_s):
            return []
        return [(pid, process_name(pid)) for pid in pipe_writers(self._pipe_inode, os.getpid())]

    def close(self) -> None:
        """Stop reading (a process that escaped may hold the pipe for ever) and reap it."""
        self._closing.set()
        self._reader.join(timeout=1.0)
        if self._reader.is_alive():
            return  # never closed under a read in progress
        assert self.process.stdout is not None
        self.process.stdout.close()


def _stat_fields(pid: str) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold spaces and parentheses):
    [state, ppid, pgrp, ...]; None for a process gone."""
    try:
        text = (_PROC / pid / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (zombies left out: nothing to kill)."""
    found = []
    for entry in os.listdir(_PROC):
        fields = _stat_fields(entry) if entry.isdigit() else None
        if fields and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry))
    return sorted(found)


def pipe_writers(inode: int, exclude: int) -> list[int]:
    """The processes (but `exclude`) holding the pipe `inode` open, from /proc/PID/fd."""
    link = f"pipe:[{inode}]"
    found = []
    for entry in os.listdir(_PROC):
        if not entry.isdigit() or int(entry) == exclude:
            continue
        if link in _open_files(_PROC / entry / "fd"):
            found.append(int(entry))
    return sorted(found)


def _open_files(fd_dir: Path) -> set[str]:
    """What a process's descriptors point at; empty for a process gone or not ours to see."""
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return set()
    found = set()
    for fd in fds:
        try:
            found.add(os.readlink(fd_dir / fd))
        except OSError:  # closed in between
            continue
    return found


def process_name(pid: int) -> str:
    try:
        return (_PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return "?"
