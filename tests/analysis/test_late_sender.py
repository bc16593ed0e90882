"""A late sender never hides a break (issue 25): the whole analysis on runs whose second step's
sender is late, once 30 ms with end-to-end latency climbing to seconds (the system broke: the
step breaks and says the sender was late too) and once growing later, 10 to 50 ms, with the
system's own delay flat (end-to-end latency rises 40 ms, over the rule's 20 ms, all of it the
sender's: the step is sender-limited, never a break)."""

import json

import pytest

from analysis.job import AnalyzeOptions, analyze_sut
from contract.records import RECEIVED_FIELDS, SENT_FIELDS, ReceivedRow, SentRow
from runtime.parquet import PartWriter

S, MS = 1_000_000_000, 1_000_000
T0 = 1_750_000_000 * S
STEPS = [(200, 10), (400, 10)]  # (rate, seconds); 2 s gap between them


def _run(root, late_ms: tuple[int, int], climb_to_ms: int):
    """Step 1 on time, 5 ms end to end. Step 2: slots sent late by `late_ms` (from, to, growing
    through the step), delivered 5 ms after they were sent plus a delay that grows through the
    step to `climb_to_ms`."""
    sut = root / "run-l-p" / "source-kafka"
    sent, received = (
        PartWriter(sut / "sent", SENT_FIELDS),
        PartWriter(sut / "received", RECEIVED_FIELDS),
    )
    seq, offset = 0, 0
    for number, (rate, seconds) in enumerate(STEPS, start=1):
        slots = rate * seconds
        for i in range(slots):
            intended = T0 + offset + i * S // rate
            first_ms, last_ms = late_ms
            late = (
                (first_ms * MS + (last_ms - first_ms) * MS * i // slots) if number == 2 else 100_000
            )
            queue_ns = climb_to_ms * MS * i // slots if number == 2 else 0
            sent_ns = intended + late
            eid = f"e-{seq}"
            sent.append(
                SentRow(eid, seq, number, False, False, rate, intended, sent_ns, sent_ns + MS,
                        202, None, 0, 1024)
            )  # fmt: skip
            received.append(
                ReceivedRow(eid, sent_ns + 5 * MS + queue_ns, "rx", 1024, eid, "t", "s")
            )
            seq += 1
        offset += (seconds + 2) * S
    sent.flush()
    received.flush()
    pace = {"name": "p", "steps": [{"rate_per_s": r, "duration_s": d} for r, d in STEPS]}
    run = {"run_id": "run-l", "sut": "source-kafka", "status": "completed", "pace": pace,
           "schedule": {"start_ns": T0}}  # fmt: skip
    (sut / "run.json").write_text(json.dumps(run))
    return sut


@pytest.mark.parametrize(
    ("late_ms", "climb_to_ms", "verdict", "breaking_point"),
    [((30, 30), 3000, "breaks", 400), ((10, 50), 0, "sender-limited", None)],
    ids=["latency climbs to seconds", "the system's delay flat"],
)
def test_a_late_sender_excuses_its_lateness_and_no_more(
    spark, tmp_path, late_ms, climb_to_ms, verdict, breaking_point
):
    summary = analyze_sut(spark, _run(tmp_path, late_ms, climb_to_ms), AnalyzeOptions())
    first, second = summary["steps"]
    assert first["verdict"] == "holds"
    assert second["verdict"] == verdict, second["reasons"]
    reasons = " ".join(second["reasons"])
    assert "sender lag p99" in reasons  # the sender's lateness is said either way
    if verdict == "breaks":
        assert "the sender was also short" in reasons and "e2e" in reasons
    assert summary["breaking_point_per_s"] == breaking_point
    assert summary["max_sustainable_rate_per_s"] == 200
    assert ("held every judged step" in summary["verdict"]) == (breaking_point is None)
