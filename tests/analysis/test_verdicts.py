"""The breaking-point rule on crafted step tables."""

import pytest

from analysis.capacity import breaking_point, search_verdict_text, verdict_text
from analysis.instrumentfail import (
    InstrumentEvidence,
    instrument_failures,
    under_instrument_failure,
)
from analysis.verdicts import (
    BREAKS,
    HOLDS,
    INSTRUMENT_FAILED,
    INSUFFICIENT,
    SENDER_LIMITED,
    StepFigures,
    Thresholds,
    Verdict,
    judge,
    slope_rise_ms,
)
from contract.errors import EvbenchError

T = Thresholds()


def fig(rate=1000, **over):
    base = dict(
        step=1,
        target_rate_per_s=rate,
        scheduled=rate * 30,
        acked=rate * 30,
        send_failures=0,
        lost=0,
        sender_ratio=1.0,
        sender_lag_p99_ms=1.2,
        delivered_rate_per_s=float(rate),
        e2e_median_ms=20.0,
        e2e_rise_ms=2.0,
    )
    base.update(over)
    return StepFigures(**base)


JUDGE = [
    ("clean step", fig(), HOLDS, ""),
    ("failures within threshold", fig(send_failures=30), HOLDS, ""),
    ("send failures", fig(send_failures=31), BREAKS, "send failures"),
    ("losses", fig(lost=31), BREAKS, "lost"),
    ("delivery falls behind", fig(delivered_rate_per_s=900.0), BREAKS, "delivered 900/s"),
    ("latency grows through the step", fig(e2e_rise_ms=25.0), BREAKS, "rose 25 ms"),
    ("rise small against a slow system", fig(e2e_median_ms=400.0, e2e_rise_ms=150.0), HOLDS, ""),
    (
        "standing queue: delivered, but seconds late",
        fig(e2e_p99_ms=2190.0, baseline_e2e_p99_ms=402.0),
        BREAKS,
        "e2e P99 2190 ms, over 2010 ms",
    ),
    ("within 5x of the first step", fig(e2e_p99_ms=2000.0, baseline_e2e_p99_ms=402.0), HOLDS, ""),
    ("fast system: the floor applies", fig(e2e_p99_ms=34.0, baseline_e2e_p99_ms=2.0), HOLDS, ""),
    ("over the floor", fig(e2e_p99_ms=101.0, baseline_e2e_p99_ms=2.0), BREAKS, "over 100 ms"),
    # No clean step before it: the absolute bar (analysis.verdicts.judge_against says when a
    # step is its own baseline instead).
    ("no baseline: the absolute bar", fig(e2e_p99_ms=5000.0), BREAKS, "the absolute bar"),
    ("no baseline, under the bar", fig(e2e_p99_ms=99.0), HOLDS, ""),
    ("sender lagging", fig(sender_lag_p99_ms=25.0), SENDER_LIMITED, "lag p99 25.0 ms"),
    ("sender short of the pace", fig(sender_ratio=0.9), SENDER_LIMITED, "90.0%"),
    # A late sender excuses what its lateness explains, and nothing more (issue 25's case:
    # source-kafka at 2000/s, sender lag p99 37 ms, end-to-end P99 seconds).
    (
        "late sender, latency climbing to seconds",
        fig(sender_lag_p99_ms=37.0, sender_ratio=0.9997, e2e_rise_ms=2900.0),
        BREAKS,
        "rose 2900 ms through the step the sender was also short: sender lag p99 37.0 ms",
    ),
    (
        "late sender, a standing queue of seconds",
        fig(sender_lag_p99_ms=30.0, e2e_p99_ms=8070.0, baseline_e2e_p99_ms=20.0),
        BREAKS,
        "e2e P99 8070 ms",
    ),
    ("late sender, flat latency", fig(sender_lag_p99_ms=30.0, e2e_rise_ms=5.0), SENDER_LIMITED, ""),
    (
        "late sender explains its own lateness in the P99",
        fig(sender_lag_p99_ms=30.0, e2e_p99_ms=180.0, baseline_e2e_p99_ms=2.0),
        SENDER_LIMITED,
        "lag p99 30.0 ms",
    ),
    (
        "late sender explains a rise of its own order",
        fig(sender_lag_p99_ms=30.0, e2e_rise_ms=100.0),
        SENDER_LIMITED,
        "",
    ),
    (
        "short sender: its own in-flight cap's refusals are its own",
        fig(sender_ratio=0.8, send_failures=9000, inflight_cap_refused=9000),
        SENDER_LIMITED,
        "80.0%",
    ),
    (
        "short sender: the system's own failures beside the cap's",
        fig(sender_ratio=0.8, send_failures=9500, inflight_cap_refused=9000),
        BREAKS,
        "500 send failures",
    ),
    (
        "on pace, the cap's refusals are the system's slowness",
        fig(send_failures=9000, inflight_cap_refused=9000),
        BREAKS,
        "9000 send failures",
    ),
    (
        "late sender cannot excuse failures",
        fig(sender_lag_p99_ms=25.0, send_failures=5000),
        BREAKS,
        "5000 send failures",
    ),
    (
        "short sender: the system delivered what it was offered",
        fig(sender_ratio=0.9, delivered_rate_per_s=890.0),
        SENDER_LIMITED,
        "90.0%",
    ),
    (
        "short sender: the system delivered half of it",
        fig(sender_ratio=0.9, delivered_rate_per_s=450.0),
        BREAKS,
        "delivered 450/s of 900/s",
    ),
    ("short sender, few events", fig(sender_ratio=0.5, scheduled=60), SENDER_LIMITED, "50.0%"),
    (
        "too few samples",
        fig(rate=2, scheduled=60, acked=60, delivered_rate_per_s=2.0),
        INSUFFICIENT,
        "60 events",
    ),
]


