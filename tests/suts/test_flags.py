"""A lab component's settings: argv and parse are one table's round trip (pure)."""

from __future__ import annotations

import argparse

import pytest

from suts.__main__ import build_parser
from suts.flags import COMPONENTS, ComponentSettings, component_settings
from suts.settings import LabSettings

_LAB = LabSettings(
    dispatcher_concurrency=7,
    ingress_concurrency=9,
    retries=0,
    backoff_ms=12.5,
    delivery_timeout_s=3.0,
    queue_limit=11,
    max_pending=13,
    commit_interval_s=0.25,
    producer=("acks=1", "bootstrap.servers=k:1"),
    consumer=("group.id=g",),
    trigger=("type=a", "type=b,source=s"),
)
_CASES = {
    "imc-channel": dict(subscribers=("http://a/", "http://b/")),
    "broker-ingress": dict(channel="http://c/"),
    "trigger-filter": dict(subscribers=("http://a/",)),
    "kafka-ingress": dict(topic="t"),
    "kafka-dispatcher": dict(topic="t", subscribers=("http://a/",), mode="source"),
    "capacity": dict(subscribers=("http://a/",), rate_per_s=150.5),
}


def _parsed(argv: list[str]) -> ComponentSettings:
    return component_settings(build_parser().parse_args(argv))


def test_every_component_has_a_case():
    assert set(_CASES) == set(COMPONENTS)


@pytest.mark.parametrize("kind", sorted(_CASES))
def test_settings_to_argv_and_back_are_the_same(kind):
    settings = ComponentSettings(kind, host="0.0.0.0", port=8081, lab=_LAB, **_CASES[kind])
    assert _parsed(settings.argv()) == settings.taken()


@pytest.mark.parametrize("kind", sorted(_CASES))
def test_a_component_started_by_hand_has_the_labs_defaults(kind):
    settings = ComponentSettings(kind, **_CASES[kind])
    parsed = _parsed(settings.argv())
    assert parsed == settings.taken()
    assert (parsed.lab.dispatcher_concurrency, parsed.lab.retries) == (256, 3)


def test_the_two_concurrencies_are_two_flags():
    imc = ComponentSettings("imc-channel", subscribers=("u",), lab=_LAB).argv()
    ingress = ComponentSettings("broker-ingress", channel="c", lab=_LAB).argv()
    assert "--dispatcher-concurrency" in imc and "--ingress-concurrency" not in imc
    assert "--ingress-concurrency" in ingress and "--dispatcher-concurrency" not in ingress


def test_a_required_setting_missing_is_refused(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["broker-ingress"])
    assert "--channel" in capsys.readouterr().err


def test_a_setting_its_kind_does_not_take_is_refused(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["kafka-ingress", "--topic", "t", "--retries", "1"])
    assert "unrecognized arguments: --retries" in capsys.readouterr().err


def test_taken_leaves_out_what_the_kind_does_not_take():
    settings = ComponentSettings("kafka-ingress", topic="t", lab=_LAB).taken()
    assert settings.lab.retries == LabSettings().retries and settings.lab.producer == _LAB.producer
    assert isinstance(build_parser(), argparse.ArgumentParser)
