"""Run directories on disk: the default place, the next free run id, a directory made exactly
once (results are never overwritten), and whether a place can be written into. Which file is
where inside a run is contract.layout's."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from contract.errors import EvbenchError
from contract.layout import SutDir, sut_dir_for


def default_runs_dir() -> Path:
    return Path(os.environ.get("EVBENCH_RUNS_DIR") or "runs")  # set but empty: the default


def next_run_id(runs_dir: Path, pace_name: str) -> str:
    """run-1, run-2, …: the first id whose run directory for this pace does not exist yet."""
    used = set()
    if runs_dir.is_dir():
        pattern = re.compile(rf"^run-(\d+)-{re.escape(pace_name)}$")
        used = {int(m.group(1)) for p in runs_dir.iterdir() if (m := pattern.match(p.name))}
    return f"run-{max(used, default=0) + 1}"


def taken(root: Path) -> EvbenchError:
    """The one error for a results directory that exists already."""
    return EvbenchError(
        f"{root} already exists: choose another --run-id (results are never overwritten)"
    )


def refuse_taken(roots: Iterable[Path]) -> None:
    """An EvbenchError naming the first directory that exists already."""
    for root in roots:
        if root.exists():
            raise taken(root)


def make_new(root: Path) -> Path:
    """`root` made now; one that exists (another run's, or one made a moment ago by a run
    racing for the same id) is refused, never written into."""
    refuse_taken([root])
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        root.mkdir()  # not exist_ok: of two runs making it at once, exactly one gets it
    except FileExistsError:
        raise taken(root) from None
    except OSError as exc:
        raise EvbenchError(
            f"cannot make the run directory {root}: {exc.strerror or exc} (check --runs-dir)"
        ) from None
    return root


def new_sut_dir(runs_dir: Path, run_id: str, pace_name: str, sut: str) -> SutDir:
    """A system's new results directory (`make_new`)."""
    return SutDir(make_new(sut_dir_for(runs_dir, run_id, pace_name, sut).root))


def analysed_summaries(run_dir: Path) -> list[Path]:
    """summary.json of every analysed SUT of a run, in name order."""
    if not run_dir.is_dir():
        return []
    found = (SutDir(p).summary_json for p in run_dir.iterdir())
    return sorted(path for path in found if path.is_file())


def unusable_directory(path: Path) -> str | None:
    """Why `path` cannot be used as a directory to write into (None: it can), without creating
    anything: it is a file, lies under a file, or is not writable (by this user, or on a
    read-only mount). Asked before anything starts, so that a run fails in one line, not after
    its instruments did."""
    path = Path(os.path.abspath(path))
    existing = path
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():
            return f"{existing} is a broken symbolic link"
        existing = existing.parent
    if existing != path:
        made = f"{path} cannot be made: {existing}"
        if not existing.is_dir():
            return f"{made} is not a directory"
        return None if os.access(existing, os.W_OK | os.X_OK) else f"{made} is not writable"
    if not path.is_dir():
        return f"{path} is not a directory"
    return None if os.access(path, os.W_OK | os.X_OK) else f"{path} is not writable"
