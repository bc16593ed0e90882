"""The system's processes watched while they should run: when each was first seen gone.

A process of the system (a dispatcher, an ingress, the lab's Kafka broker) that dies mid-run
is a crash, not a capacity limit: the analysis judges the steps from its death on by it
(analysis.verdicts.after_deaths). For that it needs *when*, so the session polls the system's
processes on a thread of their own a few times a second, whatever its policy is doing (a run
follows its sender's lines, a search waits for stragglers, memory drains a backlog).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from contract.documents import SutDeathDoc

WATCH_INTERVAL_S = 0.25


class DeathWatch:
    """Polls `dead()` (the roles gone) until stopped; `deaths` in the order they were seen."""

    def __init__(
        self,
        dead: Callable[[], list[str]],
        exit_code: Callable[[str], int | None],
        interval_s: float = WATCH_INTERVAL_S,
    ) -> None:
        self._dead, self._exit_code = dead, exit_code
        self.interval_s = interval_s
        self.deaths: list[SutDeathDoc] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="death-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def check(self) -> list[SutDeathDoc]:
        """One look now; the deaths it found (each role once)."""
        gone = self._dead()
        now_ns = time.time_ns()
        with self._lock:
            known = {d["role"] for d in self.deaths}
            found: list[SutDeathDoc] = [
                {"role": role, "noticed_ns": now_ns, "exit_code": self._exit_code(role)}
                for role in gone
                if role not in known
            ]
            self.deaths.extend(found)
        return found

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.check()

    def stop(self) -> list[SutDeathDoc]:
        """Stop watching (a last look first); every death seen."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=5)
        self.check()
        with self._lock:
            return list(self.deaths)
