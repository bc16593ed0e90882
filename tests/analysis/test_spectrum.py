"""The percentile spectrum (pure): each point exact where the kept top values reach its rank,
the digest's elsewhere, none past the samples; drawn on log axes labelled in percentiles."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.digests import digest_of
from analysis.spectrum import (
    RUN,
    SPECTRUM_QUANTILES,
    line_names,
    spectrum_doc,
    spectrum_figure,
    spectrum_points,
    systems_spectrum,
)


def _sketch(values, kept):
    values = np.asarray(values, dtype=float)
    return digest_of(values), np.sort(values)[::-1][:kept]


@pytest.mark.parametrize(
    ("n", "kept", "quantiles", "exact"),
    [
        # 100,000 samples: P99.999 is the 2nd largest; the top 1,024 reach P99 (the 1,001st)
        (100_000, 1024, SPECTRUM_QUANTILES, {0.99, 0.999, 0.9999, 0.99999}),
        # 10,000: P99.999 is past the samples (q > 1 - 1/n), left out
        (10_000, 1024, SPECTRUM_QUANTILES[:-1], {0.9, 0.99, 0.999, 0.9999}),
        # no top values kept: every point the digest's
        (10_000, 0, SPECTRUM_QUANTILES[:-1], set()),
    ],
)
def test_each_point_says_whether_it_is_an_exact_order_statistic(n, kept, quantiles, exact):
    values = np.random.default_rng(7).exponential(5.0, n)
    points = spectrum_points(*_sketch(values, kept))
    *percentiles, highest = points
    assert [p["q"] for p in percentiles] == list(quantiles)
    assert {p["q"] for p in percentiles if p["exact"]} == exact
    for p in percentiles:  # exact ones are numpy's; every one at its rank, within 0.5 %
        if p["exact"]:
            assert p["ms"] == pytest.approx(float(np.quantile(values, p["q"])), abs=1e-4)
        assert abs(np.mean(values <= p["ms"]) - p["q"]) < 0.005 + 2 / n
    assert highest["max"] and highest["ms"] == pytest.approx(values.max(), abs=1e-4)
    assert highest["q"] == pytest.approx(1 - 1 / n)
    assert [p["ms"] for p in points] == sorted(p["ms"] for p in points)


def test_a_run_has_a_line_per_step_and_one_for_the_whole_run():
    rng = np.random.default_rng(3)
    sketches = {
        ("e2e", 1): _sketch(rng.exponential(2.0, 2000), 1024),
        ("e2e", 2): _sketch(rng.exponential(8.0, 4000), 1024),
        ("e2e", 0): _sketch(rng.exponential(50.0, 500), 500),  # a warm-up: never a line
        ("sender_lag", 1): _sketch(rng.exponential(0.1, 2000), 1024),
    }
    doc = spectrum_doc(sketches)
    assert list(doc) == ["e2e"] and list(doc["e2e"]) == ["1", "2", RUN]
    run_max = doc["e2e"][RUN][-1]
    assert run_max["ms"] == max(doc["e2e"]["1"][-1]["ms"], doc["e2e"]["2"][-1]["ms"])
    assert run_max["q"] == pytest.approx(1 - 1 / 6000)
    steps = [{"step": 1, "target_rate_per_s": 100}, {"step": 2, "target_rate_per_s": 200}]
    figure = spectrum_figure(doc["e2e"], line_names(steps), "e2e")
    assert [t.name for t in figure.data] == ["step 1 (100/s)", "step 2 (200/s)", "the run"]
    assert figure.layout.xaxis.type == "log" and figure.layout.yaxis.type == "log"
    assert list(figure.layout.xaxis.ticktext) == ["50%", "90%", "99%", "99.9%", "99.99%",
                                                  "99.999%"]  # fmt: skip
    assert list(figure.data[0].x)[:4] == pytest.approx([2, 4, 10, 100])  # 1/(1-q)
    assert figure.data[2].text[-1] == "max (exact)" and "P99.9 (exact)" in figure.data[0].text
    summaries = [{"sut": "a", "spectrum": doc}, {"sut": "b"}]  # b analysed before spectra
    assert [t.name for t in systems_spectrum(summaries).data] == ["a"]
    assert systems_spectrum([{"sut": "b"}]) is None
