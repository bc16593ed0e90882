"""Max open-loop rate of a Locust fleet of 1 and of 2 local sender workers against one receiver.

For each worker count and rate: a fleet (`python -m loadgen.fleet master` plus its workers, as
`evbench run --workers N` starts it) sends one step of 8 KB events to a receiver process on
loopback. A rate holds when the fleet's achieved send rate is >= 99 % of target and the lag p99
of the whole schedule (every worker's records together: sent - intended) is <= 2 ms. Prints a
row per run, the highest rate that held for each worker count, and their ratio.

    .venv/bin/python benchmarks/fleet_rate.py [--rates 4000,8000,...] [--seconds 10] [--repeats 3]

On 2 cores the receiver shares the machine with the fleet, so two workers compete with it for
the same cores: the ratio says what this machine gives, not what two hosts would.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line
from evbench.instruments import start_receiver
from evbench.shared.formulas import achieved_rate_per_s
from evbench.shared.parquet import read_parts
from evbench.shared.records import SENT_FIELDS
from loadgen.settings import SenderSettings

LAG_BAR_MS = 2.0
ACHIEVED_BAR = 0.99


def run_fleet(workdir: Path, url: str, workers: int, rate: int, seconds: int, tag: str) -> dict:
    out = workdir / f"sent-{tag}"
    settings = SenderSettings(target=url, pace=f"{rate}:{seconds}", out=out, start_delay_s=1.0)
    master, followers = settings.start_fleet(workers, workdir / f"logs-{tag}")
    done = None
    try:
        while (doc := master.next_line(timeout_s=seconds + 120)) is not None:
            if doc.get("event") == "done":
                done = doc
    finally:
        for child in [master, *followers]:
            child.stop()
    table = read_parts(out, SENT_FIELDS)
    lag_ms = np.sort(
        pc.subtract(table.column("sent_ns"), table.column("intended_ns"))
        .drop_null()
        .to_numpy(zero_copy_only=False)
        / 1e6
    )
    start_ns = pc.min(table.column("intended_ns")).as_py()
    last_ns = pc.max(table.column("sent_ns")).as_py()
    per_worker = {}
    for worker in range(workers):
        mine = table.filter(pc.equal(table.column("worker"), worker))
        lags = pc.subtract(mine.column("sent_ns"), mine.column("intended_ns")).drop_null()
        per_worker[worker] = float(np.percentile(lags.to_numpy(zero_copy_only=False), 99)) / 1e6
    return {
        "workers": workers,
        "rate": rate,
        "achieved": achieved_rate_per_s(table.num_rows, start_ns, last_ns, rate) / rate,
        "events": table.num_rows,
        "lag_p50_ms": float(np.percentile(lag_ms, 50)),
        "lag_p99_ms": float(np.percentile(lag_ms, 99)),
        "worker_lag_p99_ms": per_worker,
        "failed_workers": (done or {}).get("failed_workers", {"?": "no done line"}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="4000,8000,12000,16000,20000")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    counts = [int(w) for w in args.workers.split(",")]
    print(machine_line())
    print(
        f"{args.seconds} s per rate, median of {args.repeats}; holds: achieved >= "
        f"{ACHIEVED_BAR:.0%} and lag p99 <= {LAG_BAR_MS:g} ms over the whole schedule"
    )
    print(
        f"{'workers':>7} {'rate/s':>7} {'achieved':>9} {'lag p50':>8} {'lag p99':>8} "
        f"{'slowest worker p99':>19} holds"
    )
    best: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="evbench-fleet-") as tmp:
        workdir = Path(tmp)
        receiver, url = start_receiver(workdir / "received", workdir / "receiver.log")
        try:
            for workers in counts:
                for rate in rates:
                    runs = [
                        run_fleet(
                            workdir, url + "/", workers, rate, args.seconds, f"{workers}-{rate}-{i}"
                        )
                        for i in range(args.repeats)
                    ]
                    achieved = statistics.median(r["achieved"] for r in runs)
                    p50 = statistics.median(r["lag_p50_ms"] for r in runs)
                    p99 = statistics.median(r["lag_p99_ms"] for r in runs)
                    slowest = statistics.median(max(r["worker_lag_p99_ms"].values()) for r in runs)
                    failed = [r["failed_workers"] for r in runs if r["failed_workers"]]
                    holds = achieved >= ACHIEVED_BAR and p99 <= LAG_BAR_MS and not failed
                    print(
                        f"{workers:>7} {rate:>7} {achieved:>9.2%} {p50:>8.3f} {p99:>8.3f} "
                        f"{slowest:>19.3f} {'yes' if holds else 'no'}"
                        + (f"  failed workers: {failed}" if failed else "")
                    )
                    if holds:
                        best[workers] = rate
        finally:
            receiver.stop()
    for workers in counts:
        print(f"{workers} worker(s): highest rate that held {best.get(workers, 'none')}/s")
    if 1 in best and 2 in best:
        print(f"2 workers / 1 worker: {best[2] / best[1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