@pytest.mark.parametrize(
    ("name", "figures", "expected", "reason"), JUDGE, ids=[j[0] for j in JUDGE]
)
def test_judge(name, figures, expected, reason):
    verdict = judge(figures, T)
    assert verdict.verdict == expected
    assert reason in " ".join(verdict.reasons)


def steps(*pairs):
    return [Verdict(i, rate, kind) for i, (rate, kind) in enumerate(pairs, start=1)]


H, B, S, N = HOLDS, BREAKS, SENDER_LIMITED, INSUFFICIENT
POINTS = [
    ("everything holds", steps((1000, H), (1500, H), (2000, H)), (None, 2000)),
    ("breaks at 1300", steps((1000, H), (1100, H), (1200, H), (1300, B), (1400, B)), (1300, 1200)),
    (
        "cool-down drains the backlog",
        steps((1000, H), (1400, H), (1500, B), (100, B), (1600, B)),
        (1500, 1400),
    ),
    ("cool-down that holds resets", steps((1000, H), (1500, B), (100, H), (1200, B)), (1200, 1000)),
    ("sender-limited is never a break", steps((1000, H), (1900, S), (2000, S)), (None, 1000)),
    ("too few samples is never a break", steps((10, N), (1000, H)), (None, 1000)),
    ("a holding step above the break does not count", steps((1000, B), (2000, H)), (1000, None)),
    (
        "the 2019 IMC broker",
        steps(*[(r, H) for r in range(1000, 1900, 100)], (1900, B), (2000, B)),
        (1900, 1800),
    ),
]


@pytest.mark.parametrize(("name", "verdicts", "expected"), POINTS, ids=[p[0] for p in POINTS])
def test_breaking_point(name, verdicts, expected):
    assert breaking_point(verdicts) == expected


