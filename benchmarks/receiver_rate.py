"""Max sustained rate of the receiver with recording on (8 KB binary CloudEvents).

A closed-loop blaster (raw asyncio on uvloop, keep-alive connections each keeping a window of
pipelined requests, every event with its own id) runs in its own process for `--seconds`. The
receiver's own /stats count what it accepted in the measured window, and the run only counts if
every accepted event is on disk afterwards (recording kept up). Prints events/s, CPU of both
processes (a receiver near 100 % is the bottleneck; a blaster near 100 % means the figure is a
floor), the receiver's CPU per 1,000 events, and its RSS before and after.

Then, against the same receiver, wrk (C, closed loop, one request at a time per connection, no
pipelining; `apt-get install wrk` or `make bench-tools`) posts the same 8 KB event for
`--seconds` over `--wrk-connections` connections; the receiver's own count gives the rate.

    .venv/bin/python benchmarks/receiver_rate.py [--seconds 10] [--connections 8] [--window 16]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line
from contract.records import RECEIVED_FIELDS
from evbench.instruments import start_receiver
from loadgen.payload import PayloadBuilder
from runtime.parquet import read_parts

# Answers are counted by their status lines, whatever headers follow (the receiver's
# Keep-Alive: timeout=N, since 43dd48f); a chunk's last bytes are kept for a line cut in two.
_STATUS = b"HTTP/1.1 "


class _Pipelined(asyncio.Protocol):
    def __init__(self, make_request, window: int, stop_at: float, counter: list[int]) -> None:
        self.make_request = make_request
        self.window = window
        self.stop_at = stop_at
        self.counter = counter
        self.tail = b""
        self.outstanding = 0
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.transport = transport
        for _ in range(self.window):
            self._send()

    def _send(self) -> None:
        self.transport.writelines(self.make_request())
        self.outstanding += 1

    def data_received(self, data: bytes) -> None:
        data = self.tail + data
        answered = data.count(_STATUS)
        # shorter than a status line: no line counted already fits in it again
        self.tail = data[-(len(_STATUS) - 1) :]
        self.outstanding -= answered
        self.counter[0] += answered
        if time.monotonic() < self.stop_at:
            for _ in range(answered):
                self._send()
        elif self.outstanding == 0 and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _blast(port: int, seconds: float, connections: int, window: int, worker: int) -> int:
    payload = PayloadBuilder(8192, longest_id=32, seed=worker).build("bench")
    seq = iter(range(10**12))
    prefix = f"b{worker}-"

    def make_request() -> list[bytes]:
        eid = f"{prefix}{next(seq)}"
        head = (
            f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nce-specversion: 1.0\r\nce-id: {eid}\r\n"
            f"ce-evbenchid: {eid}\r\nce-source: bench\r\nce-type: dev.evbench.measure\r\n"
            f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
        ).encode()
        return [head, payload]

    loop = asyncio.get_running_loop()
    stop_at = time.monotonic() + seconds
    counter = [0]
    protocols = []
    for _ in range(connections):
        _, protocol = await loop.create_connection(
            lambda: _Pipelined(make_request, window, stop_at, counter), "127.0.0.1", port
        )
        protocols.append(protocol)
    await asyncio.wait_for(asyncio.gather(*(p.done for p in protocols)), seconds + 30)
    return counter[0]


def _blaster_main(port: int, seconds: float, connections: int, window: int, worker: int) -> None:
    import uvloop

    uvloop.run(_blast(port, seconds, connections, window, worker))


_WRK_SCRIPT = """wrk.method = "POST"
wrk.body = [[{body}]]
wrk.headers["ce-specversion"] = "1.0"
wrk.headers["ce-id"] = "wrk"
wrk.headers["ce-source"] = "wrk"
wrk.headers["ce-type"] = "dev.evbench.measure"
wrk.headers["content-type"] = "application/json"
"""


def wrk_rate(base_url: str, rx: psutil.Process, seconds: float, connections: int, workdir: Path):
    """(events/s the receiver counted under wrk, wrk's own requests/s, receiver CPU s per 1k)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        return None
    script = workdir / "post.lua"
    body = PayloadBuilder(8192, longest_id=32, seed=1).build("wrk").decode()
    script.write_text(_WRK_SCRIPT.format(body=body))
    before = httpx.get(f"{base_url}/stats").json()["received"]
    cpu_before = sum(rx.cpu_times()[:2])
    out = subprocess.run(
        [wrk, "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", str(script), base_url + "/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    received = httpx.get(f"{base_url}/stats").json()["received"] - before
    cpu_s = sum(rx.cpu_times()[:2]) - cpu_before
    own = next(
        (float(line.split()[1]) for line in out.splitlines() if line.startswith("Requests/sec")), 0
    )
    return received / seconds, own, cpu_s * 1000 / max(1, received)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--window", type=int, default=16, help="pipelined requests per connection")
    parser.add_argument("--wrk-connections", type=int, default=32)
    args = parser.parse_args()
    print(machine_line())

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        receiver, base_url = start_receiver(workdir / "received", workdir / "receiver.log")
        try:
            port = int(base_url.rsplit(":", 1)[1])
            stats_url = f"{base_url}/stats"
            rx = psutil.Process(receiver.pid)
            rss_before = rx.memory_info().rss
            blaster = multiprocessing.get_context("spawn").Process(
                target=_blaster_main, args=(port, args.seconds, args.connections, args.window, 0)
            )
            blaster.start()
            bx = psutil.Process(blaster.pid)
            rx.cpu_percent(None)
            bx.cpu_percent(None)
            # Measure the middle of the run: skip the first second (connections, warm-up).
            time.sleep(1.0)
            first = httpx.get(stats_url).json()
            t_first = time.monotonic()
            rx.cpu_percent(None)
            bx.cpu_percent(None)
            rx_cpu_first = sum(rx.cpu_times()[:2])
            time.sleep(max(1.0, args.seconds - 2.0))
            last = httpx.get(stats_url).json()
            t_last = time.monotonic()
            rx_cpu_s = sum(rx.cpu_times()[:2]) - rx_cpu_first
            rx_cpu, bx_cpu = rx.cpu_percent(None), bx.cpu_percent(None)
            rss_after = rx.memory_info().rss
            blaster.join(args.seconds + 60)
            wrk = wrk_rate(base_url, rx, args.seconds, args.wrk_connections, workdir)
            final = httpx.get(stats_url).json()
        finally:
            receiver.stop()
        on_disk = read_parts(workdir / "received", RECEIVED_FIELDS).num_rows

    rate = (last["received"] - first["received"]) / (t_last - t_first)
    kept_up = on_disk == final["received"] and final["malformed"] == 0
    print(
        f"blaster: 1 process, {args.connections} connections x {args.window} pipelined, "
        f"{args.seconds:g} s; measured window {t_last - t_first:.1f} s"
    )
    print(
        f"receiver accepted {rate:,.0f} events/s with recording on "
        f"(CPU receiver {rx_cpu:.0f} %, blaster {bx_cpu:.0f} %)"
    )
    print(
        f"receiver CPU per 1,000 events: "
        f"{rx_cpu_s * 1000 / (last['received'] - first['received']):.3f} s"
    )
    if wrk is None:
        print("wrk is not installed (apt-get install wrk, or make bench-tools): skipped")
    else:
        print(
            f"under wrk (-c {args.wrk_connections}, closed loop, no pipelining): receiver recorded "
            f"{wrk[0]:,.0f} events/s (wrk says {wrk[1]:,.0f} requests/s), "
            f"receiver CPU per 1,000 events {wrk[2]:.3f} s"
        )
    print(
        f"accepted {final['received']:,} in total (blaster and wrk), {on_disk:,} on disk "
        f"after stop: "
        f"{'recording kept up' if kept_up else 'RECORDS MISSING'}"
    )
    print(
        f"receiver RSS {rss_before / 2**20:.0f} MB before, {rss_after / 2**20:.0f} MB at the end "
        f"of the measured window"
    )
    return 0 if kept_up else 1


if __name__ == "__main__":
    sys.exit(main())
