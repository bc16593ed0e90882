"""Does a misbehaving system slow the sender? Lag against a slow and against a stuck target.

Two runs of one sender process (python -m loadgen):
- slow: every answer comes `--delay` s late (suts.faulty.SlowServer), at `--rate` for
  `--seconds`; an open-loop sender must then hold rate x delay requests (and connections) in
  flight. Every slot should go out on time and every event be acked.
- stuck: a server that accepts and never answers (suts.faulty.BlackHole), with
  `--max-inflight`; the slots past the cap are recorded as refused, and the ones sent go out on
  schedule.

    .venv/bin/python benchmarks/sender_stuck.py [--rate 500] [--seconds 4] [--delay 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line
from contract.records import INFLIGHT_CAP_ERROR, SENT_FIELDS
from loadgen.settings import SenderSettings, SendKnobs
from runtime.parquet import read_parts
from suts.faulty import BlackHole, SlowServer


def send(workdir: Path, url: str, pace: str, knobs: SendKnobs) -> tuple[dict, list[dict]]:
    out = workdir / "sent"
    settings = SenderSettings(target=url, pace=pace, out=out, knobs=knobs, start_delay_s=1.0)
    child = settings.start(workdir / "sender.log")
    done = child.wait_for("done", 120)
    child.wait(30)
    return done, read_parts(out, SENT_FIELDS).to_pylist()


def lag_ms(rows: list[dict], fraction: float) -> float:
    lags = sorted(r["sent_ns"] - r["intended_ns"] for r in rows if r["sent_ns"] is not None)
    return lags[min(len(lags) - 1, int(fraction * len(lags)))] / 1e6 if lags else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--delay", type=float, default=2.0, help="slow target's answer delay")
    parser.add_argument("--max-inflight", type=int, default=50, help="for the stuck target")
    args = parser.parse_args()
    print(machine_line())
    pace = f"{args.rate}:{args.seconds}"
    events = args.rate * args.seconds

    with tempfile.TemporaryDirectory() as tmp:
        server = SlowServer(args.delay)
        try:
            done, rows = send(
                Path(tmp), server.url, pace, SendKnobs(drain_timeout_s=args.delay + 10)
            )
        finally:
            server.close()
    acked = sum(1 for r in rows if 200 <= r["status"] < 300)
    publish_ns = [r["ack_ns"] - r["sent_ns"] for r in rows if r["ack_ns"] is not None]
    print(
        f"slow ({args.delay:g} s answers), {args.rate}/s for {args.seconds} s: "
        f"lag p50 {lag_ms(rows, 0.5):.3f} ms, p99 {lag_ms(rows, 0.99):.3f} ms, "
        f"max {lag_ms(rows, 1.0):.3f} ms; acked {acked}/{events}; "
        f"min publish {min(publish_ns, default=0) / 1e9:.3f} s; connections opened "
        f"{done['connections_opened']}, requests that waited for one {done['connection_waits']}"
    )

    with tempfile.TemporaryDirectory() as tmp:
        hole = BlackHole()
        try:
            knobs = SendKnobs(max_inflight=args.max_inflight, drain_timeout_s=0.5)
            done, rows = send(Path(tmp), hole.url, pace, knobs)
        finally:
            hole.close()
    sent = [r for r in rows if r["sent_ns"] is not None]
    refused = sum(1 for r in rows if r["error"] == INFLIGHT_CAP_ERROR)
    print(
        f"stuck (never answers), {args.rate}/s for {args.seconds} s, in-flight cap "
        f"{args.max_inflight}: {len(rows)}/{events} slots recorded, {len(sent)} sent "
        f"(lag p99 {lag_ms(sent, 0.99):.3f} ms, max {lag_ms(sent, 1.0):.3f} ms), "
        f"{refused} refused by the cap"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
