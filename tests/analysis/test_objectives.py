"""Objectives (`--slo`): one grammar and one judge for run, analyze and search (pure)."""

from __future__ import annotations

import pytest

from analysis.objectives import (
    applied_objectives,
    breached,
    judge,
    judge_values,
    parse_objectives,
)


@pytest.mark.parametrize(
    ("text", "scope", "parsed"),
    [
        ("e2e-p99<=200ms,lost<=0.1%", "run",
         [("e2e-p99", False, "<=", 200.0, False), ("lost", False, "<=", 0.001, True)]),
        (" step:e2e-p99.99 <= 1s ", "run", [("e2e-p99.99", True, "<=", 1000.0, False)]),
        ("breaking-point>=1500,max-sustainable>=1200/s", "run",
         [("breaking-point", False, ">=", 1500.0, False),
          ("max-sustainable", False, ">=", 1200.0, False)]),
        ("publish-max<=2s,duplicates<=0,send-failures<=1%", "run",
         [("publish-max", False, "<=", 2000.0, False), ("duplicates", False, "<=", 0.0, False),
          ("send-failures", False, "<=", 0.01, True)]),
        # a search asks every term of each probe
        ("e2e-p99<=20ms,lost<=0.05%", "probe",
         [("e2e-p99", True, "<=", 20.0, False), ("lost", True, "<=", 0.0005, True)]),
    ],
)  # fmt: skip
def test_objectives_are_read(text, scope, parsed):
    got = parse_objectives(text, scope)
    assert [(o.metric, o.per_step, o.op, o.bound, o.share) for o in got] == [
        (m, s, op, pytest.approx(b), sh) for m, s, op, b, sh in parsed
    ]


@pytest.mark.parametrize("text", ["", " ", ",", " , ,"])
def test_an_slo_with_no_term_is_refused_not_judged_as_nothing(text):
    # A CI job's --slo "$SLO" with SLO unset gated on nothing and passed (evbench issue 51).
    with pytest.raises(ValueError, match=r"holds no objective \(an unset variable\?\)"):
        parse_objectives(text)


@pytest.mark.parametrize("term", ["lost<=" + "9" * 400, "e2e-p99<=" + "9" * 400 + "ms"])
def test_a_bound_past_any_number_is_named_not_an_overflow(term):
    with pytest.raises(ValueError, match=r"its bound is too large: at most 1\.8e\+308"):
        parse_objectives(term)


@pytest.mark.parametrize(
    ("text", "scope", "says"),
    [
        ("p99<=2ms", "run", "'p99' is not one of"),
        ("e2e-p99<200ms", "run", "write NAME<=VALUE"),
        ("e2e-p99<=200", "run", "so many ms or s"),  # a latency needs its unit
        ("e2e-p99>=2ms", "run", "at most"),
        ("lost<=0.5", "run", "a whole number of events"),
        ("max-sustainable<=1200", "run", "at least so many events/s"),
        ("step:max-sustainable>=1200", "run", "the whole run's, not a step's"),
        ("step:e2e-p50<=2ms", "run", "a step keeps only"),
        ("max-sustainable>=1200", "probe", "the whole run's"),
        ("duplicates<=0", "probe", "a probe keeps only e2e-p99, lost, send-failures"),
    ],
)
def test_a_bad_objective_names_its_term_and_what_to_write(text, scope, says):
    with pytest.raises(ValueError, match=f"--slo term '{text}'") as raised:
        parse_objectives(text, scope)
    assert says in str(raised.value)


@pytest.mark.parametrize(
    ("given", "recorded", "texts", "source"),
    [
        # a re-analysis given no --slo keeps the run's (`evbench run --slo`, in run.json)
        (
            "",
            {"objectives": ["e2e-p99<=200ms", "lost<=0"]},
            ["e2e-p99<=200ms", "lost<=0"],
            "run.json",
        ),
        # new ones replace them
        ("lost<=0.1%", {"objectives": ["e2e-p99<=200ms"]}, ["lost<=0.1%"], "--slo"),
        ("lost<=0", {}, ["lost<=0"], "--slo"),
        # a run given none (or before run.json kept them) is judged on none
        ("", {}, [], None),
        ("", {"objectives": []}, [], None),
    ],
)
def test_an_analysis_judges_the_given_objectives_else_the_runs(given, recorded, texts, source):
    objectives, found = applied_objectives(parse_objectives(given) if given else (), recorded)
    assert ([o.text for o in objectives], found) == (texts, source)


