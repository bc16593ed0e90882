"""What summary.json says about the clocks (pure)."""

import pytest

from analysis.summary import clock_summary
from contract.documents import problems
from contract.summarydocs import ClockSummaryDoc
from runtime.clocks import Correction, OffsetEstimate

MS = 1_000_000


def _c(offset_ns, bound_ns=40_000, after_ns=None):
    before = OffsetEstimate(0, offset_ns, bound_ns, 32, 8, 1)
    after = None if after_ns is None else OffsetEstimate(10**9, after_ns, bound_ns, 32, 8, 1)
    return Correction(before, after)


@pytest.mark.parametrize(
    ("offsets", "applied", "mode", "note"),
    [
        ({}, {}, "auto", "not corrected: no clock offsets were measured"),
        ({0: _c(10_000)}, {}, "auto", "not corrected: the measured offsets are within their"),
        ({0: _c(250 * MS)}, {}, "off", "not corrected: --clock-correction off"),
        (
            {0: _c(250 * MS, after_ns=251 * MS), 1: _c(5_000)},
            {0: _c(250 * MS, after_ns=251 * MS)},
            "auto",
            "corrected for the clock offset of sender worker(s) 0, within ±0.040 ms",
        ),
    ],
)
def test_the_summary_says_what_was_done(offsets, applied, mode, note):
    totals = [{"negative_e2e": 2}, {"negative_e2e": None}, {}]
    doc = clock_summary(offsets, applied, mode, totals)
    assert problems(doc, ClockSummaryDoc) == []
    assert note in doc["note"]
    assert doc["applied"] is bool(applied) and doc["negative_e2e"] == 2
    assert sorted(doc["workers"]) == sorted(str(w) for w in offsets)
    for worker, figures in doc["workers"].items():
        assert figures["applied"] is (int(worker) in applied)
    if 0 in applied:
        assert doc["workers"]["0"]["drift_ns"] == 1 * MS