@pytest.mark.parametrize(
    ("seconds", "values", "expected"),
    [
        ([0, 1, 2, 3], [10, 10, 10, 10], 0.0),
        ([0, 1, 2, 3], [10, 20, 30, 40], 30.0),
        ([0, 1], [1, 2], None),
        ([5, 5, 5], [1, 2, 3], None),
    ],
)
def test_slope_rise(seconds, values, expected):
    assert slope_rise_ms(seconds, values) == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "JSON object"),
        ("{nope", "not JSON"),
        ('{"max_loss": 1}', "unknown thresholds max_loss"),
        ('{"max_lost_ratio": "x"}', "non-negative number"),
        ('{"min_events": -1}', "non-negative"),
    ],
)
def test_thresholds_file_errors_name_the_problem(text, message):
    with pytest.raises(EvbenchError, match=message):
        Thresholds.from_json(text, "t.json")


def test_thresholds_file_overrides_only_what_it_names():
    t = Thresholds.from_json('{"max_lost_ratio": 0.05, "min_events": 10}')
    assert (t.max_lost_ratio, t.min_events) == (0.05, 10)
    assert t.max_send_failure_ratio == Thresholds().max_send_failure_ratio
    assert judge(fig(lost=1000), t).verdict == HOLDS  # 1000 of 30000 acked is within 5 %


@pytest.mark.parametrize(
    ("point", "sustainable", "text"),
    [
        (1300, 1200, "breaks at 1300/s; max sustainable 1200/s"),
        (1000, None, "breaks at 1000/s; no step held below it on the way up"),
        (None, 2000, "held every judged step; max sustainable 2000/s"),
        (None, None, "no step could be judged"),
    ],
)
def test_verdict_text(point, sustainable, text):
    assert verdict_text(point, sustainable).startswith(text)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_thresholds_must_be_finite(value):
    # json.loads takes these; a NaN threshold judged 500 of 500 lost as "held".
    with pytest.raises(EvbenchError, match=r"--thresholds t.json: max_lost_ratio must be a finite"):
        Thresholds.from_json(f'{{"max_lost_ratio": {value}}}', "--thresholds t.json")


def evidence(**over):
    base = dict(
        run_status="completed",
        recorded_failures=(),
        sent_files=3,
        received_files=3,
        sender_reported_sent=1000,
        receiver_reported_received=1000,
        acked=1000,
        acked_decoys=0,
        deliveries=1000,
    )
    base.update(over)
    return InstrumentEvidence(**base)


