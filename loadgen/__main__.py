"""`python -m loadgen`: one open-loop sender process (`evbench send` runs the same).

The engine runs on uvloop. Progress goes to stdout as JSON lines, for `evbench run` or a person
to read.
"""

import argparse
import asyncio
import gc
import json
import os
import secrets
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

import uvloop

from evbench.shared.argtypes import at_least_one, non_negative
from evbench.shared.errors import EvbenchError
from evbench.shared.parquet import PartWriter
from evbench.shared.procs import raise_fd_limit
from evbench.shared.records import SENT_FIELDS
from loadgen.engine import Engine
from loadgen.http import HttpTransport
from loadgen.kafka import KafkaTransport
from loadgen.pace import parse_warmup, resolve_pace
from loadgen.payload import PayloadBuilder
from loadgen.recorder import RowPlan
from loadgen.request import Transport
from loadgen.schedule import plan_steps

_SWITCH_INTERVAL_S = 0.0002


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evbench send",
        description="Open-loop paced sender: one binary-mode CloudEvent per schedule slot, whether "
        "or not earlier ones were answered; every attempt is recorded under --out.",
    )
    parser.add_argument(
        "--target",
        required=True,
        help="ingress URL, e.g. http://127.0.0.1:8080/, or kafka://host:port/topic to produce "
        "records straight to a topic",
    )
    parser.add_argument(
        "--decoy-every",
        type=non_negative,
        default=0,
        metavar="N",
        help="every Nth event gets a type no trigger matches, to test filters (default 0: none)",
    )
    parser.add_argument(
        "--kafka-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="producer setting for kafka:// targets (repeatable), e.g. linger.ms=0",
    )
    parser.add_argument(
        "--pace", required=True, help="pace name from paces/ or a spec like 500:10,1000:10"
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for sent/*.parquet")
    parser.add_argument("--run-tag", default=None, help="prefix of event ids (default: random)")
    parser.add_argument(
        "--payload-bytes", type=int, default=8192, help="payload size (default 8192)"
    )
    parser.add_argument(
        "--step-gap",
        type=float,
        default=2.0,
        metavar="S",
        help="pause between steps, where GC runs (default 2)",
    )
    parser.add_argument(
        "--warmup",
        default=None,
        metavar="DURATION@RATE",
        help="unrecorded-by-metrics warmup before the pace, e.g. 10s@100",
    )
    parser.add_argument(
        "--max-inflight",
        type=at_least_one,
        default=4096,
        help="cap on unanswered requests; slots over it are recorded as failures",
    )
    parser.add_argument("--request-timeout", type=float, default=30.0, metavar="S")
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="wait this long for answers after the last slot (default 10)",
    )
    parser.add_argument(
        "--start-at-ns",
        type=int,
        default=None,
        help="epoch ns of the schedule start (lets several workers share one)",
    )
    parser.add_argument(
        "--start-delay",
        type=float,
        default=0.5,
        metavar="S",
        help="without --start-at-ns, start this long after launch (default 0.5)",
    )
    parser.add_argument(
        "--flush-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between record flushes (default 1.0)",
    )
    parser.add_argument("--worker", type=int, default=0, help="this worker's index (default 0)")
    parser.add_argument(
        "--workers", type=at_least_one, default=1, help="workers sharing the pace (default 1)"
    )
    return parser


def _emit(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def _raise_fd_limit(wanted: int) -> int:
    """Room for one connection per in-flight request; returns the usable in-flight cap."""
    usable = min(wanted, raise_fd_limit(wanted + 256) - 256)
    _grow_fd_table(usable + 128)
    return usable


def _grow_fd_table(descriptors: int) -> None:
    """Size the kernel's descriptor table for every connection now, before any thread starts.

    Linux doubles a process's fd table as descriptors are opened (at 256, 512, 1024, ...), and in
    a process with more than one thread each doubling waits for an RCU grace period: measured
    here as 9-20 ms stalls of the pacer while a slow system made it open its 256th, 512th and
    1024th connection. Opening the highest descriptor once grows the table in one go; it never
    shrinks.
    """
    try:
        os.dup2(sys.stderr.fileno(), descriptors)
    except OSError:
        return  # over the limit: the table then grows as it goes
    os.close(descriptors)


def _transport(args: argparse.Namespace, payloads: PayloadBuilder, max_inflight: int) -> Transport:
    source = f"evbench/sender/{args.worker}"
    if args.target.startswith("kafka://"):
        config = dict(_key_value(item) for item in args.kafka_config)
        return KafkaTransport(args.target, source, payloads, args.request_timeout, config)
    return HttpTransport(args.target, source, payloads, max_inflight)


def _key_value(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ValueError(f"--kafka-config '{item}' must be KEY=VALUE")
    return key.strip(), value.strip()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if not 0 <= args.worker < args.workers:
            raise ValueError(f"--worker {args.worker} must be in 0..{args.workers - 1} (--workers)")
        pace = resolve_pace(args.pace)
        warmup = parse_warmup(args.warmup) if args.warmup else None
        steps = plan_steps(pace.steps, args.step_gap, warmup)
        run_tag = args.run_tag or secrets.token_hex(3)
        longest_id = len(f"{run_tag}-{args.workers}-{sum(s.events for s in steps)}")
        payloads = PayloadBuilder(args.payload_bytes, longest_id)
        max_inflight = _raise_fd_limit(args.max_inflight)
        transport = _transport(args, payloads, max_inflight)
    except (EvbenchError, ValueError) as exc:
        print(f"evbench send: {exc}", file=sys.stderr)
        return 2
    return uvloop.run(_send(args, pace, steps, run_tag, transport, max_inflight))


async def _send(args, pace, steps, run_tag: str, transport: Transport, max_inflight: int) -> int:
    writer = PartWriter(args.out, SENT_FIELDS, prefix=f"sent-w{args.worker}")
    plan = RowPlan(
        steps=steps,
        event_id_prefix=f"{run_tag}-{args.worker}-",
        worker=args.worker,
        payload_bytes=args.payload_bytes,
        decoy_every=args.decoy_every,
    )
    engine = Engine(
        transport,
        writer,
        steps,
        plan=plan,
        workers=args.workers,
        max_inflight=max_inflight,
        request_timeout_s=args.request_timeout,
        drain_timeout_s=args.drain_timeout,
        flush_interval_s=args.flush_interval,
        emit=_emit,
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, engine.stop, signal.Signals(sig).name)

    # Start-up work first, then the start instant: --start-delay is the time the process has
    # from here to its first slot, not a budget the warm-up may eat into.
    await engine.warm_up()
    # Start-up objects (imports, schedule, payload pad) never die: keep them out of every
    # between-steps collection so those stay short.
    gc.collect()
    gc.freeze()
    start_ns = args.start_at_ns or time.time_ns() + int(args.start_delay * 1e9)
    _emit(
        {
            "event": "start",
            "pid": os.getpid(),
            "start_ns": start_ns,
            "run_tag": run_tag,
            "pace": pace.name,
            "spec": pace.spec,
            "max_inflight": max_inflight,
            "steps": [asdict(s) for s in steps],
        }
    )
    # The record writer's thread holds the GIL now and then; by default the pacer would wait up
    # to 5 ms for it when its timer fires. A shorter interval bounds that wait.
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    wall_start = time.perf_counter()
    summary = await engine.run(start_ns)
    summary["run_tag"] = run_tag
    summary["wall_s"] = round(time.perf_counter() - wall_start, 3)
    (args.out / f"_sender-w{args.worker}.json").write_text(json.dumps(summary, indent=2))
    _emit({"event": "done", **summary})
    return 130 if summary["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())
