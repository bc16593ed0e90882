"""The lab's registry of systems under test: names, help and topologies derive from the drivers.

    sut = make_sut("broker-imc", settings, logs_dir, run_id)

The interface every driver implements is suts/driver.py's `Sut`; the drivers are in
suts/drivers.py.
"""

from __future__ import annotations

from pathlib import Path

from contract.errors import EvbenchError
from suts.driver import DEFAULT_TRIGGER, LabSettings, Sut
from suts.drivers import (
    BrokerImc,
    BrokerKafka,
    ChannelImc,
    ChannelKafka,
    Direct,
    External,
    SourceKafka,
)

__all__ = ["DEFAULT_TRIGGER", "LabSettings", "Sut", "driver_for", "make_sut"]

# In the order `evbench run` goes through them without --sut.
DRIVERS: dict[str, type[Sut]] = {
    driver.name: driver
    for driver in (Direct, ChannelImc, BrokerImc, ChannelKafka, BrokerKafka, SourceKafka, External)
}
SUTS = tuple(DRIVERS)
LOCAL_SUTS = tuple(name for name, driver in DRIVERS.items() if driver.local)
KAFKA_SUTS = tuple(name for name, driver in DRIVERS.items() if driver.kafka)


def driver_for(name: str) -> type[Sut]:
    """The one check of a SUT name (the CLI, the runner and make_sut all ask here)."""
    driver = DRIVERS.get(name)
    if driver is None:
        raise EvbenchError(f"unknown SUT '{name}': choose from {', '.join(SUTS)}")
    return driver


def make_sut(
    name: str, settings: LabSettings, logs: Path, run_id: str, host: str = "127.0.0.1"
) -> Sut:
    return driver_for(name)(settings, logs, run_id, host)


def sut_help() -> str:
    """The systems as `evbench run --help` lists them."""
    width = max(len(name) for name in SUTS) + 2
    lines = [
        f"systems under test (--sut; default: all {len(LOCAL_SUTS)} local ones in turn, "
        "each started fresh):"
    ]
    for name, driver in DRIVERS.items():
        first, *rest = driver.summary.splitlines()
        lines.append(f"  {name:<{width}} {first}")
        lines += [f"  {'':<{width}} {line}" for line in rest]
    lines.append("Kafka SUTs start a fresh Tansu broker (memory storage) unless --kafka-bootstrap")
    lines.append("is given.")
    return "\n".join(lines) + "\n"
