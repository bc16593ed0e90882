"""A search probe judged from its records without Spark (pure)."""

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

from analysis.hostload import HostLoad
from analysis.objectives import parse_objectives
from analysis.verdicts import Thresholds
from evbench.probejudge import (
    baseline_e2e_p99_ms,
    probe_figures,
    verdict_of,
    with_objectives,
)


@dataclass(frozen=True)
class ProbeRecords:
    """A probe's sent rows (as arrays) with each event's first delivery (-1: none), made into
    the events the judge reads from files (analysis.tasks.files_events)."""

    intended_ns: np.ndarray
    sent_ns: np.ndarray  # -1: never sent (in-flight cap)
    status: np.ndarray
    decoy: np.ndarray
    received_ns: np.ndarray  # -1: never delivered
    # The slots the in-flight cap refused; None: every slot never sent (the sender handled
    # every slot of a probe: sent it or refused it at its own time).
    inflight_cap_refused: np.ndarray | None = None

    def events(self, step: int, rate_per_s: int) -> pa.Table:
        """The probe as a step's events (analysis.steprule.INPUT_COLUMNS)."""
        rows = len(self.intended_ns)
        sent = self.sent_ns >= 0
        received = self.received_ns >= 0
        refused = ~sent if self.inflight_cap_refused is None else self.inflight_cap_refused
        return pa.table(
            {
                "step": pa.array(np.full(rows, step), pa.int32()),
                "target_rate_per_s": pa.array(np.full(rows, rate_per_s), pa.int32()),
                "intended_ns": pa.array(self.intended_ns, pa.int64()),
                "sent_ns": pa.array(self.sent_ns, pa.int64(), mask=~sent),
                # Not read by the rule's figures (publish latency is not judged).
                "ack_ns": pa.nulls(rows, pa.int64()),
                "received_ns": pa.array(self.received_ns, pa.int64(), mask=~received),
                "status": pa.array(self.status, pa.int32()),
                "decoy": pa.array(np.asarray(self.decoy, dtype=bool)),
                "deliveries": pa.array(received.astype(np.int64)),
                "inflight_cap_refused": pa.array(np.asarray(refused, dtype=bool)),
            }
        )


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


NO_OBJECTIVE = ()


def _probe(text):
    return parse_objectives(text, "probe")


def verdict(r, objective=NO_OBJECTIVE, baseline=None):
    figures = probe_figures(r.events(3, RATE), 3, RATE, SECONDS, baseline)
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
    _, v = verdict(records(latency_ms=lambda i: 30.0), _probe("e2e-p99<=20ms"))
    assert v.verdict == "breaks"
    assert v.reasons == ("the objective e2e-p99<=20ms: BREACHED (probe 3: 30 ms)",)
    # one lost of 1000 is within the rule's 0.1 %, not within an objective of 0.05 %
    _, v = verdict(records(lost_every=1000))
    assert v.verdict == "holds"
    _, v = verdict(records(lost_every=1000), _probe("lost<=0.05%"))
    assert v.verdict == "breaks" and "lost<=0.05%: BREACHED (probe 3: 0.100%)" in v.reasons[0]


def test_where_the_system_is_the_instruments_a_break_is_theirs():
    figures, _ = verdict(records(lost_every=10))
    v = verdict_of(figures, Thresholds(), NO_OBJECTIVE, instruments_only=True)
    assert v.verdict == "sender-limited" and "100 lost of 1000 acked" in v.reasons[0]
    assert "the system is the instruments" in v.reasons[-1]
    # a miss of the objective is the instruments' too (their latency, not the system's)
    slow, _ = verdict(records(latency_ms=lambda i: 30.0))
    missed = verdict_of(slow, Thresholds(), _probe("e2e-p99<=20ms"), instruments_only=True)
    assert missed.verdict == "sender-limited" and "e2e-p99<=20ms: BREACHED" in missed.reasons[0]
    held, _ = verdict(records())  # a probe that holds is not touched
    assert verdict_of(held, Thresholds(), NO_OBJECTIVE, instruments_only=True).verdict == "holds"


