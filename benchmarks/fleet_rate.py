"""Max open-loop rate of a Locust fleet of 1 and of 2 local sender workers against one receiver.

For each worker count and rate: a fleet (`python -m loadgen.fleet master` plus its workers, as
`evbench run --workers N` starts it) sends one step of 8 KB events to a receiver process on
loopback. A rate holds when the fleet's achieved send rate is >= 99 % of target and the lag p99
of the whole schedule (every worker's records together: sent - intended) is <= 2 ms. Prints a
row per run (with the cores the fleet and the receiver kept busy during the step), the highest
rate that held for each worker count, and their ratio.

    .venv/bin/python benchmarks/fleet_rate.py [--rates 4000,...,24000] [--seconds 10] [--repeats 3]

On 2 cores the receiver shares the machine with the fleet, so two workers compete with it for
the same cores: the ratio says what this machine gives, not what two hosts would.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line
from contract.records import SENT_FIELDS
from evbench.instruments import start_receiver
from loadgen.settings import SenderSettings
from runtime.formulas import achieved_rate_per_s
from runtime.parquet import read_parts

LAG_BAR_MS = 2.0
ACHIEVED_BAR = 0.99


def _cpu_s(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def _tree(pids: list[int]) -> list[psutil.Process]:
    """The fleet's processes: master, workers and the pacer each worker runs."""
    processes = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            processes += [process, *process.children(recursive=True)]
    return processes


def run_fleet(
    workdir: Path,
    url: str,
    receiver: psutil.Process,
    workers: int,
    rate: int,
    seconds: int,
    tag: str,
) -> dict:
    out = workdir / f"sent-{tag}"
    settings = SenderSettings(target=url, pace=f"{rate}:{seconds}", out=out, start_delay_s=1.0)
    master, followers = settings.start_fleet(workers, workdir / f"logs-{tag}")
    done = None
    # CPU from the step's first progress line to its end: cores busy while the pace runs,
    # start-up and drain left out.
    window: dict[str, tuple[float, float, float]] = {}
    try:
        while (doc := master.next_line(timeout_s=seconds + 120)) is not None:
            event = doc.get("event")
            key = {"progress": "first", "step_end": "end"}.get(event)
            if key == "end" or (key == "first" and key not in window):
                fleet = _tree([master.pid, *(f.pid for f in followers)])
                window[key] = (time.monotonic(), _cpu_s(fleet), _cpu_s([receiver]))
            if event == "done":
                done = doc
    finally:
        for child in [master, *followers]:
            child.stop()
    (t0, fleet0, receiver0), (t1, fleet1, receiver1) = window["first"], window["end"]
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
        "fleet_cores": (fleet1 - fleet0) / (t1 - t0),
        "receiver_cores": (receiver1 - receiver0) / (t1 - t0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="4000,8000,12000,16000,20000,24000")
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
        f"{'slowest worker p99':>19} {'fleet cores':>11} {'recv cores':>10} holds"
    )
    best: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="evbench-fleet-") as tmp:
        workdir = Path(tmp)
        receiver, url = start_receiver(workdir / "received", workdir / "receiver.log")
        receiver_process = psutil.Process(receiver.pid)
        busy: dict[int, tuple[float, float]] = {}
        try:
            for workers in counts:
                for rate in rates:
                    runs = [
                        run_fleet(
                            workdir,
                            url + "/",
                            receiver_process,
                            workers,
                            rate,
                            args.seconds,
                            f"{workers}-{rate}-{i}",
                        )
                        for i in range(args.repeats)
                    ]
                    achieved = statistics.median(r["achieved"] for r in runs)
                    p50 = statistics.median(r["lag_p50_ms"] for r in runs)
                    p99 = statistics.median(r["lag_p99_ms"] for r in runs)
                    slowest = statistics.median(max(r["worker_lag_p99_ms"].values()) for r in runs)
                    fleet_cores = statistics.median(r["fleet_cores"] for r in runs)
                    receiver_cores = statistics.median(r["receiver_cores"] for r in runs)
                    failed = [r["failed_workers"] for r in runs if r["failed_workers"]]
                    holds = achieved >= ACHIEVED_BAR and p99 <= LAG_BAR_MS and not failed
                    print(
                        f"{workers:>7} {rate:>7} {achieved:>9.2%} {p50:>8.3f} {p99:>8.3f} "
                        f"{slowest:>19.3f} {fleet_cores:>11.2f} {receiver_cores:>10.2f} "
                        f"{'yes' if holds else 'no'}"
                        + (f"  failed workers: {failed}" if failed else "")
                    )
                    if holds:
                        best[workers] = rate
                        busy[workers] = (rate, fleet_cores + receiver_cores)
        finally:
            receiver.stop()
    for workers in counts:
        print(f"{workers} worker(s): highest rate that held {best.get(workers, 'none')}/s")
    if 1 in best and 2 in best:
        print(f"2 workers / 1 worker: {best[2] / best[1]:.2f}x")
    cores = os.cpu_count() or 1
    if 1 in busy:
        # Fleet and receiver share this machine's cores: the ratio two workers can reach here is
        # bounded by what the cores can pay for, whatever the fleet does.
        rate, used = busy[1]
        print(
            f"at {rate}/s one worker and the receiver kept {used:.2f} of {cores} cores busy; "
            f"1.6x that rate needs about {1.6 * used:.2f} cores on this host"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
