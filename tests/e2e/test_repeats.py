"""`evbench run --repeat N` as a user runs it: the whole pace N times in one run directory, each
system fresh each time, then the index's spread, and a second run gated on the first
(`--baseline --fail-on-regression`), compared repeats against repeats."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.documents import RunDoc, problems
from contract.summarydocs import SummaryDoc
from runtime.procs import die_with_parent
from tests.browser import console_errors, render

pytestmark = pytest.mark.e2e


def _evbench(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        preexec_fn=die_with_parent,
    )


@pytest.mark.browser
def test_two_repeats_of_direct_in_one_run_directory_then_a_run_gated_on_them(tmp_path):
    done = _evbench(
        "run", "--sut", "direct", "--pace", "300:2", "--repeat", "2",
        "--runs-dir", str(tmp_path), "--run-id", "rep",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "rep-300x2"
    assert sorted(p.name for p in run_dir.iterdir() if p.is_dir()) == [
        "direct.repeat-1",
        "direct.repeat-2",
    ]
    starts = []
    for index in (1, 2):
        sut_dir = run_dir / f"direct.repeat-{index}"
        run = json.loads((sut_dir / "run.json").read_text())
        assert problems(run, RunDoc) == []
        assert run["sut"] == "direct" and run["repeat"] == {"index": index, "of": 2}
        assert run["receiver"]["stats"]["received"] == 600  # each repeat its own receiver
        starts.append(run["schedule"]["start_ns"])
        summary = json.loads((sut_dir / "analysis" / "summary.json").read_text())
        assert problems(summary, SummaryDoc) == []
        assert summary["repeat"] == {"index": index, "of": 2}
        assert summary["counts"]["received"] == 600
    assert starts[1] > starts[0]  # one after the other, not side by side
    index_html = (run_dir / "index.html").read_text()
    assert "Across repeats" in index_html and "direct, repeat 2 of 2" in index_html
    assert "<td>2</td>" in index_html  # the repeats column of the system's row
    _, console = render(run_dir / "index.html", tmp_path)
    assert console_errors(console) == []

    # A run against itself says nothing: refused, in one line.
    twice = _evbench("compare", str(run_dir), str(run_dir), "--out", str(tmp_path / "c.html"))
    assert twice.returncode == 2 and "given 2 times" in twice.stderr
    # Repeats against repeats, as CI runs them: the new run compared with the first.
    gated = _evbench(
        "run", "--sut", "direct", "--pace", "300:2", "--repeat", "2", "--runs-dir", str(tmp_path),
        "--run-id", "next", "--baseline", str(run_dir), "--fail-on-regression",
    )  # fmt: skip
    assert gated.returncode in (0, 3), gated.stderr[-3000:]
    (line,) = [row for row in gated.stdout.splitlines() if row.startswith("direct ")]
    assert line.count("median of 2 repeats") == 2  # one row for the system, a cell a run
    # the later run against the first, step by step, from the repeats' ranges
    said = [" ".join(row.split()) for row in gated.stdout.splitlines()]
    assert any(row.startswith("direct: next-300x2 against rep-300x2: ") for row in said)
    assert any(row.startswith("1 300/s ") and " P50 " in row for row in said), gated.stdout
    assert (tmp_path / "next-300x2" / "compare.html").is_file()
    # The call itself is the pure rule's (tests/analysis/test_repeats.py); here, that the gate
    # reads it: exit 3 exactly when a regression was said.
    worse = "regression: direct in next-300x2" in gated.stderr
    assert gated.returncode == (3 if worse else 0), gated.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--repeat", "0"], "at least 1"),
        (["--repeat", "51"], "at most 50"),
        (["--fail-on-regression"], "give --baseline DIR"),
        (["--baseline", "nowhere"], "no analysed SUTs there"),
        (["--baseline", ".", "--no-analyze"], "--baseline compares the analysed run"),
    ],
)
def test_a_bad_repeat_or_gate_is_named_before_anything_starts(tmp_path, args, said):
    done = _evbench("run", "--sut", "direct", "--runs-dir", str(tmp_path), *args)
    assert done.returncode == 2
    assert said in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []
