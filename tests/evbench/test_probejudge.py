"""A search probe judged from its records without Spark (pure)."""

import numpy as np
import pytest

from analysis.verdicts import Thresholds
from evbench.probejudge import Objective, ProbeRecords, parse_objective, probe_figures, verdict_of

S, MS = 1_000_000_000, 1_000_000
T0 = 1_750_000_000 * S
RATE, SECONDS = 200, 5


def records(latency_ms=lambda i: 2.0, lag_ns=lambda i: 50_000, lost_every=0, status=202):
    n = RATE * SECONDS
    intended = T0 + np.arange(n, dtype=np.int64) * S // RATE
    sent = intended + np.array([lag_ns(i) for i in range(n)], dtype=np.int64)
    received = intended + np.array([int(latency_ms(i) * MS) for i in range(n)], dtype=np.int64)
    if lost_every:
        received[::lost_every] = -1
    return ProbeRecords(
        intended, sent, np.full(n, status, dtype=np.int32), np.zeros(n, dtype=bool), received
    )


NO_OBJECTIVE = Objective()


def verdict(r, objective=NO_OBJECTIVE, baseline=None):
    figures = probe_figures(r, 3, RATE, SECONDS, baseline)
    return figures, verdict_of(figures, Thresholds(), objective)


def test_a_healthy_probe_holds_with_exact_figures():
    figures, v = verdict(records())
    assert v.verdict == "holds" and v.step == 3
    assert (figures.scheduled, figures.acked, figures.lost) == (1000, 1000, 0)
    assert figures.e2e_p99_ms == pytest.approx(2.0) and figures.delivered_rate_per_s == 200
    assert figures.sender_ratio == pytest.approx(1.0, abs=0.001)


@pytest.mark.parametrize(
    ("r", "verdict_is", "reason"),
    [
        (records(lost_every=10), "breaks", "100 lost of 1000 acked"),
        (records(latency_ms=lambda i: 2 + i * 0.2), "breaks", "e2e latency rose"),
        (records(status=503), "breaks", "1000 send failures of 1000"),
        # each slot later than the last: the sender could not keep the pace
        (records(lag_ns=lambda i: i * 5 * MS), "sender-limited", "sender"),
    ],
)
def test_the_reports_rule_decides(r, verdict_is, reason):
    _, v = verdict(r)
    assert v.verdict == verdict_is
    assert any(reason in text for text in v.reasons), v.reasons


def test_a_probe_that_holds_but_misses_the_objective_breaks_with_its_reason():
    _, v = verdict(records(latency_ms=lambda i: 30.0), parse_objective("e2e-p99<=20ms"))
    assert v.verdict == "breaks" and v.reasons == ("e2e P99 30.0 ms over the objective's 20 ms",)
    # one lost of 1000 is within the rule's 0.1 %, not within an objective of 0.05 %
    _, v = verdict(records(lost_every=1000))
    assert v.verdict == "holds"
    _, v = verdict(records(lost_every=1000), parse_objective("lost<=0.05%"))
    assert v.verdict == "breaks" and "over the objective's 0.05%" in v.reasons[0]


@pytest.mark.parametrize(
    ("text", "objective"),
    [
        ("e2e-p99<=200ms,lost<=0.1%", Objective(200.0, 0.001)),
        ("lost<=1%", Objective(None, 0.01)),
        (" e2e-p99 <= 50ms ", Objective(50.0, None)),
        ("", Objective()),
    ],
)
def test_objectives(text, objective):
    got = parse_objective(text)
    assert got.e2e_p99_ms == objective.e2e_p99_ms
    assert got.lost_ratio == pytest.approx(objective.lost_ratio)


@pytest.mark.parametrize("text", ["p99<=2ms", "e2e-p99<200ms", "lost<=0.1", "latency fast"])
def test_a_bad_objective_names_its_term(text):
    with pytest.raises(ValueError, match="--slo term"):
        parse_objective(text)
