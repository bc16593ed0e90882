"""The unit factors agree with each other and are exact integers."""

from contract.units import MS_PER_S, NS_PER_MS, NS_PER_S, NS_PER_US


def test_the_factors_are_exact_and_consistent():
    assert all(isinstance(f, int) for f in (NS_PER_S, NS_PER_MS, NS_PER_US, MS_PER_S))
    assert NS_PER_S == MS_PER_S * NS_PER_MS == 1_000_000 * NS_PER_US
    assert NS_PER_MS == 1_000 * NS_PER_US
