"""Where the analysis' Spark driver binds (pure)."""

import pytest

from analysis.spark import driver_host


@pytest.mark.parametrize(
    ("master", "host"),
    [
        ("local[*]", "127.0.0.1"),
        ("local[2]", "127.0.0.1"),
        ("spark://127.0.0.1:7077", "127.0.0.1"),
        ("spark://localhost:7077", "127.0.0.1"),
        ("spark://spark-master.example:7077", None),  # a real cluster must reach the driver
        ("yarn", None),
    ],
)
def test_the_driver_binds_loopback_only_when_every_executor_is_on_this_machine(master, host):
    assert driver_host(master) == host