@pytest.mark.parametrize(
    ("recorded", "says"),
    [
        (["e2e-p99<200ms"], "--slo term 'e2e-p99<200ms': write NAME<=VALUE"),
        ("lost<=0", "not a list of terms"),
        ([3], "not a list of terms"),
    ],
)
def test_objectives_a_run_recorded_that_do_not_read_are_named(recorded, says):
    with pytest.raises(ValueError, match=r"run\.json's objectives") as raised:
        applied_objectives((), {"objectives": recorded})
    assert says in str(raised.value)
    assert applied_objectives(parse_objectives("lost<=0"), {"objectives": recorded})[1] == "--slo"


def _step(number, rate, verdict="holds", p99=5.0, p9999=9.0, lost=0, duplicates=0, failed=0):
    return {"step": number, "target_rate_per_s": rate, "verdict": verdict, "scheduled": 1000,
            "send_failures": failed, "lost": lost, "duplicates": duplicates, "p99_e2e_ms": p99,
            "p9999_e2e_ms": p9999}  # fmt: skip


def _summary(steps, breaking=2000, sustainable=1500, failures=(), lost=3, acked=1000):
    tail = {"p50": 2.0, "p99": 12.3, "p999": 30.0, "p9999": 48.0, "max": 80.0, "n": acked}
    return {"steps": steps, "latency_ms": {"e2e": tail, "publish": {**tail, "p99": 1.5}},
            "counts": {"lost": lost, "duplicates": 0, "send_failures": 0, "scheduled": acked,
                       "acked": acked},
            "breaking_point_per_s": breaking, "max_sustainable_rate_per_s": sustainable,
            "instrument_failures": list(failures)}  # fmt: skip


STEPS = [_step(1, 1000), _step(2, 1500, p99=340.0, lost=2),
         _step(3, 2000, verdict="faulted", p99=9000.0, lost=500)]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "summary", "met", "measured", "where"),
    [
        ("e2e-p99<=200ms", _summary(STEPS), True, 12.3, "the run"),
        ("publish-p99<=1ms", _summary(STEPS), False, 1.5, "the run"),
        # every judged step: the first that breaches it; a faulted step is judged by its fault
        ("step:e2e-p99<=20ms", _summary(STEPS), False, 340.0, "step 2 (1500/s)"),
        ("step:e2e-p99<=400ms", _summary(STEPS), True, 340.0,
         "every judged step (worst: step 2 (1500/s))"),
        ("step:lost<=0", _summary(STEPS), False, 2, "step 2 (1500/s)"),
        ("step:lost<=0.5%", _summary(STEPS), True, 0.002,
         "every judged step (worst: step 2 (1500/s))"),
        ("step:lost<=0", _summary([STEPS[2]]), False, None, "no judged step"),
        ("lost<=0.1%", _summary(STEPS), False, 0.003, "the run"),
        ("lost<=3", _summary(STEPS), True, 3, "the run"),
        ("breaking-point>=1500", _summary(STEPS), True, 2000, "the run"),
        # never broke: above the highest rate that held (1,500/s), which shows >= 1,500 met
        # and >= 2,000 not; nothing judged, or an instrument failed: nothing is known
        ("breaking-point>=1500", _summary(STEPS, breaking=None), True, 1500, "the run"),
        ("breaking-point>=2000", _summary(STEPS, breaking=None), False, 1500, "the run"),
        ("breaking-point>=1", _summary([STEPS[2]], breaking=None), False, None,
         "the run: no judged step"),
        ("breaking-point>=1500", _summary(STEPS, breaking=None, failures=["receiver died"]),
         False, None, "the run: an instrument failed"),
        ("e2e-p99<=200ms", _summary(STEPS, failures=["receiver died"]), False, None,
         "the run: an instrument failed"),
        ("max-sustainable>=1600", _summary(STEPS), False, 1500, "the run"),
        ("max-sustainable>=1600", _summary(STEPS, sustainable=None), False, None, "the run"),
    ],
)  # fmt: skip
def test_each_objective_is_met_or_breached_by_the_figure_that_decides_it(
    text, summary, met, measured, where
):
    (found,) = judge(parse_objectives(text), summary)
    assert (found["met"], found["where"]) == (met, where)
    assert found["measured"] == (None if measured is None else pytest.approx(measured))
    assert found["text"].startswith(f"{text}: {'met' if met else 'BREACHED'} ({where}: ")
    assert breached([found]) == ([] if met else [found])


def test_a_probe_is_judged_on_its_own_figures():
    objectives = parse_objectives("e2e-p99<=20ms,lost<=0.05%", "probe")
    found = judge_values(objectives, {"e2e-p99": 30.0, "lost": 1, "lost%": 0.001}, "probe 3")
    assert [(f["met"], f["measured"]) for f in found] == [(False, 30.0), (False, 0.001)]
    assert found[0]["text"] == "e2e-p99<=20ms: BREACHED (probe 3: 30 ms)"
    assert found[1]["text"] == "lost<=0.05%: BREACHED (probe 3: 0.100%)"
