"""How fast `evbench analyze` is on a big run, and how fast its digest stage is.

Generates a synthetic 1k-2k-shaped run for six SUTs (501,000 events each, about 3 M in all, with
losses, duplicates, send failures and foreign deliveries; one Parquet part per second per side,
as real runs write), then times `evbench analyze` on it as a user runs it (a new process, Spark
start-up included). With --scale 10 every step carries ten times the events.

Then prints the digest stage's values/s (fastdigest, as the job builds per-second digests) and
the pure-python `tdigest` package on the same data, and the cost per event of the export's
per-event cumulative lines (`--export-knative`: a compression-1000 digest queried after every
event). With --export-knative the timed analyze writes the 2019 files too.

    .venv/bin/python benchmarks/analysis_scale.py [--suts 6] [--scale 1] [--keep DIR]
        [--export-knative]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.digests import digest_of
from analysis.export import running_quantiles
from benchmarks.common import machine_line
from evbench.shared.parquet import arrow_schema
from evbench.shared.records import RECEIVED_FIELDS, SENT_FIELDS
from suts.lab import LOCAL_SUTS

STEPS_1K_2K = [
    (1000, 30),
    (1100, 30),
    (1200, 30),
    (1300, 30),
    (1400, 30),
    (1500, 30),
    (100, 60),
    (1600, 30),
    (1700, 30),
    (1800, 30),
    (1900, 30),
    (2000, 30),
]
S = 1_000_000_000
T0 = 1_790_000_000 * S


def write_sut(root: Path, sut: str, scale: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    sent_dir, recv_dir = root / sut / "sent", root / sut / "received"
    sent_dir.mkdir(parents=True)
    recv_dir.mkdir(parents=True)
    sent_schema, recv_schema = arrow_schema(SENT_FIELDS), arrow_schema(RECEIVED_FIELDS)
    seq, offset_ns, part, events = 0, 0, 0, 0
    for number, (rate, seconds) in enumerate(STEPS_1K_2K, start=1):
        rate *= scale
        for second in range(seconds):
            n = rate
            seqs = np.arange(seq, seq + n)
            intended = T0 + offset_ns + second * S + (np.arange(n) * S // rate)
            lag = rng.gamma(2, 150_000, n).astype(np.int64)
            sent = intended + lag
            publish = (rng.gamma(3, 400_000, n) + (rng.random(n) < 1e-4) * 40_000_000).astype(
                np.int64
            )
            ack = sent + publish
            fail = rng.random(n) < 0.0002
            status = np.where(fail, 503, 202).astype(np.int32)
            e2e = (rng.gamma(4, 500_000, n) + (rng.random(n) < 1e-4) * 80_000_000).astype(np.int64)
            lost = (~fail) & (rng.random(n) < 0.0002)
            delivered = ~fail & ~lost
            ids = np.char.add(f"{sut[:4]}-0-", seqs.astype(str))
            pq.write_table(
                pa.table(
                    {
                        "event_id": ids,
                        "seq": seqs,
                        "step": np.full(n, number, np.int32),
                        "warmup": np.zeros(n, bool),
                        "decoy": np.zeros(n, bool),
                        "target_rate_per_s": np.full(n, rate, np.int32),
                        "intended_ns": intended,
                        "sent_ns": sent,
                        "ack_ns": ack,
                        "status": status,
                        "error": pa.array(np.where(fail, "HTTP 503", None).tolist(), pa.string()),
                        "worker": np.zeros(n, np.int32),
                        "payload_bytes": np.full(n, 8192, np.int32),
                    },
                    schema=sent_schema,
                ),
                sent_dir / f"sent-w0-{part:06d}.parquet",
            )
            recv_ids = ids[delivered]
            received_ns = (intended + e2e)[delivered]
            dup = rng.random(len(recv_ids)) < 0.0005
            recv_ids = np.concatenate([recv_ids, recv_ids[dup], np.array([f"foreign-{part}"])])
            received_ns = np.concatenate([received_ns, received_ns[dup] + S, received_ns[:1]])
            m = len(recv_ids)
            pq.write_table(
                pa.table(
                    {
                        "event_id": recv_ids,
                        "received_ns": received_ns,
                        "receiver": np.full(m, "rx"),
                        "payload_bytes": np.full(m, 8192, np.int32),
                        "ce_id": recv_ids,
                        "ce_type": np.full(m, "dev.evbench.measure"),
                        "ce_source": np.full(m, "bench"),
                    },
                    schema=recv_schema,
                ),
                recv_dir / f"receiver-{part:06d}.parquet",
            )
            seq += n
            part += 1
            events += n
        offset_ns += (seconds + 2) * S
    run = {
        "run_id": "bench",
        "sut": sut,
        "status": "completed",
        "pace": {
            "name": "1k-2k",
            "steps": [{"rate_per_s": r * scale, "duration_s": d} for r, d in STEPS_1K_2K],
        },
        "schedule": {"start_ns": T0},
    }
    (root / sut / "run.json").write_text(json.dumps(run))
    return events


def time_analyze(run_dir: Path, export_knative: bool) -> float:
    started = time.perf_counter()
    extra = ["--export-knative"] if export_knative else []
    result = subprocess.run(
        [sys.executable, "-m", "evbench", "analyze", str(run_dir), *extra],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        print(result.stderr[-3000:])
        raise SystemExit("analyze failed")
    for line in result.stderr.splitlines():
        if ": " in line and ("breaks" in line or "held" in line):
            print("   ", line)
    return elapsed


def digest_rates() -> None:
    import tdigest

    values = np.random.default_rng(1).gamma(4, 0.5, 2_000_000)
    started = time.perf_counter()
    for chunk in np.array_split(values, 2000):  # per-second digests of 1000 values, as the job
        digest_of(chunk)
    fast = len(values) / (time.perf_counter() - started)
    sample = values[:100_000]
    started = time.perf_counter()
    pure = tdigest.TDigest()
    pure.batch_update(sample)
    slow = len(sample) / (time.perf_counter() - started)
    print(
        f"digest stage: fastdigest {fast / 1e6:.1f} M values/s; pure-python tdigest "
        f"{slow / 1e3:.0f} k values/s on the same distribution ({fast / slow:.0f}x)"
    )


def running_line_cost(events: int = 501_000) -> None:
    """One SUT's cumulative line for one metric, as the export computes it in its Arrow UDF."""
    values = np.random.default_rng(2).gamma(3, 0.4, events)
    values[np.random.default_rng(3).random(events) < 1e-3] *= 40  # spikes
    started = time.perf_counter()
    running_quantiles(values)
    elapsed = time.perf_counter() - started
    print(
        f"export cumulative line: {events:,} events in {elapsed:.1f} s "
        f"({elapsed / events * 1e6:.1f} us per event: one digest update and 3 quantiles); "
        "a SUT has two lines (publish, delivery), one Arrow group each"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suts", type=int, default=6)
    parser.add_argument("--scale", type=int, default=1, help="events multiplier per step")
    parser.add_argument("--keep", type=Path, default=None, help="generate here and keep it")
    parser.add_argument(
        "--export-knative", action="store_true", help="time analyze --export-knative"
    )
    args = parser.parse_args()
    print(machine_line())
    root = args.keep or Path(tempfile.mkdtemp(prefix="evbench-scale-"))
    run_dir = root / f"bench-x{args.scale}-1k-2k"
    try:
        started = time.perf_counter()
        names = LOCAL_SUTS[: args.suts]  # the matrix `make run` runs, in its order
        events = sum(write_sut(run_dir, name, args.scale, i) for i, name in enumerate(names))
        print(
            f"generated {len(names)} SUTs, {events:,} events in "
            f"{time.perf_counter() - started:.0f} s -> {run_dir}"
        )
        elapsed = time_analyze(run_dir, args.export_knative)
        print(
            f"evbench analyze{' --export-knative' if args.export_knative else ''}: "
            f"{elapsed:.1f} s wall for {events:,} events "
            f"({events / elapsed:,.0f} events/s, Spark start-up included)"
        )
        digest_rates()
        running_line_cost()
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
