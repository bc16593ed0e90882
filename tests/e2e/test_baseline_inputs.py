"""`compare` and `run --baseline` on analysed runs a hostile user broke (evbench issue 51, part 9):
a summary.json cut short or edited, a run.json of the wrong shape, a baseline of another pace.
Each is one line naming the file and what is wrong, exit 2, before anything is compared (and,
for `run --baseline`, before the run is made), never a traceback after a whole run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.procs import die_with_parent

PACE = "50:2"  # its name: 50x2


def _evbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evbench", *args],
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=die_with_parent,
    )


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run, analysed: `runs/base-50x2`."""
    runs = tmp_path_factory.mktemp("runs")
    done = _evbench(
        "run", "--sut", "direct", "--pace", PACE, "--runs-dir", str(runs), "--run-id", "base"
    )
    assert done.returncode == 0, done.stderr
    return runs / "base-50x2"


def _edited(path: Path, edit: Callable[[dict], object]) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _summary(run: Path) -> Path:
    return run / "direct" / "analysis" / "summary.json"


def _cut_short(run: Path) -> None:
    _summary(run).write_text(_summary(run).read_text()[:200])


def _no_latency(run: Path) -> None:
    _edited(_summary(run), lambda doc: doc.pop("latency_ms"))


def _p99_a_word(run: Path) -> None:
    _edited(_summary(run), lambda doc: doc["latency_ms"]["e2e"].update(p99="fast"))


def _run_json_a_list(run: Path) -> None:
    (run / "direct" / "run.json").write_text("[1, 2]\n")


def _schedule_a_number(run: Path) -> None:
    _edited(run / "direct" / "run.json", lambda doc: doc.update(schedule=5))


def _another_pace(run: Path) -> None:
    _edited(_summary(run), lambda doc: doc.update(pace="60x2"))


# (id, how the copy is broken, what the one line says of it)
_BROKEN: list[tuple[str, Callable[[Path], None], str]] = [
    ("summary cut short", _cut_short, "summary.json is not JSON: "),
    ("summary without latency_ms", _no_latency, "summary.json: latency_ms: missing"),
    (
        "summary p99 a word",
        _p99_a_word,
        "summary.json: latency_ms.e2e.p99: expected a number or null, got a string",
    ),
    ("run.json a list", _run_json_a_list, "run.json holds a JSON list, not an object"),
    (
        "run.json schedule a number",
        _schedule_a_number,
        "run.json: schedule: expected an object, got a whole number",
    ),
]


def _the_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    said = [line for line in stderr.splitlines() if line.strip()]
    assert len(said) == 1, stderr
    return said[0]


def _copy(analysed: Path, where: Path, name: str) -> Path:
    copy = where / name
    shutil.copytree(analysed, copy)
    return copy


@pytest.mark.parametrize(
    ("break_it", "said"), [c[1:] for c in _BROKEN], ids=[c[0] for c in _BROKEN]
)
def test_compare_names_a_broken_file_in_one_line(analysed, tmp_path, break_it, said):
    broken = _copy(analysed, tmp_path, "broken-50x2")
    break_it(broken)
    for runs in ([analysed, broken], [broken, analysed]):  # as the baseline and after it
        done = _evbench("compare", *map(str, runs), "--out", str(tmp_path / "c.html"))
        assert done.returncode == 2, done.stderr
        line = _the_error_line(done.stderr)
        assert f"{broken}/direct/" in line and said in line, line
    assert not (tmp_path / "c.html").exists()


@pytest.mark.parametrize(
    ("break_it", "said"), [c[1:] for c in _BROKEN], ids=[c[0] for c in _BROKEN]
)
def test_run_refuses_a_broken_baseline_before_it_runs(analysed, tmp_path, break_it, said):
    broken = _copy(analysed, tmp_path, "broken-50x2")
    break_it(broken)
    runs = tmp_path / "runs"
    done = _evbench(
        "run", "--sut", "direct", "--pace", PACE, "--runs-dir", str(runs), "--baseline", str(broken)
    )
    assert done.returncode == 2, done.stderr
    assert said in _the_error_line(done.stderr)
    assert not runs.exists()  # refused before the run, which took its run id


def test_a_baseline_of_another_pace_is_refused_not_compared(analysed, tmp_path):
    runs = tmp_path / "runs"
    done = _evbench(
        "run",
        "--sut",
        "direct",
        "--pace",
        "60:2",
        "--runs-dir",
        str(runs),
        "--baseline",
        str(analysed),
    )
    assert done.returncode == 2, done.stderr
    assert _the_error_line(done.stderr) == (
        f"evbench: --baseline {analysed} ran pace '50x2', this run's is '60x2': give a baseline "
        "of pace '60x2' (a step at another rate is no regression)"
    )
    assert not runs.exists()
    other = _copy(analysed, tmp_path, "other-60x2")
    _another_pace(other)
    done = _evbench("compare", str(analysed), str(other), "--out", str(tmp_path / "c.html"))
    assert done.returncode == 2, done.stderr
    assert f"{other} ran pace '60x2', the baseline {analysed} '50x2'" in (
        _the_error_line(done.stderr)
    )


def test_runs_as_analysed_are_still_compared(analysed, tmp_path):
    again = _copy(analysed, tmp_path, "again-50x2")
    done = _evbench("compare", str(analysed), str(again), "--out", str(tmp_path / "c.html"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "c.html").is_file()
