"""The evbench command as a user meets it."""

import subprocess
import sys

import pytest


def _evbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "evbench", *args], capture_output=True, text=True, timeout=60
    )


def test_paces_lists_steps_duration_and_events():
    result = _evbench("paces")
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("1k-2k "))
    assert "12 steps" in line and "6m30s" in line and "501000 events" in line
    lines = result.stdout.splitlines()
    assert any(x.startswith("1k-long ") and "360000 events" in x for x in lines)


def test_paces_names_a_broken_pace_file(tmp_path):
    (tmp_path / "bad.pace").write_text("100:10\n200:1o\n")
    result = _evbench("paces", "--paces-dir", str(tmp_path))
    assert result.returncode == 2
    assert "bad.pace:2:1" in result.stderr and "'200:1o'" in result.stderr


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