INSTRUMENTS = [
    ("healthy run", evidence(), []),
    ("interrupted is not a failure", evidence(run_status="interrupted"), []),
    (
        "the runner's own finding",
        evidence(run_status="failed", recorded_failures=("receiver died during the run",)),
        ["receiver died during the run"],
    ),
    ("failed without a reason (older run.json)", evidence(run_status="failed"), ["run failed"]),
    ("the runner itself died", evidence(run_status="running"), ["never finished"]),
    ("no sent/", evidence(sent_files=0), ["no sent records in sent/ although the sender rep"]),
    (
        "no sent/ and no sender summary",
        evidence(sent_files=0, sender_reported_sent=None),
        ["no sent"],
    ),
    (
        "no received/ although the receiver counted",
        evidence(received_files=0, deliveries=0),
        ["no received records in received/ although the receiver counted 1000"],
    ),
    (
        "nothing received although acked, nothing connected",
        evidence(received_files=0, deliveries=0, receiver_reported_received=0),
        ["nothing received although 1000 events were acked"],
    ),
    (
        "direct: the receiver acked what it did not record",
        evidence(
            deliveries=0, receiver_reported_received=0, direct=True, receiver_delivery_attempts=4
        ),
        ["nothing received although 1000 events were acked"],
    ),
    # A system that broke, not an instrument: its steps say "breaks".
    (
        "the system's dispatcher died",
        evidence(deliveries=0, receiver_reported_received=0, sut_processes_died=True),
        [],
    ),
    (
        "the system connected and delivered nothing usable",
        evidence(deliveries=0, receiver_reported_received=0, receiver_delivery_attempts=3),
        [],
    ),
    (
        "a system that refused everything",
        evidence(acked=0, received_files=0, deliveries=0, receiver_reported_received=0),
        [],
    ),
    ("every acked event a filtered decoy", evidence(acked_decoys=1000, deliveries=0), []),
    ("foreign deliveries are deliveries", evidence(deliveries=5), []),
    (
        "a fan-out's subscription wired to the wrong path",
        evidence(stray_deliveries=900, silent_subscribers=("/subscriber-2",)),
        ["nothing came to /subscriber-2 although 900 deliveries came to paths no subscriber"],
    ),
    # A subscriber that got nothing, with nothing astray: the system lost its share.
    ("a silent subscriber, nothing astray", evidence(silent_subscribers=("/subscriber-2",)), []),
    # ... unless another got each event twice: two subscriptions on one subscriber's path.
    (
        "two subscriptions wired to one path",
        evidence(
            silent_subscribers=("/subscriber-2",), doubled_subscribers=(("/subscriber-1", 2.0),)
        ),
        [
            "nothing came to /subscriber-2 while /subscriber-1 got each event 2 times: "
            "subscriptions wired to one subscriber's path"
        ],
    ),
    (
        "one of three subscribers silent, another getting its events too",
        evidence(
            silent_subscribers=("/subscriber-3",), doubled_subscribers=(("/subscriber-1", 1.95),)
        ),
        ["nothing came to /subscriber-3 while /subscriber-1 got each event 1.95 times"],
    ),
    (
        "every event twice, none silent: the system's duplicates",
        evidence(doubled_subscribers=(("/subscriber-1", 2.0),)),
        [],
    ),
    (
        "deliveries astray and one doubled: said once, as astray",
        evidence(
            stray_deliveries=900,
            silent_subscribers=("/subscriber-2",),
            doubled_subscribers=(("/subscriber-1", 2.0),),
        ),
        ["although 900 deliveries came to paths no subscriber has"],
    ),
    ("deliveries astray, every subscriber served", evidence(stray_deliveries=3), []),
]


@pytest.mark.parametrize(
    ("name", "found", "expected"), INSTRUMENTS, ids=[case[0] for case in INSTRUMENTS]
)
def test_instrument_failures(name, found, expected):
    failures = instrument_failures(found)
    assert len(failures) == len(expected)
    for failure, part in zip(failures, expected, strict=True):
        assert part in failure


def test_an_instrument_failure_turns_breaks_into_instrument_failed_and_names_no_break():
    judged = steps((1000, H), (1500, B), (2000, S))
    assert under_instrument_failure(judged, ()) == judged
    after = under_instrument_failure(judged, ("receiver died",))
    assert [v.verdict for v in after] == [HOLDS, INSTRUMENT_FAILED, SENDER_LIMITED]
    assert breaking_point(after)[0] is None
    assert verdict_text(1500, 1000, ("receiver died", "x")) == "instrument failed: receiver died; x"


def _searched(found, held, broke, workers=None, why="gave up after 30 probes"):
    return {
        "max_sustainable_per_s": found,
        "highest_hold_per_s": held,
        "lowest_break_per_s": broke,
        "workers_needed": workers,
        "why": why,
    }


@pytest.mark.parametrize(
    ("result", "text"),
    [
        (_searched(730, 730, 760), "searched: max sustainable 730/s (held 730/s, broke 760/s)"),
        (_searched(3000, 3000, None), "searched: max sustainable 3000/s (the highest rate"),
        (_searched(None, 16000, None, 2), "searched: the sender was the limit, not the system"),
        (_searched(None, None, 100), "searched: no rate confirmed (gave up after 30 probes)"),
    ],
)
def test_search_verdict_text(result, text):
    assert search_verdict_text(result).startswith(text)


def test_an_unfinished_search_names_no_rate():
    text = search_verdict_text({}, "interrupted")
    assert text == "searched: the search did not finish (interrupted), no rate confirmed"
