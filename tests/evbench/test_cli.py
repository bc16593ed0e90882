"""The evbench command as a user meets it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evbench.commands.send import sender_command


def _evbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "evbench", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.e2e
def test_paces_lists_steps_duration_and_events():
    result = _evbench("paces")
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("1k-2k "))
    assert "12 steps" in line and "6m30s" in line and "501000 events" in line
    lines = result.stdout.splitlines()
    assert any(x.startswith("1k-long ") and "360000 events" in x for x in lines)
    assert any(x.startswith("soak ") and "3600000 events" in x for x in lines)


@pytest.mark.e2e
def test_paces_names_a_broken_pace_file(tmp_path):
    (tmp_path / "bad.pace").write_text("100:10\n200:1o\n")
    result = _evbench("paces", "--paces-dir", str(tmp_path))
    assert result.returncode == 2
    assert "bad.pace:2:1" in result.stderr and "'200:1o'" in result.stderr


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--help"], "evbench run --sut direct --pace 1k-2k"),
        (["run", "--help"], "--max-inflight"),
        (["receive", "--help"], "--flush-interval"),
        (["send", "--help"], "--target"),
    ],
)
def test_help_teaches(args, expected):
    result = _evbench(*args)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


@pytest.mark.e2e
def test_external_without_a_target_says_what_it_needs(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evbench",
            "run",
            "--sut",
            "external",
            "--pace",
            "50:1",
            "--runs-dir",
            str(tmp_path),
            "--no-analyze",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--ingress URL" in proc.stderr and "--kafka-bootstrap" in proc.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [("direct", ("direct",)), ("channel-kafka, source-kafka", ("channel-kafka", "source-kafka"))],
)
def test_sut_list(text, expected):
    from evbench.lab_args import sut_list

    assert sut_list(text) == expected


@pytest.mark.parametrize("text", ["kafka", "direct,nope", ","])
def test_unknown_sut_is_named(text):
    import argparse

    from evbench.lab_args import sut_list

    with pytest.raises(argparse.ArgumentTypeError, match="unknown system"):
        sut_list(text)


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        ("port", "0", 0),
        ("port", "65535", 65535),
        ("port", "70000", "not a port: use 0..65535"),
        ("port", "-1", "not a port"),
        ("port", "80x", "not a whole number"),
        ("cap", "1", 1),
        ("cap", "0", "at least 1"),
        ("cap", "-5", "at least 1"),
        ("count", "0", 0),
        ("count", "-1", "must not be negative"),
        ("seconds", "0.5", 0.5),
        ("seconds", "0", "above 0"),
        ("seconds", "nan", "finite"),
        ("seconds", "inf", "finite"),
        ("seconds", "soon", "not a number of seconds"),
    ],
)
def test_ranged_argument_types(kind, text, expected):
    import argparse

    from runtime.argtypes import at_least_one, non_negative, port_number, positive_seconds

    parse = {
        "port": port_number,
        "cap": at_least_one,
        "count": non_negative,
        "seconds": positive_seconds,
    }[kind]
    if not isinstance(expected, str):
        assert parse(text) == expected
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=expected):
            parse(text)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--receiver-port", "70000"], "--receiver-port: 70000 is not a port"),
        (["run", "--max-inflight", "0"], "--max-inflight: 0 is too small"),
        (["run", "--queue-limit", "0"], "--queue-limit: 0 is too small"),
        (["run", "--dispatcher-concurrency", "0"], "--dispatcher-concurrency: 0 is too small"),
        (
            ["send", "--target", "http://127.0.0.1:9/", "--pace", "1:1", "--max-inflight", "0"],
            "--max-inflight: 0 is too small",
        ),
        (
            ["send", "--target", "http://127.0.0.1:9/", "--pace", "1:1", "--workers", "0"],
            "--workers: 0 is too small",
        ),
    ],
)
def test_out_of_range_ports_and_caps_are_refused_naming_the_flag(tmp_path, args, message):
    where = (
        ["--out", str(tmp_path / "sent")] if args[0] == "send" else ["--runs-dir", str(tmp_path)]
    )
    result = _evbench(*args, *where)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert not any(tmp_path.iterdir())  # refused before anything was made


def _analyze_without_java(*args: str) -> subprocess.CompletedProcess:
    """`evbench analyze` where starting Spark would fail: an input error must come first."""
    env = {**os.environ, "JAVA_HOME": "/nonexistent-java"}
    return subprocess.run(
        [sys.executable, "-m", "evbench", "analyze", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def _sut_without_start(root: Path) -> Path:
    sut = root / "run-1-p" / "direct"
    sut.mkdir(parents=True)
    pace = {"name": "p", "spec": "10:1", "steps": [{"rate_per_s": 10, "duration_s": 1}]}
    (sut / "run.json").write_text(json.dumps({"run_id": "run-1", "sut": "direct", "pace": pace}))
    return sut


def _sut_with_truncated_part(root: Path) -> Path:
    from tests.analysis.crafted import craft

    sut, _ = craft(root)
    victim = sorted((sut / "sent").glob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[:100])
    return victim


def _sut_with_broken_run_json(root: Path) -> Path:
    sut = root / "run-1-p" / "direct"
    sut.mkdir(parents=True)
    (sut / "run.json").write_text("{not json")
    return sut


def _sut_with_unreadable_objectives(root: Path) -> Path:
    """A run whose run.json keeps an objective (`evbench run --slo`) that does not read."""
    from tests.analysis.crafted import craft

    sut, _ = craft(root)
    run = json.loads((sut / "run.json").read_text())
    (sut / "run.json").write_text(json.dumps({**run, "objectives": ["e2e-p99<200ms"]}))
    return sut


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: root / "no-such-run", "no such directory"),
        (_sut_without_start, "the sender never started"),
        (_sut_with_truncated_part, "unreadable Parquet file"),
        (_sut_with_broken_run_json, "run.json is not JSON"),
        (_sut_with_unreadable_objectives, "run.json's objectives: --slo term 'e2e-p99<200ms'"),
    ],
    ids=[
        "missing directory",
        "never started",
        "truncated part file",
        "broken run.json",
        "unreadable objectives",
    ],
)
def test_analyze_checks_its_inputs_before_starting_spark(tmp_path, make, message):
    named = make(tmp_path)
    target = named if named.is_dir() or not named.exists() else named.parent.parent
    result = _analyze_without_java(str(target))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and named.name in result.stderr
    assert "Java" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("value", ["NaN", "Infinity"])
def test_analyze_refuses_non_finite_thresholds_naming_the_flag(tmp_path, value):
    thresholds = tmp_path / "t.json"
    thresholds.write_text(f'{{"max_lost_ratio": {value}}}')
    result = _analyze_without_java(
        str(_sut_without_start(tmp_path)), "--thresholds", str(thresholds)
    )
    assert result.returncode == 2, result.stderr
    assert f"--thresholds {thresholds}: max_lost_ratio must be a finite" in result.stderr


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["--target", "t", "--pace", "p"], ["loadgen", "--target", "t", "--pace", "p"]),
        (["--worker", "2", "--workers", "3"], ["loadgen", "--worker", "2", "--workers", "3"]),
        (
            ["--master", "--workers", "2", "--target", "t"],
            ["loadgen.fleet", "master", "--workers", "2", "--target", "t"],
        ),
        (
            ["--worker", "--master-host", "10.0.0.5"],
            ["loadgen.fleet", "worker", "--master-host", "10.0.0.5"],
        ),
        (["--master-host=h", "--worker"], ["loadgen.fleet", "worker", "--master-host=h"]),
    ],
)
def test_send_runs_one_sender_or_a_fleets_master_or_worker(argv, command):
    assert sender_command(argv) == command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--slo", "e2e-p99<=1s", "--no-analyze"], "--slo is judged on the analysis"),
        (["run", "--slo", "e2e-p99<200ms"], "--slo term 'e2e-p99<200ms': write NAME<=VALUE"),
        (["analyze", "x", "--slo", "lost<=0.5"], "a whole number of events"),
        (["search", "--slo", "max-sustainable>=10"], "the whole run's, not a step's"),
    ],
)
def test_objectives_are_read_alike_by_every_command(tmp_path, args, message, capsys):
    from evbench.cli import main

    try:
        code = main([*args, "--runs-dir", str(tmp_path)] if args[0] != "analyze" else args)
    except SystemExit as exited:  # argparse's own refusal
        code = exited.code
    assert code == 2 and message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
