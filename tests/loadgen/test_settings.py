"""One sender's settings: flags, defaults and argv from one table (pure)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from loadgen.settings import (
    SenderSettings,
    SendKnobs,
    add_knob_arguments,
    add_sender_arguments,
    knobs_from_args,
    settings_from_args,
)


def _sender_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_sender_arguments(parser)
    return parser


@pytest.mark.parametrize(
    "settings",
    [
        SenderSettings("http://127.0.0.1:8080/", "1k-2k", Path("out")),
        SenderSettings(
            target="kafka://127.0.0.1:9092/t",
            pace="100:2,200:3",
            out=Path("/tmp/sent"),
            knobs=SendKnobs(
                payload_bytes=1024,
                step_gap_s=0.25,
                warmup="10s@100",
                max_inflight=7,
                request_timeout_s=1.5,
                drain_timeout_s=0.0,
                decoy_every=5,
            ),
            kafka_config=("linger.ms=0", "acks=1"),
            run_tag="abc",
            start_at_ns=1_700_000_000_000_000_000,
            start_delay_s=0.0,
            flush_interval_s=0.5,
            worker=1,
            workers=3,
            clock_url="http://10.0.0.2:8080/clock",
            latency_histograms=True,
            first_step=4,
            first_seq=12_000,
        ),
    ],
    ids=["defaults", "every field set"],
)
def test_argv_parses_back_to_the_same_settings(settings):
    assert settings_from_args(_sender_parser().parse_args(settings.argv())) == settings


def test_defaults_are_the_dataclass_defaults():
    parsed = settings_from_args(
        _sender_parser().parse_args(["--target", "t", "--pace", "p", "--out", "o"])
    )
    assert parsed == SenderSettings("t", "p", Path("o"))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], SendKnobs()),
        (
            ["--step-gap", "2s", "--drain-timeout", "0"],
            SendKnobs(step_gap_s=2.0, drain_timeout_s=0.0),
        ),
        (
            ["--request-timeout", "5s", "--max-inflight", "9"],
            SendKnobs(request_timeout_s=5.0, max_inflight=9),
        ),
    ],
)
def test_run_and_send_read_knobs_the_same_way(argv, expected):
    run = argparse.ArgumentParser()
    add_knob_arguments(run)
    assert knobs_from_args(run.parse_args(argv)) == expected
    sender = settings_from_args(
        _sender_parser().parse_args(["--target", "t", "--pace", "p", "--out", "o", *argv])
    )
    assert sender.knobs == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--step-gap", "-1"], "0 or more"),
        (["--request-timeout", "0"], "above 0"),
        (["--request-timeout", "nan"], "finite"),
        (["--max-inflight", "0"], "at least 1"),
        (["--decoy-every", "-2"], "must not be negative"),
    ],
)
def test_a_bad_knob_is_refused_naming_the_flag(argv, message, capsys):
    run = argparse.ArgumentParser()
    add_knob_arguments(run)
    with pytest.raises(SystemExit):
        run.parse_args(argv)
    err = capsys.readouterr().err
    assert argv[0] in err and message in err
