"""One long step: how `evbench analyze` fares on a single step of tens of millions of events
(a soak's step), against one DuckDB query on the same files in the same run.

Generates one system with a single step (`--rate` events/s for `--events / --rate` seconds, one
Parquet part per second per side, as runs write them before rolling; losses, duplicates, send
failures, a foreign delivery a second, and one e2e value in 10^4 an 80 ms spike, the gap case of
P99.99), then times `evbench analyze` as a user runs it (a new process, Spark start-up included,
the peak RSS of the whole process tree, the JVM included): the first run compacts the received
parts and indexes the sent ones, the later ones read the chunks and the index. DuckDB
(benchmarks/duckdb_peer.py) runs its query on the raw parts, timed with its peak RSS the same
way, and its exact P99.99 is compared with evbench's.

    .venv/bin/python benchmarks/long_step.py [--events 30000000] [--rate 100000]
        [--repeats 2] [--keep DIR] [--slice-events N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.analysis_scale import agreement, time_analyze, timed, write_sut
from benchmarks.common import machine_line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=30_000_000, help="events in the step")
    parser.add_argument("--rate", type=int, default=100_000, help="the step's rate, events/s")
    parser.add_argument("--repeats", type=int, default=2, help="analyses to time (>= 1)")
    parser.add_argument("--keep", type=Path, help="generate into DIR and keep it")
    parser.add_argument("--slice-events", type=int, help="passed to evbench analyze")
    args = parser.parse_args()
    print(machine_line())
    root = args.keep or Path(tempfile.mkdtemp(prefix="evbench-long-step-"))
    run_dir = root / f"long-{args.events}"
    try:
        if not (run_dir / "long" / "run.json").exists():
            started = time.perf_counter()
            seconds = args.events // args.rate
            events = write_sut(run_dir, "long", 1, 7, steps=[(args.rate, seconds)])
            print(
                f"one step of {events:,} events ({args.rate:,}/s for {seconds:,} s), "
                f"generated in {time.perf_counter() - started:.0f} s -> {run_dir}"
            )
        extra = ["--slice-events", str(args.slice_events)] if args.slice_events else []
        # A kept run analysed before: its compacted records go, so the first analysis timed is
        # a first analysis (compaction and the sent index included).
        shutil.rmtree(run_dir / "long" / "analysis" / "records", ignore_errors=True)
        walls = []
        for attempt in range(args.repeats):
            wall, peak = time_analyze(run_dir / "long", False, extra=extra)
            walls.append(wall)
            note = " (compacting the parts first)" if attempt == 0 else " (records compacted)"
            print(
                f"  evbench analyze run {attempt + 1}: {wall:.1f} s, "
                f"peak RSS {peak / 2**30:.2f} GiB{note}"
            )
        peer = Path(__file__).with_name("duckdb_peer.py")
        wall, peak, out = timed([sys.executable, str(peer), str(run_dir)])
        found = json.loads(out)
        print(
            f"  DuckDB, one query on the raw parts: {wall:.1f} s wall, peak RSS "
            f"{peak / 2**30:.2f} GiB: evbench's first analysis {walls[0] / wall:.1f}x, "
            f"its last {walls[-1] / wall:.1f}x DuckDB's time"
        )
        print(f"  {agreement(run_dir, found['steps'])}")
        summary = json.loads((run_dir / "long" / "analysis" / "summary.json").read_text())
        step, run = summary["steps"][-1], summary["latency_ms"]["e2e"]
        print(
            f"  evbench e2e P99.99: the step's {step['p9999_e2e_ms']} ms (exact: "
            f"{'p9999' in step['e2e_exact']}), the run's {run['p9999']} ms (exact: "
            f"{'p9999' in run['exact']})"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
