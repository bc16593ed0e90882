"""Max open-loop send rate of one sender process (8 KB binary CloudEvents to a real receiver).

For each rate: one `python -m loadgen` process runs a single step against a receiver process on
loopback. The rate holds when the achieved send rate is >= 99 % of target and sender lag p99
(sent - intended) is <= 2 ms. Prints one row per rate and the highest rate that held.

    .venv/bin/python benchmarks/sender_rate.py [--rates 2000,4000,...] [--seconds 10] [--repeats 3]

With --repeats, each rate runs that many times and the row shows medians. With --kafka, the
sender produces Kafka records (the source-kafka path) to a fresh local Tansu broker, a topic of
--partitions partitions, and nothing consumes them; publish latency is then the produce ack.

The receiver shares the machine, so on 2 cores this is a floor for the sender, not a ceiling.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import psutil
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line
from evbench.formulas import achieved_rate_per_s
from evbench.instruments import start_receiver
from evbench.parquet import read_parts
from evbench.procs import Child
from evbench.records import SENT_FIELDS
from suts.tansu import Tansu, create_topic


def run_rate(
    workdir: Path, url: str, rate: int, seconds: int, payload_bytes: int, tag: str
) -> dict:
    out = workdir / f"sent-{tag}"
    child = Child(
        "sender",
        [
            sys.executable,
            "-m",
            "loadgen",
            "--target",
            url,
            "--pace",
            f"{rate}:{seconds}",
            "--out",
            str(out),
            "--payload-bytes",
            str(payload_bytes),
            "--start-delay",
            "1",
        ],
        workdir / f"sender-{tag}.log",
    )
    process = psutil.Process(child.pid)
    rss = []
    done = None
    cpu = None
    while done is None:
        try:
            doc = child.next_line(timeout_s=seconds + 60)
        except Exception:
            break
        if doc is None:
            break
        if doc.get("event") == "progress":
            rss.append(process.memory_info().rss)
        if doc.get("event") == "done":
            done = doc
            cpu = process.cpu_times()
    child.wait(30)
    table = read_parts(out, SENT_FIELDS)
    sent_ns = table.column("sent_ns")
    lag_ns = pc.subtract(sent_ns, table.column("intended_ns")).to_numpy(zero_copy_only=False)
    ok = (
        pc.sum(
            pc.and_(
                pc.greater_equal(table.column("status"), 200), pc.less(table.column("status"), 300)
            )
        ).as_py()
        or 0
    )
    lag_ns = sorted(lag_ns)
    publish_ns = sorted(
        pc.subtract(table.column("ack_ns"), sent_ns).drop_null().to_numpy(zero_copy_only=False)
    )
    start_ns = pc.min(table.column("intended_ns")).as_py()
    achieved = achieved_rate_per_s(table.num_rows, start_ns, pc.max(sent_ns).as_py(), rate)
    return {
        "rate": rate,
        "achieved": achieved,
        "ok": ok,
        "events": table.num_rows,
        "lag_p50_ms": lag_ns[len(lag_ns) // 2] / 1e6,
        "lag_p99_ms": lag_ns[int(len(lag_ns) * 0.99) - 1] / 1e6,
        "lag_max_ms": lag_ns[-1] / 1e6,
        "publish_p99_ms": publish_ns[int(len(publish_ns) * 0.99) - 1] / 1e6
        if publish_ns
        else float("nan"),
        "cpu_s_per_1000": (cpu.user + cpu.system) * 1000 / table.num_rows if cpu else float("nan"),
        "rss_mb_first": rss[0] / 2**20 if rss else float("nan"),
        "rss_mb_last": rss[-1] / 2**20 if rss else float("nan"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="2000,4000,5000,6000,7000,8000")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--payload-bytes", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=1, help="runs per rate; rows show medians")
    parser.add_argument("--kafka", action="store_true", help="produce to a local Tansu broker")
    parser.add_argument("--partitions", type=int, default=100, help="with --kafka (default 100)")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]

    print(machine_line())
    print(
        f"one sender process, {args.payload_bytes}-byte events, {args.seconds} s per rate, "
        f"median of {args.repeats}\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if args.kafka:
            broker = Tansu(workdir / "tansu.log")
            bootstrap = broker.start()
            create_topic(bootstrap, "bench", args.partitions, 1)
            url, stop = f"kafka://{bootstrap}/bench", broker.stop
        else:
            receiver, base_url = start_receiver(workdir / "received", workdir / "receiver.log")
            url, stop = base_url + "/", receiver.stop
        try:
            print(
                f"{'target/s':>9} {'achieved/s':>11} {'%':>7} {'ok':>8} {'lag p50':>8} "
                f"{'lag p99':>8} {'lag max':>8} {'pub p99':>8} {'RSS MB':>13}  verdict"
            )
            best = None
            for rate in rates:
                runs = [
                    run_rate(workdir, url, rate, args.seconds, args.payload_bytes, f"{rate}-{i}")
                    for i in range(args.repeats)
                ]
                row = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
                holds = row["achieved"] >= 0.99 * rate and row["lag_p99_ms"] <= 2.0
                holds = holds and row["ok"] == rate * args.seconds
                if holds:
                    best = rate
                print(
                    f"{rate:>9} {row['achieved']:>11.1f} {100 * row['achieved'] / rate:>6.2f}% "
                    f"{row['ok']:>8} {row['lag_p50_ms']:>6.2f}ms {row['lag_p99_ms']:>6.2f}ms "
                    f"{row['lag_max_ms']:>6.1f}ms {row['publish_p99_ms']:>6.2f}ms "
                    f"{row['rss_mb_first']:>6.0f}->{row['rss_mb_last']:<5.0f}"
                    f" cpu/1k {row['cpu_s_per_1000']:.3f}s"
                    f"  {'holds' if holds else 'misses'}",
                    flush=True,
                )
        finally:
            stop()
    print(
        f"\nmax open-loop rate that held (>= 99 % achieved, lag p99 <= 2 ms): "
        f"{best if best else 'none'} events/s per process"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
