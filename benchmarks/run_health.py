"""Health of one recorded run, straight from its Parquet files (no Spark): does the harness hold?

Per step: target vs achieved send rate, sender lag p99, send failures, lost (acked, never
received) and duplicates; per process: RSS at the start and end of each step and overall.

    .venv/bin/python benchmarks/run_health.py runs/run-1-1k-2k/direct
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contract.records import PROCESS_SAMPLE_FIELDS, RECEIVED_FIELDS, SENT_FIELDS
from runtime.formulas import achieved_rate_per_s, percentile
from runtime.parquet import read_parts


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    sut_dir = Path(sys.argv[1])
    run = json.loads((sut_dir / "run.json").read_text())
    sent = read_parts(sut_dir / "sent", SENT_FIELDS)
    received = read_parts(sut_dir / "received", RECEIVED_FIELDS)
    samples = read_parts(sut_dir / "samples", PROCESS_SAMPLE_FIELDS).to_pylist()

    received_ids = received.column("event_id").to_pylist()
    deliveries: dict[str, int] = {}
    for eid in received_ids:
        deliveries[eid] = deliveries.get(eid, 0) + 1
    duplicates = sum(n - 1 for n in deliveries.values())

    print(f"{sut_dir}: status {run['status']}, pace {run['pace']['spec']}")
    print(
        f"{'step':>4} {'target/s':>8} {'achieved/s':>10} {'%':>7} {'lag p99':>8} {'fail':>5} "
        f"{'lost':>5} {'dup':>4}   RSS MB sender / receiver (start->end)"
    )
    start_ns = run["schedule"]["start_ns"]
    spans = []
    for step in sorted(set(sent.column("step").to_pylist())):
        rows = sent.filter(pc.equal(sent.column("step"), step)).to_pylist()
        rate = rows[0]["target_rate_per_s"]
        step_start = min(r["intended_ns"] for r in rows)
        step_end = max(r["intended_ns"] for r in rows)
        spans.append((step, step_start, step_end))
        sent_rows = [r for r in rows if r["sent_ns"] is not None]
        achieved = achieved_rate_per_s(
            len(sent_rows), step_start, max((r["sent_ns"] for r in sent_rows), default=None), rate
        )
        lags = sorted(r["sent_ns"] - r["intended_ns"] for r in sent_rows)
        failures = sum(1 for r in rows if not 200 <= r["status"] < 300)
        lost = sum(1 for r in rows if 200 <= r["status"] < 300 and r["event_id"] not in deliveries)
        dup = sum(deliveries.get(r["event_id"], 1) - 1 for r in rows)
        rss = {}
        for role in ("sender", "receiver"):
            inside = [
                s["rss_bytes"]
                for s in samples
                if s["process"] == role and step_start <= s["t_ns"] <= step_end
            ]
            rss[role] = f"{inside[0] / 2**20:.0f}->{inside[-1] / 2**20:.0f}" if inside else "-"
        lag_p99 = percentile(lags, 0.99)
        lag_text = f"{lag_p99 / 1e6:.2f}ms" if lag_p99 is not None else "-"
        print(
            f"{step:>4} {rate:>8} {achieved:>10.1f} {100 * achieved / rate:>6.2f}% "
            f"{lag_text:>8} {failures:>5} {lost:>5} {dup:>4}   {rss['sender']} / {rss['receiver']}"
        )

    sent_ids = set(sent.column("event_id").to_pylist())
    foreign = sum(1 for eid in deliveries if eid not in sent_ids)
    print(
        f"total: sent {sent.num_rows}, received {received.num_rows}, duplicates {duplicates}, "
        f"foreign {foreign}; schedule start {start_ns}"
    )
    for role in ("sender", "receiver"):
        values = [s["rss_bytes"] / 2**20 for s in samples if s["process"] == role]
        if values:
            print(
                f"{role} RSS over the run: first {values[0]:.0f} MB, min {min(values):.0f}, "
                f"max {max(values):.0f}, last {values[-1]:.0f} ({len(values)} samples)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
