import pytest

from runtime.clocks import (
    Correction,
    Exchange,
    OffsetEstimate,
    corrections_from,
    estimate,
    to_apply,
)

US = 1_000
MS = 1_000_000
THETA = 250 * MS  # the receiver's clock runs this far ahead of the sender's


def exchange(
    start_ns: int, forward_ns: int, back_ns: int, serve_ns: int = 20 * US, theta: int = THETA
) -> Exchange:
    """An exchange whose request takes `forward_ns`, whose answer takes `back_ns`, against a
    receiver `theta` ahead."""
    arrived = start_ns + forward_ns
    return Exchange(
        sent_ns=start_ns,
        remote_received_ns=arrived + theta,
        remote_replied_ns=arrived + serve_ns + theta,
        returned_ns=arrived + serve_ns + back_ns,
    )


@pytest.mark.parametrize(
    ("paths", "offset_ns", "bound_ns"),
    [
        # symmetric: exact, within half the round trip
        ([(100 * US, 100 * US)], THETA, 100 * US),
        # asymmetric: off by half the asymmetry, still within the bound
        ([(300 * US, 100 * US)], THETA + 100 * US, 200 * US),
        # opposite asymmetries: the intersection is tighter than either exchange alone
        ([(300 * US, 100 * US), (100 * US, 300 * US)], THETA, 100 * US),
        # a slow exchange does not widen the estimate
        ([(100 * US, 100 * US), (5 * MS, 1 * MS)], THETA, 100 * US),
    ],
)
def test_the_estimate_is_the_middle_of_the_intersection(paths, offset_ns, bound_ns):
    exchanges = [exchange(i * MS, fwd, back) for i, (fwd, back) in enumerate(paths)]
    got = estimate(exchanges)
    assert (got.offset_ns, got.bound_ns) == (offset_ns, bound_ns)
    assert abs(got.offset_ns - THETA) <= got.bound_ns  # the truth is inside
    assert got.exchanges == len(paths)


def test_only_the_shortest_exchanges_are_kept():
    exchanges = [exchange(i * MS, (100 + 10 * i) * US, 100 * US) for i in range(20)]
    got = estimate(exchanges, keep=3)
    assert got.kept == 3
    assert got.min_delay_ns == 200 * US
    # the three kept started at 0, 1 and 2 ms; `at` is their midpoints' mean
    assert 1 * MS < got.at_ns < 2 * MS


def test_contradicting_exchanges_fall_back_to_the_shortest():
    good = exchange(0, 100 * US, 100 * US)
    # the receiver's clock stepped by 10 ms between the two: the intervals do not meet
    stepped = exchange(1 * MS, 150 * US, 150 * US, theta=THETA + 10 * MS)
    got = estimate([stepped, good])
    assert (got.offset_ns, got.bound_ns, got.kept) == (THETA, 100 * US, 1)


def test_exchanges_with_a_negative_delay_are_not_used():
    broken = Exchange(sent_ns=0, remote_received_ns=0, remote_replied_ns=5 * MS, returned_ns=1)
    assert broken.delay_ns < 0
    assert estimate([broken, exchange(0, 50 * US, 50 * US)]).offset_ns == THETA
    with pytest.raises(ValueError, match="negative delay"):
        estimate([broken])


def _at(at_ns: int, offset_ns: int, bound_ns: int = 100 * US) -> OffsetEstimate:
    return OffsetEstimate(at_ns, offset_ns, bound_ns, exchanges=32, kept=8, min_delay_ns=1)


@pytest.mark.parametrize(
    ("correction", "t_ns", "offset_ns", "drift_ns"),
    [
        (Correction(_at(0, 1 * MS)), 10**12, 1 * MS, 0),  # nothing after: constant
        (Correction(_at(0, 1 * MS), _at(10**9, 3 * MS)), 5 * 10**8, 2 * MS, 2 * MS),
        (Correction(_at(0, 1 * MS), _at(10**9, 3 * MS)), 2 * 10**9, 5 * MS, 2 * MS),  # beyond
        (Correction(_at(10**9, -1 * MS), _at(10**9, 1 * MS)), 0, -1 * MS, 2 * MS),  # same instant
    ],
)
def test_the_offset_is_interpolated_across_the_run(correction, t_ns, offset_ns, drift_ns):
    assert correction.offset_at(t_ns) == pytest.approx(offset_ns)
    assert correction.drift_ns == drift_ns


@pytest.mark.parametrize(
    ("before", "after", "significant", "bound_ns"),
    [
        (_at(0, 50 * US), None, False, 100 * US),  # within its bound: the same clock
        (_at(0, 50 * US), _at(1, -80 * US), False, 100 * US),
        (_at(0, THETA), None, True, 100 * US),
        (_at(0, 50 * US), _at(1, 150 * US, 120 * US), True, 120 * US),  # drifted out
    ],
)
def test_a_correction_is_significant_only_beyond_its_bound(before, after, significant, bound_ns):
    correction = Correction(before, after)
    assert correction.significant() is significant
    assert correction.bound_ns == bound_ns


def test_an_estimate_survives_its_document():
    got = estimate([exchange(0, 100 * US, 100 * US)])
    assert OffsetEstimate.from_doc(got.as_doc()) == got


def test_corrections_come_from_the_run_document():
    before, after = _at(0, THETA), _at(10**9, THETA + 1 * MS)
    doc = {
        "senders": {
            "0": {"url": "u", "before": before.as_doc(), "after": after.as_doc(), "errors": []},
            "1": {"url": "u", "before": before.as_doc(), "after": None, "errors": ["after: x"]},
            "2": {"url": "u", "before": None, "after": None, "errors": ["before: refused"]},
        }
    }
    assert corrections_from(doc) == {0: Correction(before, after), 1: Correction(before)}
    assert corrections_from({"offset_ns": 0}) == {}  # a run.json from before the exchanges
    assert corrections_from(None) == {}


@pytest.mark.parametrize(
    ("mode", "workers"),
    [("auto", [1]), ("on", [0, 1]), ("off", [])],
)
def test_auto_corrects_only_clocks_that_measurably_disagree(mode, workers):
    same = Correction(_at(0, 20 * US))  # one host: the estimate is noise within its bound
    skewed = Correction(_at(0, THETA))
    assert sorted(to_apply({0: same, 1: skewed}, mode)) == workers


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="auto, on, off"):
        to_apply({}, "sometimes")
