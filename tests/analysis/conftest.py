"""Fixtures shared by the analysis tests: one crafted run, analysed once per session (Spark costs
seconds a test; the report tests build pages from the same analysed directory)."""

from pathlib import Path

import pytest

from analysis.job import AnalyzeOptions, analyze
from contract.records import (
    CONSUMER_LAG_FIELDS,
    PROCESS_SAMPLE_FIELDS,
    ConsumerLagRow,
    ProcessSampleRow,
)
from runtime.parquet import PartWriter
from tests.analysis.crafted import T0, craft


@pytest.fixture(scope="session")
def analysed_run(spark, tmp_path_factory) -> tuple[Path, Path]:
    """(runs root, SUT directory) of the crafted run, with process and lag samples, analysed.
    Tests copy the SUT directory before they change anything in it."""
    root = tmp_path_factory.mktemp("runs")
    sut, _ = craft(root)
    _sample_processes_and_lag(sut)
    analyze(spark, [sut], AnalyzeOptions())
    return root, sut


def _sample_processes_and_lag(sut: Path) -> None:
    """What a Kafka SUT's run samples: three processes every second, lag of 4 partitions."""
    processes = PartWriter(sut / "samples", PROCESS_SAMPLE_FIELDS, prefix="processes")
    lag = PartWriter(sut / "samples" / "consumer-lag", CONSUMER_LAG_FIELDS, prefix="lag")
    for second in range(30):
        t_ns = T0 + second * 1_000_000_000
        for pid, role in enumerate(("sender", "receiver", "dispatcher"), start=100):
            processes.append(
                ProcessSampleRow(t_ns, role, pid, (100 + second) * 1_000_000, 10.0 * pid / 100)
            )
        if second % 5 == 0:
            for partition in range(4):
                lag.append(
                    ConsumerLagRow(
                        t_ns, "g", "t", partition, 100 * second, 90 * second, 10 * second
                    )
                )
    processes.flush()
    lag.flush()
