"""A crafted SUT directory whose every count is known, shared by the analysis tests."""

import json

from contract.records import (
    INFLIGHT_CAP_ERROR,
    RECEIVED_FIELDS,
    SENT_FIELDS,
    ReceivedRow,
    SentRow,
)
from runtime.parquet import PartWriter

S, MS = 1_000_000_000, 1_000_000
T0 = 1_750_000_000 * S
STEPS = [(200, 10), (400, 10)]  # (rate, seconds); 2 s gap between them


def sent_row(eid, seq, step, rate, intended, sent, ack, status, error, decoy=False, warmup=False):
    return SentRow(eid, seq, step, warmup, decoy, rate, intended, sent, ack, status, error, 0, 8192)


def received_row(eid, received_ns, ce_type="t", payload_bytes=8192):
    return ReceivedRow(eid, received_ns, "rx", payload_bytes, eid, ce_type, "s")


def craft(root):
    """Step 1 is clean. Step 2 loses every 20th acked event, fails every 50th, duplicates
    every 100th delivery, and sends every 20th as a decoy, of which the filter drops all but the
    first; plus 7 foreign deliveries and a warmup that must not count."""
    sut = root / "run-x-p" / "direct"
    sent_w = PartWriter(sut / "sent", SENT_FIELDS)
    recv_w = PartWriter(sut / "received", RECEIVED_FIELDS)
    seq, expected = 0, dict(sent=0, failures=0, lost=0, dup=0, acked=0, filtered=0, leaked=0)
    for i in range(50):  # warmup, delivered
        eid = f"w-{i}"
        t = T0 - 5 * S + i * 20 * MS
        sent_w.append(sent_row(eid, seq, 0, 50, t, t, t + MS, 202, None, warmup=True))
        recv_w.append(received_row(eid, t + 2 * MS, ce_type="w"))
        seq += 1
    offset = 0
    for number, (rate, seconds) in enumerate(STEPS, start=1):
        for i in range(rate * seconds):
            eid = f"e-{seq}"
            intended = T0 + offset + i * S // rate
            sent_ns = intended + 100_000
            fail = number == 2 and i % 50 == 49
            lose = number == 2 and not fail and i % 20 == 0
            cap = number == 2 and i == 1  # one slot refused by the in-flight cap
            decoy = number == 2 and i % 20 == 10

            if cap:
                row = sent_row(eid, seq, number, rate, intended, None, None, 0, INFLIGHT_CAP_ERROR)
                expected["failures"] += 1
            elif fail:
                row = sent_row(
                    eid, seq, number, rate, intended, sent_ns, sent_ns + MS, 503, "HTTP 503"
                )
                expected["failures"] += 1
                expected["sent"] += 1
            else:
                row = sent_row(
                    eid, seq, number, rate, intended, sent_ns, sent_ns + 2 * MS, 202, None, decoy
                )
                expected["sent"] += 1
                expected["acked"] += 1
                if decoy and i != 10:
                    expected["filtered"] += 1
                elif decoy:
                    expected["leaked"] += 1
                    recv_w.append(received_row(eid, intended + 5 * MS))
                elif lose:
                    expected["lost"] += 1
                else:
                    recv_w.append(received_row(eid, intended + 5 * MS))
                    if i % 100 == 7:
                        recv_w.append(received_row(eid, intended + 900 * MS))
                        expected["dup"] += 1
            sent_w.append(row)
            seq += 1
            if i % 1000 == 999:  # several part files, as a real run writes
                sent_w.flush()
                recv_w.flush()
        offset += (seconds + 2) * S
    for i in range(7):
        recv_w.append(ReceivedRow(f"other-{i}", T0 + i * S, "rx", 10, f"other-{i}", "x", "y"))
    sent_w.flush()
    recv_w.flush()
    run = {
        "run_id": "run-x",
        "sut": "direct",
        "status": "completed",
        "pace": {"name": "p", "steps": [{"rate_per_s": r, "duration_s": d} for r, d in STEPS]},
        "schedule": {"start_ns": T0},
    }
    (sut / "run.json").write_text(json.dumps(run))
    return sut, expected
