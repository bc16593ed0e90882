"""`evbench run`'s lab flags: one per LabSettings field, defaults from LabSettings (pure)."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest

from evbench.lab_args import add_lab_arguments, lab_settings
from suts.flags import LAB_FLAGS
from suts.lab import LabSettings


def _parse(*argv: str) -> LabSettings:
    parser = argparse.ArgumentParser()
    add_lab_arguments(parser)
    return lab_settings(parser.parse_args(list(argv)))


def test_every_lab_setting_has_exactly_one_flag():
    named = [name for name, *_ in LAB_FLAGS]
    assert sorted(named) == sorted(f.name for f in fields(LabSettings))
    assert len(set(named)) == len(named)


def test_no_flags_are_the_defaults():
    assert _parse() == LabSettings()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--partitions", "8", "--replication", "3"], {"partitions": 8, "replication": 3}),
        (["--dispatcher-concurrency", "4"], {"dispatcher_concurrency": 4}),
        (["--ingress-concurrency", "16"], {"ingress_concurrency": 16}),
        (["--retries", "0", "--retry-backoff-ms", "0"], {"retries": 0, "backoff_ms": 0.0}),
        (["--delivery-timeout", "5s"], {"delivery_timeout_s": 5.0}),
        (["--commit-interval", "0.25"], {"commit_interval_s": 0.25}),
        (["--queue-limit", "10", "--max-pending", "20"], {"queue_limit": 10, "max_pending": 20}),
        (
            ["--producer", "acks=1", "--producer", "linger.ms=0"],
            {"producer": ("acks=1", "linger.ms=0")},
        ),
        (
            ["--consumer", "fetch.min.bytes=1"],
            {"consumer": (*LabSettings().consumer, "fetch.min.bytes=1")},
        ),
        (["--trigger", "type=x"], {"trigger": ("type=x",)}),
        (
            ["--kafka-bootstrap", "k:9092", "--topic", "t"],
            {"kafka_bootstrap": "k:9092", "topic": "t"},
        ),
        (["--ingress", "http://broker/"], {"ingress": "http://broker/"}),
        (["--ready-timeout", "30"], {"ready_timeout_s": 30.0}),
    ],
)
def test_a_flag_sets_its_field_and_nothing_else(argv, expected):
    assert _parse(*argv) == LabSettings(**expected)


@pytest.mark.parametrize(
    "argv",
    [
        ["--partitions", "0"],
        ["--commit-interval", "0"],
        ["--retry-backoff-ms", "-1"],
        ["--ready-timeout", "inf"],
    ],
)
def test_out_of_range_values_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        _parse(*argv)
    assert argv[0] in capsys.readouterr().err
