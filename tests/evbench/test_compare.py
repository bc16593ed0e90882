"""`evbench compare` as a user runs it: two analysed runs on disk (summary.json written from the
real types and checked against them), the command in its own process, its printed capacity and
per-step calls, and the exit code `--fail-on-regression` gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contract.documents import problems
from contract.figures import IntervalDoc, TailDoc
from contract.summarydocs import StepSummaryDoc, SummaryDoc

# 1k-2k's shape, shortened: rising steps, the 100/s cool-down, then on.
RATES = [1000, 1100, 1200, 100, 1300]


def _interval(ms: float, n: int, width: float = 0.02) -> IntervalDoc:
    return {
        "lo_ms": round(ms * (1 - width), 4),
        "hi_ms": round(ms * (1 + width), 4),
        "exact": True,
        "n": n,
    }


def _tail(p50: float, p99: float, p9999: float, n: int) -> TailDoc:
    return {
        "p50": p50,
        "p99": p99,
        "p999": p9999 * 0.8,
        "p9999": p9999,
        "max": p9999 * 1.1,
        "n": n,
        "p9999_is_max": n < 10_000,
        "exact": ["p99", "p9999"],
        "rank_error": {},
        "ci95": {"p50": _interval(p50, n), "p99": _interval(p99, n)}
        | ({"p9999": _interval(p9999, n, 0.1)} if n >= 10_000 else {}),
    }


def _step(number: int, rate: int, verdict: str, p50: float, p99: float, p9999: float):
    n = rate * 30
    tail = _tail(p50, p99, p9999, n)
    row: StepSummaryDoc = {
        "step": number,
        "target_rate_per_s": rate,
        "duration_s": 30,
        "scheduled": n,
        "achieved_send_rate_per_s": float(rate),
        "delivered_rate_per_s": float(rate),
        "send_failures": 0,
        "inflight_cap_refused": 0,
        "lost": 0,
        "duplicates": 0,
        "filtered": 0,
        "leaked": 0,
        "sender_lag_p99_ms": 0.5,
        "p50_e2e_ms": p50,
        "p99_e2e_ms": p99,
        "p9999_e2e_ms": p9999,
        "e2e_n": n,
        "p9999_is_max": tail["p9999_is_max"],
        "e2e_exact": ["p99", "p9999"],
        "e2e_rank_error": {},
        "e2e_ci95": tail["ci95"],
        "e2e_rise_ms": 0.1,
        "verdict": verdict,
        "reasons": [],
    }
    return row


def _summary(run_id: str, steps: list[StepSummaryDoc], point, held, verdict: str) -> SummaryDoc:
    n = sum(s["e2e_n"] for s in steps)
    doc: SummaryDoc = {
        "run_id": run_id,
        "sut": "channel-imc",
        "pace": "1k-2k",
        "status": "completed",
        "verdict": verdict,
        "instrument_failures": [],
        "schedule_start_ns": 1,
        "schedule_start_from": "run.json",
        "trim_s": 0.0,
        "trimmed": None,
        "counts": dict.fromkeys(("sent", "scheduled", "acked", "received"), n)
        | dict.fromkeys(
            ("send_failures", "lost", "duplicates", "foreign", "decoys", "filtered", "leaked"), 0
        ),
        # the whole run's tail: here the later run's is far lower, although it is no better
        # at any step: never the call
        "latency_ms": {"e2e": _tail(2.0, 40.0 if run_id == "base" else 5.0, 90.0, n)},
        "steps": steps,
        "breaking_point_per_s": point,
        "max_sustainable_rate_per_s": held,
        "thresholds": {},
    }
    assert problems(doc, SummaryDoc) == []
    return doc


def _write(root: Path, name: str, doc: SummaryDoc) -> Path:
    run_dir = root / name
    path = run_dir / "channel-imc" / "analysis" / "summary.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return run_dir


def _compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evbench", "compare", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """A baseline that holds to 1200/s and breaks at 1300/s; a later run (a lab setting
    changed) that breaks at 1200/s, slower at 1100/s and 1200/s, alike elsewhere."""
    base = [
        _step(1, 1000, "holds", 1.0, 3.0, 9.0),
        _step(2, 1100, "holds", 1.0, 3.0, 9.0),
        _step(3, 1200, "holds", 1.1, 3.5, 10.0),
        _step(4, 100, "holds", 0.8, 2.0, 4.0),  # 3,000 events: P99.99 is their max
        _step(5, 1300, "breaks", 50.0, 900.0, 1500.0),
    ]
    later = [
        _step(1, 1000, "holds", 1.0, 3.0, 9.0),
        _step(2, 1100, "holds", 1.0, 6.0, 9.0),  # P99 twice: worse
        _step(3, 1200, "breaks", 40.0, 800.0, 1400.0),
        _step(4, 100, "sender-limited", 0.8, 9.0, 4.0),  # not judged: not counted
        _step(5, 1300, "breaks", 50.0, 900.0, 1500.0),
    ]
    return (
        _write(tmp_path, "base", _summary("base", base, 1300, 1200, "breaks at 1300/s")),
        _write(tmp_path, "later", _summary("later", later, 1200, 1100, "breaks at 1200/s")),
    )


def _line(out: str, start: str) -> str:
    lines = [" ".join(line.split()) for line in out.splitlines()]  # columns' padding as one
    (found,) = [line for line in lines if line.startswith(start)]
    return found


def test_compare_calls_capacity_and_each_shared_step_and_the_gate_reads_them(runs, tmp_path):
    base, later = runs
    out = ["--out", str(tmp_path / "c.html")]
    done = _compare(str(base), str(later), *out, "--fail-on-regression")
    assert done.returncode == 3, done.stderr
    said = done.stdout
    assert _line(said, "channel-imc: later against base") == (
        "channel-imc: later against base: worse (breaking point, max sustainable, e2e at 2 of "
        "4 steps both judged)"
    )
    assert _line(said, "breaking point") == "breaking point 1300/s 1200/s -100/s worse"
    assert _line(said, "max sustainable") == "max sustainable 1200/s 1100/s -100/s worse"
    # each step: both values, the change with its interval, the call
    assert _line(said, "1 1000/s") == (
        "1 1000/s holds -> holds P50 1.00 ms 1.00 ms 0 ms (-0.0400 ms to +0.0400 ms) "
        "indistinguishable"
    )
    assert _line(said, "2 1100/s") == (
        "2 1100/s holds -> holds P50 1.00 ms 1.00 ms 0 ms (-0.0400 ms to +0.0400 ms) "
        "indistinguishable"
    )
    assert _line(said, "P99 3.00 ms 6.00 ms") == (
        "P99 3.00 ms 6.00 ms +3.00 ms (+2.82 ms to +3.18 ms) worse"
    )
    # the cool-down matched with the cool-down; there the later run was sender-limited
    assert _line(said, "4 100/s") == (
        "4 100/s holds -> sender-limited P50 0.800 ms 0.800 ms 0 ms "
        "(-0.0320 ms to +0.0320 ms) indistinguishable, not counted"
    )
    assert _line(said, "P99 2.00 ms 9.00 ms") == (
        "P99 2.00 ms 9.00 ms +7.00 ms (+6.78 ms to +7.22 ms) worse, not counted"
    )
    assert _line(said, "P99.99 4.00 ms 4.00 ms") == (
        "P99.99 4.00 ms 4.00 ms 0 ms not called (no interval: the P99.99 of 3000 events is "
        "their maximum)"
    )
    # the whole run's tails told, never called: the later run's P99 is lower
    assert _line(said, "whole run") == (
        "whole run, information only (it mixes every step's rate, so it is never the call): "
        "e2e P99 40.0 ms -> 5.00 ms, P99.99 90.0 ms -> 90.0 ms"
    )
    assert "better" not in said
    regressions = [line for line in done.stderr.splitlines() if line.startswith("regression:")]
    assert regressions == [
        "regression: channel-imc in later: breaking point 1300/s -> 1200/s: worse than in base",
        "regression: channel-imc in later: max sustainable 1200/s -> 1100/s: worse than in base",
        "regression: channel-imc in later: step 2 (1100/s) e2e P99 3.00 ms -> 6.00 ms, "
        "+3.00 ms (+2.82 ms to +3.18 ms): worse than in base",
        "regression: channel-imc in later: step 3 (1200/s) e2e P50 1.10 ms -> 40.0 ms, "
        "+38.9 ms (+38.1 ms to +39.7 ms): worse than in base",
        "regression: channel-imc in later: step 3 (1200/s) e2e P99 3.50 ms -> 800 ms, "
        "+796 ms (+780 ms to +813 ms): worse than in base",
        "regression: channel-imc in later: step 3 (1200/s) e2e P99.99 10.0 ms -> 1.40 s, "
        "+1.39 s (+1.25 s to +1.53 s): worse than in base",
    ]
    page = (tmp_path / "c.html").read_text()
    assert "channel-imc: later against base: worse" in page and "change (95 %)" in page
    assert "not counted: a step that did not hold or break in both runs" in page
    # without the flag the same calls are said, and compare exits 0
    assert _compare(str(base), str(later), *out).returncode == 0


def test_the_other_way_round_is_better_and_passes_the_gate(runs, tmp_path):
    base, later = runs
    done = _compare(
        str(later), str(base), "--out", str(tmp_path / "c.html"), "--fail-on-regression"
    )
    assert done.returncode == 0, done.stderr
    assert _line(done.stdout, "channel-imc: base against later").startswith(
        "channel-imc: base against later: better (breaking point, max sustainable, e2e at 2 of "
        "4 steps both judged)"
    )
    assert "regression" not in done.stderr


def test_a_search_against_a_staircase_is_compared_by_capacity_only(runs, tmp_path):
    base, later = runs
    path = later / "channel-imc" / "analysis" / "summary.json"
    doc = json.loads(path.read_text())
    probe = {
        "step": 1,
        "rate_per_s": 1400,
        "hold_s": 30,
        "confirm": True,
        "start_ns": 1,
        "verdict": "holds",
        "reasons": [],
        "e2e_p99_ms": 11_900.0,
        "sender_ratio": 1.0,
    }
    doc["search"] = {
        "plan": {},
        "fresh": False,
        "settle_s": None,
        "objective": {},
        "probes": [probe],
        "minutes": 1.0,
        "result": {
            "max_sustainable_per_s": 1400,
            "highest_hold_per_s": 1400,
            "lowest_break_per_s": 1500,
            "why": "",
            "symptom": [],
            "workers_needed": None,
            "probes": 1,
        },
    }
    doc["breaking_point_per_s"], doc["max_sustainable_rate_per_s"] = 1500, 1400
    assert problems(doc, SummaryDoc) == []
    path.write_text(json.dumps(doc))
    done = _compare(
        str(base), str(later), "--out", str(tmp_path / "c.html"), "--fail-on-regression"
    )
    assert done.returncode == 0, done.stderr
    said = done.stdout
    assert _line(said, "channel-imc: later against base") == (
        "channel-imc: later against base: better (breaking point, max sustainable)"
    )
    assert _line(said, "max sustainable") == "max sustainable 1200/s 1400/s +200/s better"
    assert "capacity only: later is a search" in said
    assert "P99 " not in said and "whole run" not in said  # no step, no whole-run tail
