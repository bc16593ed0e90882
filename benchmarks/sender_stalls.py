"""Does the sender's memory stay bounded when the system keeps stalling? The worst case for it.

An open-loop sender must hold every request a stalled system has not answered, each on its own
HTTP/1.1 connection, so its memory follows the deepest stall seen so far, up to the in-flight
cap (`--max-inflight`, 4,096 by default). Soaks at a high rate see new, deeper stalls for a
while (a staircase of high-water marks that a 10-minute slope reads as growth). This benchmark
makes every stall hit the cap: a real receiver is stopped (SIGSTOP) for `--stall-s` every
`--every-s` seconds while one sender (python -m loadgen) sends at `--rate`; the first stall
takes the sender to its ceiling and later ones must cost nothing more.

Prints the sender's RSS (sampled once a second) before the first stall, after it and at the end,
the least-squares slope after `--settle-s` in MiB per hour (the goal: <= 1 MiB per hour), the
most connections open at once, the slots the cap refused, and the sender's lag p99.

    .venv/bin/python benchmarks/sender_stalls.py                # 20,000/s for 300 s
    .venv/bin/python benchmarks/sender_stalls.py --seconds 120 --every-s 15
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line
from benchmarks.soak import ceiling_at_s, rss_slope_mib_per_h
from evbench.instruments import start_receiver
from loadgen.settings import SenderSettings, SendKnobs

MIB = 2**20
NS_PER_S = 1_000_000_000


def stall(pid: int, seconds: float) -> None:
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


def drive(args: argparse.Namespace, workdir: Path) -> tuple[dict, np.ndarray, np.ndarray]:
    """Runs the sender against a receiver stalled on schedule; returns the sender's done line
    and its RSS samples (t_ns, bytes)."""
    receiver, url = start_receiver(workdir / "received", workdir / "receiver.log")
    try:
        knobs = SendKnobs(max_inflight=args.max_inflight)
        settings = SenderSettings(
            target=url,
            pace=f"{args.rate}:{args.seconds}",
            out=workdir / "sent",
            knobs=knobs,
            start_delay_s=1.0,
        )
        sender = settings.start(workdir / "sender.log")
        proc = psutil.Process(sender.pid)
        times: list[int] = []
        rss: list[int] = []
        started = time.monotonic()
        next_stall = started + args.first_stall_s
        while sender.alive():
            if time.monotonic() >= next_stall:
                stall(receiver.pid, args.stall_s)
                next_stall += args.every_s
            try:
                rss.append(proc.memory_info().rss)
            except psutil.NoSuchProcess:
                break
            times.append(time.time_ns())
            time.sleep(1.0)
        done = sender.wait_for("done", 60)
        sender.wait(30)
    finally:
        receiver.stop()
    return done, np.array(times), np.array(rss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=20_000, help="events per second")
    parser.add_argument("--seconds", type=int, default=300, help="the step's length")
    parser.add_argument("--stall-s", type=float, default=0.4, help="each stall's length")
    parser.add_argument("--every-s", type=float, default=20.0, help="seconds between stalls")
    parser.add_argument("--first-stall-s", type=float, default=20.0, help="the first stall")
    parser.add_argument("--settle-s", type=float, default=60.0, help="slope from here on")
    parser.add_argument("--max-inflight", type=int, default=4096, help="the sender's cap")
    parser.add_argument("--series", action="store_true", help="print every RSS sample too")
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="evbench-stalls-") as tmp:
        done, t_ns, rss = drive(args, Path(tmp))
    t0 = int(t_ns[0])
    if args.series:
        for t, b in zip(t_ns, rss, strict=True):
            print(f"  {(t - t0) / NS_PER_S:7.1f} s {b / MIB:8.1f} MiB")
    before = rss[(t_ns - t0) < args.first_stall_s * NS_PER_S]
    after = rss[(t_ns - t0) >= (args.first_stall_s + 5) * NS_PER_S]
    slope = rss_slope_mib_per_h(t_ns, rss, t0 + int(args.settle_s * NS_PER_S), int(t_ns[-1]))
    step = done["steps"][0]
    print(
        f"sender at {args.rate}/s for {args.seconds} s, receiver stopped {args.stall_s:g} s "
        f"every {args.every_s:g} s (first at {args.first_stall_s:g} s), in-flight cap "
        f"{args.max_inflight}:"
    )
    print(
        f"  RSS before the first stall {before.max() / MIB:.1f} MiB, after it "
        f"{after[0] / MIB:.1f} MiB, at the end {rss[-1] / MIB:.1f} MiB, peak "
        f"{rss.max() / MIB:.1f} MiB (within 1 MiB of it from {ceiling_at_s(t_ns, rss):.0f} s "
        f"on); slope after {args.settle_s:g} s "
        f"{'n/a' if slope is None else f'{slope:+.1f}'} MiB/h"
    )
    print(
        f"  connections: opened {done['connections_opened']}, peak {done['connections_peak']}; "
        f"slots refused by the cap {done['inflight_cap_refused']}; lag p99 "
        f"{step['lag_p99_ms']} ms, sent {done['sent']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
