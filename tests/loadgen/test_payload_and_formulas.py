import pytest

from contract.records import event_id
from loadgen.payload import PayloadBuilder
from receivers.identify import payload_event_id
from runtime.formulas import achieved_rate_per_s, percentile


@pytest.mark.parametrize("size", [64, 1000, 8192, 65536])
def test_payload_has_exact_size_and_carries_the_id(size):
    builder = PayloadBuilder(size, longest_id=20, seed=1)
    for eid in ("a-0-0", event_id("f00dfe", 3, 123456789)):
        payload = builder.build(eid)
        assert len(payload) == size
        assert payload_event_id(payload) == eid


def test_payload_too_small_names_the_minimum():
    with pytest.raises(ValueError, match="at least"):
        PayloadBuilder(20, longest_id=20)


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [
        ([], 0.99, None),
        ([5], 0.99, 5),
        (list(range(1, 101)), 0.99, 99),
        (list(range(1, 101)), 0.5, 50),
        (list(range(1, 1001)), 0.99, 990),
    ],
)
def test_percentile(values, fraction, expected):
    assert percentile(values, fraction) == expected


@pytest.mark.parametrize(
    ("count", "last_offset_ns", "rate", "expected"),
    [
        (1000, 999_000_000, 1000, 1000.0),  # on time: exactly the rate
        (1000, 1_999_000_000, 1000, 500.0),  # took twice as long
        (0, None, 1000, 0.0),
        (1, 0, 10, 10.0),
    ],
)
def test_achieved_rate(count, last_offset_ns, rate, expected):
    start = 1_700_000_000_000_000_000
    last = None if last_offset_ns is None else start + last_offset_ns
    assert achieved_rate_per_s(count, start, last, rate) == pytest.approx(expected)