BUSY = HostLoad(cpus=2, busy_ratio=1.0, others_ratio=0.5, steal_ratio=0.0, samples=5)
QUIET = HostLoad(cpus=2, busy_ratio=0.5, others_ratio=0.01, steal_ratio=0.0, samples=5)


@pytest.mark.parametrize(
    ("earlier", "baseline"),
    [
        ([], None),
        ([("breaks", 90.0, None)], None),  # no probe held yet: none (a broken one is no bar)
        ([("sender-limited", 900.0, None)], None),  # nor one the sender could not keep
        ([("breaks", 90.0, None), ("holds", 4.0, None), ("holds", 6.0, None)], 4.0),
        ([("sender-limited", 3.0, None), ("holds", 5.0, None)], 5.0),
        ([("holds", None, None)], None),  # held without deliveries to time
        ([("holds", 7.0, BUSY), ("holds", 5.0, QUIET)], 5.0),  # held on a crowded host: not clean
    ],
)
def test_the_baseline_is_the_first_clean_probe(earlier, baseline):
    assert baseline_e2e_p99_ms(earlier, Thresholds()) == baseline


def _as_analysed(r, step, start_ns, tmp_path):
    """The step's figures as the run's analysis reaches them: the Spark job's per-step function
    (analysis.steps.aggregate_step, run here on the group directly), its driver-side merge and
    the summary's step row."""
    from analysis.job import from_steps
    from analysis.stepjudge import tail as _tail
    from analysis.steprule import StepTails, step_figures
    from analysis.steps import StepContext, aggregate_step

    events = r.events(step, RATE)
    events = events.add_column(0, "sut", pa.array(["s0"] * events.num_rows))
    context = StepContext({"s0": start_ns}, {"s0": S}, str(tmp_path))
    found = from_steps(aggregate_step(events, context=context), {"s0": start_ns})
    sketches = found.findings("s0").sketches
    medians = [(p["second"], p["p50_ms"]) for p in found.e2e_points["s0"]]
    tails = StepTails(_tail(sketches, "e2e", step), _tail(sketches, "sender_lag", step), medians)
    return step_figures(found.totals["s0"][0], tails, SECONDS, None)


@pytest.mark.parametrize(
    "r",
    [
        records(),
        records(lost_every=7),
        records(latency_ms=lambda i: 2 + (i % 97) * 0.3),
        records(lag_ns=lambda i: (i % 13) * 1_000_000),
    ],
)
def test_a_probe_gets_the_figures_the_runs_analysis_gets(r, tmp_path):
    # One rule (analysis.steprule): the probe judge and the Spark job's per-step pass compute
    # the same figures, so a probe on a threshold cannot hold in one and break in the other.
    start_ns = T0 - 300 * MS  # the run's schedule start, not on the probe's first slot
    probe = probe_figures(r.events(3, RATE), 3, RATE, SECONDS, None, schedule_start_ns=start_ns)
    assert probe == _as_analysed(r, 3, start_ns, tmp_path)


def test_a_probe_without_records_is_sender_limited():
    empty = ProbeRecords(*(np.zeros(0, dtype=np.int64) for _ in range(5)))
    _, v = verdict(empty)
    assert v.verdict == "sender-limited"


def test_slots_refused_by_the_in_flight_cap_count_as_handled():
    r = records()
    sent = r.sent_ns.copy()
    sent[::2] = -1  # half refused by the cap, at their own time: the pace was kept
    refused = ProbeRecords(r.intended_ns, sent, r.status, r.decoy, r.received_ns)
    assert probe_figures(
        refused.events(3, RATE), 3, RATE, SECONDS, None
    ).sender_ratio == pytest.approx(1.0, 0.01)
    stopped = ProbeRecords(
        r.intended_ns, sent, r.status, r.decoy, r.received_ns, np.zeros(len(sent), dtype=bool)
    )
    # never sent and not refused (a stop): those slots were not handled
    assert probe_figures(stopped.events(3, RATE), 3, RATE, SECONDS, None).sender_ratio < 0.6


