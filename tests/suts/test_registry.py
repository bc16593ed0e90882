"""The lab's registry: every name, help line and topology derives from one driver class."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from contract.errors import EvbenchError
from runtime.procs import Child
from suts.driver import Started, Sut
from suts.lab import DRIVERS, KAFKA_SUTS, LOCAL_SUTS, SUTS, LabSettings, make_sut, sut_help


def test_the_matrix_is_the_six_local_systems_in_order():
    assert LOCAL_SUTS == (
        "direct",
        "channel-imc",
        "broker-imc",
        "channel-kafka",
        "broker-kafka",
        "source-kafka",
    )
    assert (*LOCAL_SUTS, "external") == SUTS
    assert KAFKA_SUTS == ("channel-kafka", "broker-kafka", "source-kafka")


@pytest.mark.parametrize("name", SUTS)
def test_every_driver_is_complete_and_named_once(name):
    driver = DRIVERS[name]
    assert issubclass(driver, Sut) and driver.name == name
    assert driver._start is not Sut._start, f"{name} does not say what it starts"
    assert driver.summary and driver.topology
    assert f"  {name} " in sut_help()
    sut = make_sut(name, LabSettings(), Path("logs"), "r1")
    assert type(sut) is driver and sut.describe()["topology"] == driver.topology


def test_an_unknown_system_is_named_with_the_choices():
    with pytest.raises(EvbenchError, match="unknown SUT 'kafka': choose from direct, channel-imc"):
        make_sut("kafka", LabSettings(), Path("logs"), "r1")


def test_external_without_a_way_in_says_what_it_needs(tmp_path):
    sut = make_sut("external", LabSettings(), tmp_path, "r1")
    with pytest.raises(EvbenchError, match="--ingress URL, or --kafka-bootstrap"):
        sut.start("http://127.0.0.1:1/")
    kafka = make_sut("external", LabSettings(kafka_bootstrap="k:9092", topic="t"), tmp_path, "r1")
    assert kafka.start("http://127.0.0.1:1/") == "kafka://k:9092/t"
    assert kafka.lag_target() is None  # not a lab topic: its group is the user's


STOPPED_ON_TERM = (
    "import json, signal, sys, time\n"
    "def bye(*_):\n"
    "    print(json.dumps({'event': 'stopped', 'stats': {'handled': 7}}), flush=True)\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, bye)\n"
    "print(json.dumps({'event': 'listening', 'port': 1}), flush=True)\n"
    "while True: time.sleep(1)\n"
)


@pytest.mark.e2e
def test_a_failed_start_stops_once_and_keeps_the_final_reports(tmp_path):
    class Broken(Sut):
        name, summary, topology = "broken", "test", "test"

        def _start(self, subscriber: str) -> str:
            child = Child("part", [sys.executable, "-c", STOPPED_ON_TERM], tmp_path / "part.log")
            self.components["part"] = Started(child, "")
            child.wait_for("listening", 30)
            raise EvbenchError("the next part would not start")

    sut = Broken(LabSettings(), tmp_path, "r")
    with pytest.raises(EvbenchError, match="would not start"):
        sut.start("http://127.0.0.1:9/")
    assert sut.final_stats == {"part": {"handled": 7}}
    assert sut.stop() == {"part": {"handled": 7}}  # the runner's teardown stops it again


@pytest.mark.parametrize(
    ("name", "lab"),
    [
        ("direct", LabSettings()),
        ("external", LabSettings(ingress="http://127.0.0.1:1/")),
        ("external", LabSettings(kafka_bootstrap="k:9092", topic="t")),
    ],
)
def test_a_system_of_no_lab_processes_has_no_metrics_to_scrape(tmp_path, name, lab):
    sut = make_sut(name, lab, tmp_path, "r1")
    sut.start("http://127.0.0.1:1/")
    assert sut.metrics_endpoints() == {}  # the user names their own system's endpoints


@pytest.mark.parametrize(
    ("urls", "endpoints"),
    [
        ({}, {}),
        ({"channel": "http://127.0.0.1:4001/"}, {"channel": "http://127.0.0.1:4001/metrics"}),
        (
            {"filter": "http://h:1/", "ingress": "http://h:2/"},
            {"filter": "http://h:1/metrics", "ingress": "http://h:2/metrics"},
        ),
        ({"dispatcher": "http://h:1/", "ingress": ""}, {"dispatcher": "http://h:1/metrics"}),
    ],
)
def test_metrics_endpoints_are_each_listening_components_url(tmp_path, urls, endpoints):
    sut = make_sut("broker-imc", LabSettings(), tmp_path, "r1")
    # Not started: the URLs are what _component records once each one listens ("" before).
    sut.components = {role: Started(None, url) for role, url in urls.items()}  # no child needed
    assert sut.metrics_endpoints() == endpoints
