"""Does the capacity search find a capacity it is told? `evbench search`'s engine against hops
of known capacity C (suts.drivers.KnownCapacity: a bounded queue forwarding at most C events/s to
the receiver), one search per C; prints the answer, its bracket, whether the bracket holds C and
closes within the resolution, the probes and the minutes each search took.

    .venv/bin/python benchmarks/search_known.py [--capacities 330,730,1870] [--resolution 5%]
        [--hold 5] [--confirm 15]

A hop forwards evenly, so its capacity is exact: the figure to read is whether C lies inside
[highest hold, lowest break) and how wide that bracket is. The default capacities lie off the
probe grid: a probe at exactly C leaves the hop no headroom, so any stall of its event loop
queues events, and that probe breaks (C=1900, probed at 1900/s, gave [1852, 1900)).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line
from evbench.options import SearchOptions
from evbench.search import search
from evbench.searchplan import SearchPlan, parse_resolution
from loadgen.settings import SendKnobs
from suts.drivers import known_capacity


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacities", default="330,730,1870", help="C values, events/s")
    parser.add_argument("--from", dest="from_per_s", type=int, default=100)
    parser.add_argument("--resolution", default="5%")
    parser.add_argument("--hold", type=int, default=5, help="each probe, s")
    parser.add_argument("--confirm", type=int, default=15, help="the confirmation, s")
    args = parser.parse_args()
    resolution = parse_resolution(args.resolution)
    print(machine_line())
    print(
        f"search from {args.from_per_s}/s, resolution {args.resolution}, probes {args.hold} s, "
        f"confirmation {args.confirm} s, 1 KB events, queue 300, warm (settle 2 s)"
    )
    print("C/s   | answer/s | bracket [hold, break) | C inside | within res. | probes | min")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="search-known-") as tmp:
        for capacity in (int(c) for c in args.capacities.split(",")):
            opts = SearchOptions(
                sut="capacity",
                plan=SearchPlan(
                    args.from_per_s, 100_000, resolution, probe_s=args.hold, confirm_s=args.confirm
                ),
                runs_dir=Path(tmp),
                run_id=f"c{capacity}",
                send=SendKnobs(payload_bytes=1024),
                settle_s=2.0,
                grace_s=2.0,
            )
            started = time.monotonic()
            searched = search(opts, lambda line: None, make=known_capacity(capacity))
            minutes = (time.monotonic() - started) / 60
            r = searched.result
            if r is None or r.highest_hold_per_s is None:
                print(f"{capacity:<5} | search {searched.status}: {r.why if r else '-'}")
                failures += 1
                continue
            broke = r.lowest_break_per_s
            inside = r.highest_hold_per_s <= capacity < (broke or sys.maxsize)
            closed = broke is not None and resolution.gap_ok(r.highest_hold_per_s, broke)
            failures += not (inside and closed)
            bracket = f"[{r.highest_hold_per_s}, {broke or '-'})"
            print(
                f"{capacity:<5} | {r.max_sustainable_per_s or '-':<8} | {bracket:<21} | "
                f"{'yes' if inside else 'NO':<8} | {'yes' if closed else 'NO':<11} | "
                f"{r.probes:<6} | {minutes:.1f}"
            )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
