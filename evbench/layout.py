"""Where a run's files live.

runs/<run-id>-<pace>/<sut>/{run.json, sent/, received/, samples/, logs/}
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from evbench.errors import EvbenchError


@dataclass(frozen=True)
class SutDir:
    root: Path

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def sent(self) -> Path:
        return self.root / "sent"

    @property
    def received(self) -> Path:
        return self.root / "received"

    @property
    def samples(self) -> Path:
        return self.root / "samples"

    @property
    def logs(self) -> Path:
        return self.root / "logs"


def default_runs_dir() -> Path:
    return Path(os.environ.get("EVBENCH_RUNS_DIR", "runs"))


def next_run_id(runs_dir: Path, pace_name: str) -> str:
    """run-1, run-2, …: the first id whose run directory for this pace does not exist yet."""
    taken = set()
    if runs_dir.is_dir():
        pattern = re.compile(rf"^run-(\d+)-{re.escape(pace_name)}$")
        taken = {int(m.group(1)) for p in runs_dir.iterdir() if (m := pattern.match(p.name))}
    return f"run-{max(taken, default=0) + 1}"


def new_sut_dir(runs_dir: Path, run_id: str, pace_name: str, sut: str) -> SutDir:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", run_id):
        raise EvbenchError(f"run id '{run_id}' must be letters, digits, '.', '_' or '-'")
    root = runs_dir / f"{run_id}-{pace_name}" / sut
    if root.exists():
        raise EvbenchError(
            f"{root} already exists: choose another --run-id (results are never overwritten)"
        )
    root.mkdir(parents=True)
    return SutDir(root)
