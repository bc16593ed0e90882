"""Max open-loop send rate of one sender process (8 KB binary CloudEvents to a real receiver).

For each rate: one `python -m loadgen` process runs a single step against a receiver process on
loopback. The rate holds when the achieved send rate is >= 99 % of target and sender lag p99
(sent - intended) is <= 2 ms. Prints one row per rate and the highest rate that held.

    .venv/bin/python benchmarks/sender_rate.py [--rates 2000,4000,...] [--seconds 10] [--repeats 3]

With --repeats, each rate runs that many times and the row shows medians (and each run's lag
p99 and failures). --events N runs each rate for N events instead of --seconds (a rate of R
for N / R seconds). At the end the receiver's count of connections it closed as idle: 0 when
the sender retired each before the receiver's limit. With --kafka, the sender produces Kafka
records (the source-kafka path) to a local Tansu broker started afresh for every run, a topic of
--partitions partitions, and nothing consumes them; publish latency is then the produce ack.

Then, in the same invocation and against the same receiver, what a user would pick instead, each
as fast as it goes for --seconds (closed loop: their best rate), counted by the receiver over
the middle of the run: Locust's FastHttpUser in one process (benchmarks/locust_post.py,
--locust-users users) and hey (`-c --hey-workers`; `apt-get install hey`, or `make bench-tools`).
The ratios compare evbench's highest holding open-loop rate with those best rates.
`--no-others` skips them.

The receiver shares the machine, so on 2 cores this is a floor for the sender, not a ceiling.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line
from contract.records import SENT_FIELDS
from evbench.instruments import start_receiver
from loadgen.settings import SenderSettings, SendKnobs
from runtime.formulas import achieved_rate_per_s
from runtime.parquet import read_parts
from suts.tansu import Tansu, create_topic

# The bar a rate must clear to count as held: docs/design.md §5's target for one sender process.
LAG_BAR_MS = 1.0


def run_rate(
    workdir: Path,
    url: str,
    rate: int,
    seconds: int,
    payload_bytes: int,
    tag: str,
    scraped: bool = False,
) -> dict:
    """One sender at one rate; `scraped`: with its /metrics served and scraped every second,
    as a Prometheus watching a long run would."""
    out = workdir / f"sent-{tag}"
    settings = SenderSettings(
        target=url,
        pace=f"{rate}:{seconds}",
        out=out,
        knobs=SendKnobs(payload_bytes=payload_bytes, metrics_port=0 if scraped else None),
        start_delay_s=1.0,
    )
    child = settings.start(workdir / f"sender-{tag}.log")
    process = psutil.Process(child.pid)
    rss = []
    done = None
    cpu = None
    scraper: threading.Event | None = None
    while done is None:
        try:
            doc = child.next_line(timeout_s=seconds + 60)
        except Exception:
            break
        if doc is None:
            break
        if doc.get("event") == "metrics_listening":
            scraper = _scrape_every_second(doc["url"])
        if doc.get("event") == "progress":
            rss.append(process.memory_info().rss)
        if doc.get("event") == "done":
            done = doc
            cpu = process.cpu_times()
    child.wait(30)
    if scraper is not None:
        scraper.set()
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


def run_kafka_rate(workdir: Path, args: argparse.Namespace, rate: int, tag: str) -> dict:
    """One run against a broker of its own: Tansu keeps records in memory, so a broker reused
    across runs would hold ~800 MB more per 10 s at 10,000/s and each repeat would measure a
    different (slower) broker, not the same one again."""
    broker = Tansu(workdir / f"tansu-{tag}.log")
    bootstrap = broker.start()
    try:
        create_topic(bootstrap, "bench", args.partitions, 1)
        url = f"kafka://{bootstrap}/bench"
        return run_rate(
            workdir, url, rate, args.seconds, args.payload_bytes, tag, args.sender_metrics
        )
    finally:
        broker.stop()


def _scrape_every_second(url: str) -> threading.Event:
    """GET `url` every second on a thread until the returned event is set."""
    stop = threading.Event()

    def scrape() -> None:
        with httpx.Client(timeout=1.0) as client:
            while not stop.wait(1.0):
                with contextlib.suppress(httpx.HTTPError):
                    client.get(url)

    threading.Thread(target=scrape, daemon=True).start()
    return stop


def closed_loop_rate(argv: list[str], stats_url: str, seconds: int, log: Path) -> float:
    """Run a load tool for `seconds`; events/s the receiver counted in the middle of the run."""
    env = {**os.environ, "EVBENCH_LOCUST_RATE": "0"}
    with log.open("w") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        time.sleep(2.0)  # connections, ramp-up
        first = httpx.get(stats_url).json()["received"]
        t_first = time.monotonic()
        time.sleep(max(1.0, seconds - 3.0))
        last = httpx.get(stats_url).json()["received"]
        t_last = time.monotonic()
        process.wait(timeout=seconds + 60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return (last - first) / (t_last - t_first)


def run_others(args: argparse.Namespace, workdir: Path, url: str) -> dict[str, float]:
    stats_url = url.rstrip("/") + "/stats"
    rates: dict[str, float] = {}
    locustfile = Path(__file__).with_name("locust_post.py")
    rates["Locust FastHttpUser, 1 process"] = closed_loop_rate(
        [
            sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", "--only-summary",
            "-u", str(args.locust_users), "-r", str(args.locust_users), "-t", f"{args.seconds}s",
            "--host", url.rstrip("/"), "--stop-timeout", "5",
        ],
        stats_url, args.seconds, workdir / "locust.log",
    )  # fmt: skip
    hey = shutil.which("hey")
    if hey is None:
        print("hey is not installed (apt-get install hey, or make bench-tools): skipped")
    else:
        body = workdir / "body.json"
        body.write_bytes(b'{"evbenchid":"hey","pad":"' + b"x" * (8192 - 28) + b'"}')
        headers = []
        for header in (
            "ce-specversion: 1.0",
            "ce-id: hey",
            "ce-source: hey",
            "ce-type: dev.evbench.measure",
        ):
            headers += ["-H", header]
        rates[f"hey, -c {args.hey_workers}"] = closed_loop_rate(
            [
                hey, "-z", f"{args.seconds}s", "-c", str(args.hey_workers), "-m", "POST",
                "-T", "application/json", "-D", str(body), *headers, url,
            ],
            stats_url, args.seconds, workdir / "hey.log",
        )  # fmt: skip
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="2000,5000,10000,12000,15000")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument(
        "--events", type=int, default=None, help="events per rate instead of --seconds"
    )
    parser.add_argument("--payload-bytes", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=1, help="runs per rate; rows show medians")
    parser.add_argument("--kafka", action="store_true", help="produce to a local Tansu broker")
    parser.add_argument("--partitions", type=int, default=100, help="with --kafka (default 100)")
    parser.add_argument("--no-others", action="store_true", help="skip Locust and hey")
    parser.add_argument(
        "--sender-metrics",
        action="store_true",
        help="serve the sender's /metrics (--sender-metrics-port 0) and scrape it every second",
    )
    parser.add_argument("--locust-users", type=int, default=64)
    parser.add_argument("--hey-workers", type=int, default=200)
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]

    print(machine_line())
    print(
        f"one sender process, {args.payload_bytes}-byte events, "
        + (f"{args.seconds} s" if args.events is None else f"{args.events:,} events")
        + f" per rate, median of {args.repeats}\n"
    )
    others: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if args.kafka:
            url, stop = "", lambda: None  # a broker per run: see run_kafka_rate
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
                seconds = args.seconds if args.events is None else max(1, args.events // rate)
                runs = []
                for i in range(args.repeats):
                    tag = f"{rate}-{i}"
                    if args.kafka:
                        runs.append(run_kafka_rate(workdir, args, rate, tag))
                    else:
                        runs.append(
                            run_rate(
                                workdir,
                                url,
                                rate,
                                seconds,
                                args.payload_bytes,
                                tag,
                                args.sender_metrics,
                            )
                        )
                row = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
                holds = row["achieved"] >= 0.99 * rate and row["lag_p99_ms"] <= LAG_BAR_MS
                holds = holds and row["ok"] == rate * seconds
                if holds:
                    best = rate
                print(
                    f"{rate:>9} {row['achieved']:>11.1f} {100 * row['achieved'] / rate:>6.2f}% "
                    f"{row['ok']:>8} {row['lag_p50_ms']:>6.2f}ms {row['lag_p99_ms']:>6.2f}ms "
                    f"{row['lag_max_ms']:>6.1f}ms {row['publish_p99_ms']:>6.2f}ms "
                    f"{row['rss_mb_first']:>6.0f}->{row['rss_mb_last']:<5.0f}"
                    f" cpu/1k {row['cpu_s_per_1000']:.3f}s"
                    f"  {'holds' if holds else 'misses'}"
                    + (
                        "  (lag p99 per run: "
                        + ", ".join(f"{r['lag_p99_ms']:.2f}" for r in runs)
                        + " ms; failed per run: "
                        + ", ".join(str(r["events"] - r["ok"]) for r in runs)
                        + ")"
                        if len(runs) > 1
                        else ""
                    ),
                    flush=True,
                )
            print(
                f"\nmax open-loop rate that held (>= 99 % achieved, lag p99 <= {LAG_BAR_MS:g} ms): "
                f"{best if best else 'none'} events/s per process"
            )
            if not args.kafka:
                closed = httpx.get(url + "stats", timeout=5).json()["idle_closed"]
                print(f"connections the receiver closed as idle, all runs: {closed}")
            others = {} if args.kafka or args.no_others else run_others(args, workdir, url)
        finally:
            stop()
    if others:
        print("\nwhat a user would pick instead, as fast as it goes (closed loop), same receiver:")
        for name, rate in others.items():
            ratio = f"{best / rate:.2f}x" if best else "n/a"
            print(f"  {name:<34} {rate:>9,.0f} events/s   evbench open-loop / this: {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
