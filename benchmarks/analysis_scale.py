"""How fast `evbench analyze` is, from a 200-event run to a 1k-2k matrix at 4x, and where its
time goes.

Generates a synthetic 1k-2k-shaped run for six SUTs (501,000 events each, about 3 M in all, with
losses, duplicates, send failures and foreign deliveries; one Parquet part per second per side,
as real runs write), then times `evbench analyze` on it as a user runs it: a new process, Spark
start-up included, `--repeats` times (the first also compacts the parts: analysis.compact), with
the peak RSS of the whole process tree (the JVM included). `--scales 1,2,4` does the same with
every step carrying 2x and 4x the events and prints how wall time grows against the data.
`--tiny` times a 200-event run (one SUT, 100/s for 2 s) the same way.

`--breakdown` runs the first scale twice more and prints where the time went: phase by phase
(benchmarks/analysis_phases.py: Spark's start, the tasks' job, the driver's work, the reports),
the tasks' CPU split (reading, joining, the step pass, writing), and from Spark's event log
each job and stage, its wall time, tasks, records read and bytes shuffled.

Then prints the digest stage's values/s (fastdigest, as the job builds per-second digests) and
the pure-python `tdigest` package on the same data, and the cost per event of the export's
per-event cumulative lines (`--export-knative`: a compression-1000 digest queried after every
event). With --export-knative the timed analyze writes the 2019 files too.

    .venv/bin/python benchmarks/analysis_scale.py [--suts 6] [--scales 1] [--repeats 3]
        [--tiny] [--breakdown] [--keep DIR] [--export-knative]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.digests import digest_of
from analysis.export import running_quantiles
from benchmarks.common import machine_line
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from runtime.parquet import arrow_schema, dictionary_columns, part_files
from suts.lab import LOCAL_SUTS

TINY = [(100, 2)]
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


def write_sut(root: Path, sut: str, scale: int, seed: int, steps=STEPS_1K_2K) -> int:
    rng = np.random.default_rng(seed)
    sent_dir, recv_dir = root / sut / "sent", root / sut / "received"
    sent_dir.mkdir(parents=True)
    recv_dir.mkdir(parents=True)
    sent_schema, recv_schema = arrow_schema(SENT_FIELDS), arrow_schema(RECEIVED_FIELDS)
    seq, offset_ns, part, events = 0, 0, 0, 0
    for number, (rate, seconds) in enumerate(steps, start=1):
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
                use_dictionary=dictionary_columns(SENT_FIELDS),  # as the sender writes them
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
                        "subscriber": np.full(m, "/"),
                    },
                    schema=recv_schema,
                ),
                recv_dir / f"receiver-{part:06d}.parquet",
                use_dictionary=dictionary_columns(RECEIVED_FIELDS),
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
            "steps": [{"rate_per_s": r * scale, "duration_s": d} for r, d in steps],
        },
        "schedule": {"start_ns": T0},
    }
    (root / sut / "run.json").write_text(json.dumps(run))
    return events


def time_analyze(
    run_dir: Path, export_knative: bool, env: dict | None = None, extra: Sequence[str] = ()
) -> tuple[float, int]:
    """Wall seconds and the peak RSS (bytes) of the analysing process tree, JVM included."""
    flags = ["--export-knative"] if export_knative else []
    command = [sys.executable, "-m", "evbench", "analyze", str(run_dir), *flags, *extra]
    wall, peak, _ = timed(command, env)
    return wall, peak


def timed(command: Sequence[str], env: dict | None = None) -> tuple[float, int, str]:
    """Wall seconds, the peak RSS (bytes) of the process tree (sampled every 0.1 s) and the
    stdout of `command`, run in a new process; exits naming it where it fails."""
    started = time.perf_counter()
    process = psutil.Popen(
        list(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    peak = 0
    while process.poll() is None:
        peak = max(peak, tree_rss(process))
        time.sleep(0.1)
    elapsed = time.perf_counter() - started
    stdout, stderr = process.communicate()
    if process.returncode != 0:
        print(stderr[-3000:])
        raise SystemExit(f"{' '.join(command[:4])} failed")
    return elapsed, peak, stdout


def tree_rss(process: psutil.Process) -> int:
    total = 0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # a child that ended meanwhile
            total += member.memory_info().rss
    return total


def measure(run_dir: Path, events: int, repeats: int, export_knative: bool) -> float:
    """Times `evbench analyze` `repeats` times; prints each and the median; returns it."""
    walls, peaks = [], []
    for attempt in range(repeats):
        wall, peak = time_analyze(run_dir, export_knative)
        walls.append(wall)
        peaks.append(peak)
        note = " (compacting the parts first)" if attempt == 0 else ""
        print(f"    run {attempt + 1}: {wall:.1f} s, peak RSS {peak / 2**30:.2f} GiB{note}")
    median = statistics.median(walls)
    print(
        f"  evbench analyze{' --export-knative' if export_knative else ''}: median {median:.1f} s "
        f"wall for {events:,} events ({events / median:,.0f} events/s, Spark start-up included), "
        f"peak RSS {max(peaks) / 2**30:.2f} GiB"
    )
    return median


def breakdown(run_dir: Path) -> None:
    """Two more analyses: one timed phase by phase (benchmarks/analysis_phases.py, which also
    splits the tasks' CPU), one with Spark's event log: its jobs, stages and shuffles."""
    phases = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("analysis_phases.py")), str(run_dir)],
        capture_output=True,
        text=True,
    )
    print(phases.stdout.rstrip() if phases.returncode == 0 else phases.stderr[-3000:])
    logs = Path(tempfile.mkdtemp(prefix="evbench-eventlog-"))
    conf = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": logs.as_uri(),
        "spark.eventLog.compress": "false",
    }
    submit = " ".join(f"--conf {k}={v}" for k, v in conf.items())
    try:
        wall, _ = time_analyze(run_dir, False, {"PYSPARK_SUBMIT_ARGS": f"{submit} pyspark-shell"})
        print(f"  Spark's jobs in one analysis ({wall:.1f} s wall in all):")
        for line in stage_lines(next(logs.rglob("events_*"))):
            print("   ", line)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    chunks = list(run_dir.glob("*/analysis/records/received/chunk-*.parquet"))
    sent = [p for s in run_dir.glob("*/sent") for p in part_files(s)]
    received = [p for s in run_dir.glob("*/received") for p in part_files(s)]
    print(
        f"  files the tasks read: {len(sent):,} sent parts and {len(chunks)} chunks of "
        f"{len(received):,} received parts"
    )


def stage_lines(event_log: Path) -> list[str]:
    """Per Spark job: its wall time and each stage's time, tasks, records read, bytes shuffled."""
    stages, jobs = {}, {}
    with event_log.open() as handle:
        for line in handle:
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerStageCompleted":
                info = event["Stage Info"]
                metrics = {a["Name"]: a.get("Value") for a in info.get("Accumulables", [])}

                def value(name: str, metrics: dict = metrics) -> int:
                    return int(metrics.get(f"internal.metrics.{name}") or 0)

                stages[info["Stage ID"]] = (
                    (info["Completion Time"] - info["Submission Time"]) / 1000,
                    info["Number of Tasks"],
                    value("input.recordsRead") + value("shuffle.read.recordsRead"),
                    value("shuffle.write.bytesWritten"),
                    info["Stage Name"].split(" at ")[0],
                )
            elif kind == "SparkListenerJobStart":
                jobs[event["Job ID"]] = [event["Submission Time"], event["Stage IDs"], None]
            elif kind == "SparkListenerJobEnd":
                jobs[event["Job ID"]][2] = event["Completion Time"]
    first = min(start for start, _, _ in jobs.values())
    lines = []
    for job, (start, stage_ids, end) in sorted(jobs.items()):
        lines.append(
            f"job {job}: at {(start - first) / 1000:5.1f} s, {(end - start) / 1000:5.1f} s"
        )
        for stage in stage_ids:
            if stage in stages:  # stages skipped (their output reused) never completed
                seconds, tasks, records, shuffled, name = stages[stage]
                lines.append(
                    f"  stage {stage:3d} {seconds:5.1f} s, {tasks:4d} tasks, "
                    f"{records:>10,} records in, {shuffled / 1e6:7.1f} MB shuffled  ({name})"
                )
    return lines


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


def duckdb_peer(run_dir: Path, evbench_s: float) -> None:
    """DuckDB's query for the per-step figures on the same files, in a new process as evbench
    runs (benchmarks/duckdb_peer.py); its time against evbench's median, and how far the two
    figures are apart."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("duckdb_peer.py")), str(run_dir)],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        print(
            f"  DuckDB: not run ({done.stderr.strip().splitlines()[-1:]}; make bench installs it)"
        )
        return
    peer = json.loads(done.stdout)
    print(
        f"  DuckDB, one query on the same files: {wall:.1f} s wall in a new process "
        f"({peer['query_s']:.1f} s the query): evbench takes {evbench_s / wall:.1f}x as long"
    )
    print(f"  {agreement(run_dir, peer['steps'])}")


def agreement(run_dir: Path, steps: list[dict]) -> str:
    """Counts equal, and the largest differences of P99 and P99.99 end to end (ms)."""
    mine = {}
    for summary in run_dir.glob("*/analysis/summary.json"):
        for step in json.loads(summary.read_text())["steps"]:
            mine[(summary.parent.parent.name, step["step"])] = step
    # evbench's e2e_n is its count of delivered events (each one's first delivery).
    counts = {c: c for c in ("scheduled", "send_failures", "duplicates", "lost")}
    counts["delivered"] = "e2e_n"
    unequal, p99, p9999, as_max = 0, 0.0, 0.0, 0
    for peer in steps:
        step = mine.get((peer["sut"], peer["step"]))
        if step is None:
            unequal += 1
            continue
        unequal += sum(peer[theirs] != step[ours] for theirs, ours in counts.items())
        p99 = max(p99, abs(peer["e2e_ms"][1] - step["p99_e2e_ms"]))
        if step["p9999_is_max"]:  # under 10^4 samples evbench reports the maximum instead
            as_max += 1
        else:
            p9999 = max(p9999, abs(peer["e2e_ms"][2] - step["p9999_e2e_ms"]))
    return (
        f"agreement over {len(steps)} steps: {unequal} counts differ; largest difference "
        f"P99 e2e {p99:.4f} ms, P99.99 {p9999:.4f} ms ({as_max} steps under 10^4 samples, "
        "where evbench's P99.99 is the maximum, not compared)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suts", type=int, default=6)
    parser.add_argument(
        "--scales", default="1", help="events multipliers per step, comma-separated (1,2,4)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="analyses per size (median)")
    parser.add_argument("--tiny", action="store_true", help="also time a 200-event run")
    parser.add_argument("--breakdown", action="store_true", help="print where the time goes")
    parser.add_argument("--keep", type=Path, default=None, help="generate here and keep it")
    parser.add_argument(
        "--export-knative", action="store_true", help="time analyze --export-knative"
    )
    args = parser.parse_args()
    scales = [int(x) for x in args.scales.split(",")]
    print(machine_line())
    root = args.keep or Path(tempfile.mkdtemp(prefix="evbench-scale-"))
    names = LOCAL_SUTS[: args.suts]  # the matrix `make run` runs, in its order
    try:
        if args.tiny:
            run_dir = root / "bench-tiny"
            events = write_sut(run_dir, "direct", 1, 0, TINY)
            print(f"a {events}-event run (one SUT):")
            duckdb_peer(run_dir, measure(run_dir, events, args.repeats, args.export_knative))
        medians = {}
        for scale in scales:
            run_dir = root / f"bench-x{scale}-1k-2k"
            started = time.perf_counter()
            events = sum(write_sut(run_dir, name, scale, i) for i, name in enumerate(names))
            print(
                f"{len(names)} SUTs at {scale}x the 1k-2k pace: {events:,} events, generated in "
                f"{time.perf_counter() - started:.0f} s -> {run_dir}"
            )
            medians[scale] = (events, measure(run_dir, events, args.repeats, args.export_knative))
            duckdb_peer(run_dir, medians[scale][1])
            if args.breakdown and scale == scales[0]:
                breakdown(run_dir)
            if args.keep is None:
                shutil.rmtree(run_dir, ignore_errors=True)
        base_events, base_wall = medians[scales[0]]
        for scale, (events, wall) in medians.items():
            if scale != scales[0]:
                print(
                    f"{scale}x: {events / base_events:.1f}x the events took "
                    f"{wall / base_wall:.2f}x the time ({wall:.1f} s against {base_wall:.1f} s)"
                )
        digest_rates()
        running_line_cost()
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
