"""Memory figures from a consumer's series (pure)."""

import pytest

from analysis.memory import MIB, describe_lines, memory_figures


def series(*values_mib, start=0.0):
    return [(start + i, int(v * MIB)) for i, v in enumerate(values_mib)]


@pytest.mark.parametrize(
    ("samples", "first", "drained", "hwm", "expected"),
    [
        # seed 001's confluent consumer: 20 idle, 76 peak, 46 after: not back to idle
        (series(20, 20, 20, 50, 76, 60, 46, 46, 46), 3, 6, None, (20, 76, 46, False)),
        # back within 2 MiB of a small idle
        (series(14, 14, 90, 80, 15.5, 15.5, 15.5), 2, 4, None, (14, 90, 15.5, True)),
        # within 10 % of a large idle (10 % of 200 MiB = 20 MiB)
        (series(200, 200, 400, 215, 215, 215), 2, 3, None, (200, 400, 215, True)),
        # drained at the last sample but one: too soon to say where it settles
        (series(20, 20, 50, 76, 70), 2, 3, None, (20, 76, None, None)),
        # never drained: no plateau, no verdict
        (series(20, 20, 50, 60, 70), 2, None, None, (20, 70, None, None)),
        # a spike between samples: the kernel's high-water mark is the peak
        (series(20, 20, 50, 30, 21, 21, 21), 2, 4, 99 * MIB, (20, 99, 21, True)),
        # the first message before the first sample: no idle baseline
        (series(50, 60, 30, 30, 30), 0, 2, None, (None, 60, 30, None)),
    ],
)
def test_idle_peak_plateau_and_the_return_to_idle(samples, first, drained, hwm, expected):
    got = memory_figures(samples, first, drained, hwm)
    mib = [
        None if v is None else v / MIB for v in (got.idle_bytes, got.peak_bytes, got.plateau_bytes)
    ]
    assert (*mib, got.returned_to_idle) == pytest.approx(expected)


def test_the_plateau_is_the_last_ten_seconds_after_the_drain():
    samples = series(*([20] * 5 + [80] * 5 + [60] * 20 + [40] * 10))  # a slow release
    got = memory_figures(samples, first_message_s=5, drained_s=10)
    assert got.plateau_bytes == 40 * MIB and got.peak_bytes == 80 * MIB


def test_no_samples_is_an_error():
    with pytest.raises(ValueError, match="no memory samples"):
        memory_figures([], None, None)


def test_lag_reads_like_kafka_consumer_groups_describe():
    # seed 000's rows, and a partition nothing was committed for
    lines = describe_lines(
        "knative-group-100", "topic-100", [(33, 17, 13418), (0, 166, 13350), (7, None, 13001)]
    )
    assert lines == [
        "GROUP             TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG       "
        "      CONSUMER-ID     HOST            CLIENT-ID",
        "knative-group-100 topic-100       33         17              13418           13401     "
        "      -               -               -",
        "knative-group-100 topic-100       0          166             13350           13184     "
        "      -               -               -",
        "knative-group-100 topic-100       7          -               13001           -         "
        "      -               -               -",
    ]
