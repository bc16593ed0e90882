"""Soak: do the instruments hold their memory flat over a long run, and what does it leave?

Runs `evbench run --sut SUT --pace RATE:SECONDS --no-analyze` as a user would (a new process,
its own run directory), then, unless --no-analyze, `evbench analyze` on it, timed. Prints, from
what the run wrote itself:

- each instrument's RSS (sender, receiver, the lab's processes: the run's own samples,
  `samples/processes*`, one a second): first, last and peak, and the least-squares slope after
  the first minute (--settle-s) in MiB per hour and in bytes per event sent (the goal for a
  soak: <= 1 MiB per hour);
- the sender's summary per step: achieved rate, lag p99 and max, collections inside the step;
- the receiver's own collections (count, longest) and the publish latency's tail from the sent
  records (on `direct` the receiver is the system: that tail is the instruments' own);
- the record files per side;
- with analysis: its wall time, the peak RSS of its process tree, and the report's size;
- where the instruments' resident memory went (--maps-every-s): their /proc/PID/smaps read
  every so often while the run goes on, RSS by kind (the brk heap, anonymous maps, files,
  stacks) first and last after the first minute, and each mapping that grew by 256 KiB or more
  between those two reads (a 64 MiB-aligned anonymous map is a glibc thread arena; a file is
  a library's or a record file's pages): growth named, not guessed.

    .venv/bin/python benchmarks/soak.py --sut channel-imc --pace 2000:3600        # the hour
    .venv/bin/python benchmarks/soak.py --sut direct --pace 20000:600 --no-analyze
    .venv/bin/python benchmarks/soak.py --quick                                    # ~2.5 min
    .venv/bin/python benchmarks/soak.py --quick --code /tmp/old   # another checkout's code
    .venv/bin/python benchmarks/soak.py --report runs/soak-20000x600/direct   # figures again

`--code DIR` runs `python -m evbench` with DIR as the working directory, so the orchestration
and every process it starts (`python -m loadgen`, `python -m suts`, ...) import that tree's code:
a checkout made with `git archive <commit> | tar -x -C DIR` measures an older commit in this
virtualenv. The run directory is kept (its path is printed); --runs-dir chooses where.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.drift import theil_sen
from benchmarks.common import machine_line
from runtime.parquet import part_files

REPO = Path(__file__).resolve().parents[1]
QUICK = ("direct", "20000:120")
MIB = 2**20
NS_PER_S = 1_000_000_000
S_PER_H = 3600


def rss_slope_mib_per_h(
    t_ns: np.ndarray, rss_bytes: np.ndarray, from_ns: int, to_ns: int
) -> float | None:
    """Least-squares slope of RSS over [from_ns, to_ns], in MiB per hour; None with fewer than
    10 samples there."""
    keep = (t_ns >= from_ns) & (t_ns <= to_ns) & (rss_bytes > 0)  # 0: a process exiting
    if keep.sum() < 10:
        return None
    hours = (t_ns[keep] - t_ns[keep][0]) / NS_PER_S / S_PER_H
    slope, _ = np.polyfit(hours, rss_bytes[keep] / MIB, 1)
    return float(slope)


def robust_slope_mib_per_h(
    t_ns: np.ndarray, rss_bytes: np.ndarray, from_ns: int, to_ns: int, points: int = 400
) -> float | None:
    """Theil-Sen slope (the median of pairwise slopes, the drift rule's estimator:
    analysis.drift.theil_sen) of RSS over [from_ns, to_ns] in MiB per hour, on at most `points`
    evenly spaced samples: a lasting trend, where one spike or swing moves least squares."""
    keep = (t_ns >= from_ns) & (t_ns <= to_ns) & (rss_bytes > 0)
    if keep.sum() < 10:
        return None
    t, rss = t_ns[keep], rss_bytes[keep]
    every = max(1, len(t) // points)
    hours = (t[::every] - t[0]) / NS_PER_S / S_PER_H
    found = theil_sen(hours.astype(np.float64), rss[::every] / MIB)
    return None if found is None else found[0]


def ceiling_at_s(t_ns: np.ndarray, rss_bytes: np.ndarray) -> float:
    """Seconds from the first sample to the first within 1 MiB of the peak: when memory that
    follows the deepest stall so far (an open-loop sender's connections) reached its ceiling,
    rather than growing per event."""
    near = np.flatnonzero(rss_bytes >= rss_bytes.max() - MIB)
    return float((t_ns[near[0]] - t_ns[0]) / NS_PER_S)


def evbench(args: list[str], code: Path, maps: MapWatch | None = None) -> tuple[int, float, int]:
    """`python -m evbench ARGS` in `code` (its output passed through): exit code, wall seconds
    and the peak RSS of its process tree; `maps` reads the instruments' smaps meanwhile."""
    started = time.perf_counter()
    process = psutil.Popen([sys.executable, "-m", "evbench", *args], cwd=code)
    peak = 0
    while process.poll() is None:
        peak = max(peak, _tree_rss(process))
        if maps is not None:
            maps.poll(process)
        time.sleep(0.5)
    return process.returncode, time.perf_counter() - started, peak


KIB = 1024
ARENA_ALIGN = 64 * MIB  # glibc's HEAP_MAX_SIZE on 64-bit: a thread arena starts aligned to it
ROLES = {"loadgen": "sender", "receivers": "receiver"}


def smaps_rss(text: str) -> dict[str, int]:
    """RSS in bytes per mapping of a /proc/PID/smaps text, keyed `start perms path` (anonymous
    maps have no path; the end is left out, as a heap that grows keeps its start)."""
    found: dict[str, int] = {}
    key = ""
    for line in text.splitlines():
        head, _, rest = line.partition(" ")
        if "-" in head and not head.endswith(":"):
            fields = line.split()
            key = " ".join([fields[0].split("-")[0], fields[1], *fields[5:6]])
            found[key] = 0
        elif head == "Rss:":
            found[key] = int(rest.split()[0]) * KIB
    return found


def map_kind(key: str) -> str:
    """What a mapping is: the brk heap, a glibc thread arena, other anonymous memory (pymalloc's
    arenas, large mallocs, Arrow's buffers), a stack, or a file's pages."""
    start, _, rest = key.partition(" ")
    path = rest.partition(" ")[2]
    if path == "[heap]":
        return "heap"
    if path.startswith("[stack"):
        return "stack"
    if path.startswith("["):
        return "kernel"  # [vdso], [vvar]
    if path:
        return "file"
    return "thread arena" if int(start, 16) % ARENA_ALIGN == 0 else "anonymous"


def by_kind(rss: dict[str, int]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for key, size in rss.items():
        kind = map_kind(key)
        totals[kind] = totals.get(kind, 0) + size
    return totals


@dataclass
class MapWatch:
    """The sender's and the receiver's smaps, read every `every_s` once the run is `settle_s`
    old: the first read after settling and the latest, per role."""

    every_s: float
    settle_s: float
    started: float = field(default_factory=time.monotonic)
    next_at: float = 0.0
    first: dict[str, tuple[float, dict[str, int]]] = field(default_factory=dict)
    last: dict[str, tuple[float, dict[str, int]]] = field(default_factory=dict)

    def poll(self, root: psutil.Process) -> None:
        now = time.monotonic()
        if now - self.started < self.settle_s or now < self.next_at:
            return
        self.next_at = now + self.every_s
        with contextlib.suppress(psutil.Error):
            for child in root.children(recursive=True):
                with contextlib.suppress(psutil.Error, OSError):
                    argv = child.cmdline()
                    role = ROLES.get(argv[2]) if argv[1:2] == ["-m"] else None
                    if role is not None:
                        text = Path(f"/proc/{child.pid}/smaps").read_text()
                        read = (now - self.started, smaps_rss(text))
                        self.first.setdefault(role, read)
                        self.last[role] = read

    def report(self) -> None:
        for role, (t0, first) in sorted(self.first.items()):
            t1, last = self.last[role]
            kinds0, kinds1 = by_kind(first), by_kind(last)
            print(f"  {role} smaps at {t0:.0f} s and {t1:.0f} s, RSS by kind (MiB):")
            for kind in sorted(set(kinds0) | set(kinds1)):
                a, b = kinds0.get(kind, 0) / MIB, kinds1.get(kind, 0) / MIB
                print(f"    {kind:<13} {a:8.2f} -> {b:8.2f}  ({b - a:+.2f})")
            grew = sorted(
                (
                    (last[k] - first.get(k, 0), k)
                    for k in last
                    if last[k] - first.get(k, 0) >= 256 * KIB
                ),
                reverse=True,
            )
            for delta, key in grew[:12]:
                print(f"    grew {delta / MIB:+6.2f} MiB  {map_kind(key):<12} {key}")


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    with contextlib.suppress(psutil.Error):
        for member in [process, *process.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):  # a child that ended meanwhile
                total += member.memory_info().rss
    return total


def instruments(sut_dir: Path, window_ns: tuple[int, int], events_per_s: float) -> None:
    files = [p for p in part_files(sut_dir / "samples") if p.name.startswith("processes-")]
    if not files:
        print("  no process samples under samples/")
        return
    table = pq.read_table(files, columns=["t_ns", "process", "rss_bytes"]).to_pydict()
    names = sorted(set(table["process"]))
    print("  RSS over the steps after --settle-s (slope: least squares, and Theil-Sen's median")
    print("  of pairwise slopes; peak from: within 1 MiB of the peak from this many seconds")
    print("  after the first sample on):")
    print(
        f"  {'process':<22} {'first':>8} {'last':>8} {'peak':>8} {'peak from':>9}  {'slope':>11}"
        f"  {'per event':>9}  {'Theil-Sen':>11}"
    )
    for name in names:
        rows = [i for i, p in enumerate(table["process"]) if p == name]
        t_ns = np.array([table["t_ns"][i] for i in rows], dtype=np.int64)
        rss = np.array([table["rss_bytes"][i] for i in rows], dtype=np.float64)
        order = np.argsort(t_ns)
        t_ns, rss = t_ns[order], rss[order]
        slope = rss_slope_mib_per_h(t_ns, rss, *window_ns)
        robust = robust_slope_mib_per_h(t_ns, rss, *window_ns)
        robust_text = "-" if robust is None else f"{robust:+8.1f} MiB/h"
        t_ns, rss = t_ns[rss > 0], rss[rss > 0]
        if slope is None:
            slope_text, per_event = "too short", "-"
        else:
            slope_text = f"{slope:+8.1f} MiB/h"
            per_event = f"{slope * MIB / S_PER_H / events_per_s:+.1f} B" if events_per_s else "-"
        print(
            f"  {name:<22} {rss[0] / MIB:>6.1f}Mi {rss[-1] / MIB:>6.1f}Mi "
            f"{rss.max() / MIB:>6.1f}Mi {ceiling_at_s(t_ns, rss):>7.0f} s  {slope_text:>11}  "
            f"{per_event:>9}  {robust_text:>11}"
        )


def sender_steps(summary: dict[str, Any]) -> None:
    print(
        f"  sender: connections opened {summary.get('connections_opened')}, at most "
        f"{summary.get('connections_peak')} open at once; per step:"
    )
    for step in summary.get("steps", []):
        target = step["target_rate_per_s"]
        achieved = step["achieved_send_rate_per_s"]
        in_step = step.get("gc_step_max_ms", "-")
        print(
            f"    step {step['step']}: {target}/s for {step['duration_s']} s, achieved "
            f"{100 * achieved / target:.2f} %, lag p50 {step['lag_p50_ms']} ms, "
            f"p99 {step['lag_p99_ms']} ms, max {step['lag_max_ms']} ms, "
            f"collections: longest in the step {in_step} ms, after it {step['gc_ms']} ms"
        )


def receiver_pauses(stats: dict[str, Any]) -> None:
    """The receiver's own collections (runtime/gcpauses.py): the longest held its loop, so no
    event was stamped meanwhile."""
    if "gc_pauses" not in stats:
        return
    print(
        f"  receiver: collections {stats['gc_pauses']}, longest {stats['gc_pause_max_ms']} ms; "
        f"{stats['gc_frozen_objects']} start-up objects kept out of them"
    )


def publish_tail(sut_dir: Path) -> None:
    """Publish latency (ack - sent) of the run's answered events, from the sent records: on
    `direct` the receiver is the system, so its tail is the instruments' own."""
    files = part_files(sut_dir / "sent")
    if not files:
        return
    table = pq.read_table(files, columns=["sent_ns", "ack_ns"])
    took_ns = pc.drop_null(pc.subtract(table["ack_ns"], table["sent_ns"]))
    if not len(took_ns):
        return
    ms = took_ns.to_numpy() / 1e6
    p99, p999, p9999 = np.percentile(ms, [99, 99.9, 99.99])
    print(
        f"  publish latency (ack - sent): p99 {p99:.2f} ms, p99.9 {p999:.2f} ms, "
        f"p99.99 {p9999:.2f} ms, max {ms.max():.2f} ms ({len(ms)} answered)"
    )


def record_files(sut_dir: Path) -> None:
    counts = {side: len(part_files(sut_dir / side)) for side in ("sent", "received", "samples")}
    print(
        f"  record files: sent {counts['sent']}, received {counts['received']}; process samples "
        f"{counts['samples']}"
    )


def report(sut_dir: Path, settle_s: float) -> None:
    run = json.loads((sut_dir / "run.json").read_text())
    summary = run.get("sender", {}).get("summary", {})
    seconds = sum(s["duration_s"] for s in run["pace"]["steps"]) or 1
    events_per_s = summary.get("sent", 0) / seconds
    received = run.get("receiver", {}).get("stats", {}).get("received")
    print(
        f"{sut_dir}: status {run['status']}, pace {run['pace']['spec']}, sent "
        f"{summary.get('sent')}, received {received}"
    )
    # The steps' span (gaps included), from the schedule's start: not the grace period after.
    start_ns = run["schedule"]["start_ns"]
    end_ns = start_ns + int(run["pace"]["duration_s"] * NS_PER_S)
    instruments(sut_dir, (start_ns + int(settle_s * NS_PER_S), end_ns), events_per_s)
    sender_steps(summary)
    receiver_pauses(run.get("receiver", {}).get("stats", {}))
    publish_tail(sut_dir)
    record_files(sut_dir)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sut", default="direct")
    parser.add_argument("--pace", default="20000:600", help="RATE:SECONDS,... (default 20000:600)")
    parser.add_argument("--no-analyze", action="store_true", help="skip `evbench analyze`")
    parser.add_argument("--quick", action="store_true", help="direct 20000:120, no analysis")
    parser.add_argument("--settle-s", type=float, default=60.0, help="left out of the slope")
    parser.add_argument("--runs-dir", type=Path, default=None, help="default: a new temp dir")
    parser.add_argument("--code", type=Path, default=REPO, help="the tree whose code runs")
    parser.add_argument(
        "--maps-every-s", type=float, default=60.0,
        help="read the instruments' /proc/PID/smaps this often after --settle-s (0: never)",
    )  # fmt: skip
    parser.add_argument(
        "--report", type=Path, default=None, metavar="SUT_DIR",
        help="only print the figures of a run made before (its system's directory)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.report is not None:
        report(args.report, args.settle_s)
        return 0
    if args.quick:
        args.sut, args.pace = QUICK
        args.no_analyze = True
    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="evbench-soak-"))
    print(machine_line())
    print(f"code: {args.code.resolve()}; runs: {runs_dir}")
    run_args = ["run", "--sut", args.sut, "--pace", args.pace, "--no-analyze"]
    maps = MapWatch(args.maps_every_s, args.settle_s) if args.maps_every_s > 0 else None
    code, wall_s, _ = evbench(
        [*run_args, "--runs-dir", str(runs_dir), "--run-id", "soak"], args.code, maps
    )
    print(f"evbench run: exit {code}, {wall_s:.1f} s")
    found = sorted(runs_dir.glob(f"soak-*/{args.sut}/run.json"))
    if not found:
        print(f"no run.json for {args.sut} under {runs_dir}")
        return 1
    sut_dir = found[0].parent
    report(sut_dir, args.settle_s)
    if maps is not None:
        maps.report()
    if not args.no_analyze:
        code, wall_s, peak = evbench(["analyze", str(sut_dir)], args.code)
        html = sut_dir / "analysis" / "report.html"
        size = f"{html.stat().st_size / MIB:.1f} MiB" if html.exists() else "missing"
        print(
            f"  analysis: exit {code}, {wall_s:.1f} s, peak RSS {peak / 2**30:.2f} GiB "
            f"(process tree); report.html {size}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