def _outage(seconds, down, answered_after=None):
    """A probe of `seconds` at RATE whose system failed every send due in `down` (s, s) and,
    from `answered_after` on, delivered only every other event."""
    n = RATE * seconds
    intended = T0 + np.arange(n, dtype=np.int64) * S // RATE
    due_s = (intended - T0) / S
    failed = (due_s >= down[0]) & (due_s < down[1])
    received = intended + 2 * MS
    received[failed] = -1
    if answered_after is not None:
        received[(due_s >= answered_after) & (np.arange(n) % 2 == 1)] = -1
    status = np.where(failed, 503, 202).astype(np.int32)
    return ProbeRecords(intended, intended + 50_000, status, np.zeros(n, dtype=bool), received)


def _killed(at_s, back_s, step=3):
    return {"spec": "every@2s:kill:channel", "step": step, "offset_s": at_s, "action": "kill",
            "target": "channel", "duration_s": None, "due_ns": T0 + int(at_s * S),
            "at_ns": T0 + int(at_s * S), "back_ns": T0 + int(back_s * S), "pids": [1, 2],
            "error": None}  # fmt: skip


@pytest.mark.parametrize(
    ("records_", "back_s", "judged", "recovered_after_s", "window"),
    [
        # down from 2 s to 3 s, whole again from 3 s: three healthy seconds from its return
        (_outage(8, (2.0, 3.0)), 3.0, "holds", 1.0, (200, 200, 0, None)),
        # back at 3 s but delivering half the pace to the probe's end: never recovered
        (_outage(8, (2.0, 3.0), answered_after=3.0), 3.0, "breaks", None, (1200, 200, 500, 2.0)),
        # back, but too late in the probe for three whole seconds: not within it
        (_outage(6, (2.0, 4.0)), 4.0, "breaks", None, (800, 400, 0, 2.0)),
    ],
)  # fmt: skip
def test_a_probe_with_a_fault_holds_when_the_system_recovered_within_it(
    records_, back_s, judged, recovered_after_s, window
):
    from analysis.faultsteps import judged_by_recovery
    from evbench.probejudge import probe_ledgers

    events = records_.events(3, RATE)
    fault = _killed(2.0, back_s)
    (ledger,) = probe_ledgers(events, [fault], T0)
    assert ledger.first_second == 2 and ledger.recovered_after_s == recovered_after_s
    # every delivery took 2 ms (none in the first case's window)
    counts = (ledger.scheduled, ledger.send_failures, ledger.lost, ledger.peak_e2e_p99_ms)
    assert counts == window
    figures = probe_figures(events, 3, RATE, events.num_rows // RATE, None)
    rule = verdict_of(figures, Thresholds(), NO_OBJECTIVE)
    assert rule.verdict == "breaks"  # its send failures, by the step rule alone
    found = judged_by_recovery(rule, [fault], [ledger])
    said = "recovered 1.0 s after it" if recovered_after_s else "not recovered within its step"
    assert found.verdict == judged and said in found.reasons[0]
    assert found.reasons[1] == "by the step rule alone: breaks"
    # a probe that recovered still answers to the user's objectives: a miss breaks it, said
    # first (one that did not recover has broken already)
    objective = with_objectives(found, figures, _probe("send-failures<=0"))
    assert objective.verdict == "breaks"
    if judged == "holds":
        said = "the objective send-failures<=0: BREACHED (probe 3: "
        assert objective.reasons[0].startswith(said) and objective.reasons[1:] == found.reasons
    else:
        assert objective == found
    # a fault the probe ended before: the rule's verdict, untouched
    not_done = {**fault, "at_ns": None, "back_ns": None}
    assert judged_by_recovery(rule, [not_done], [None]) == rule
