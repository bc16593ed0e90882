"""`python -m loadgen`: one open-loop sender process (`evbench send` runs the same).

The only module that turns the process into a gevent process: it patches first, then imports the
engine. Progress goes to stdout as JSON lines, for `evbench run` or a person to read.
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import secrets  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402

from evbench.errors import EvbenchError  # noqa: E402
from evbench.parquet import PartWriter  # noqa: E402
from evbench.records import SENT_FIELDS  # noqa: E402
from loadgen.engine import Engine  # noqa: E402
from loadgen.http import HttpTransport  # noqa: E402
from loadgen.kafka import KafkaTransport  # noqa: E402
from loadgen.pace import parse_warmup, resolve_pace  # noqa: E402
from loadgen.payload import PayloadBuilder  # noqa: E402
from loadgen.schedule import plan_steps  # noqa: E402


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
        type=int,
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
        type=int,
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
        "--workers", type=int, default=1, help="workers sharing the pace (default 1)"
    )
    return parser


def _emit(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def _raise_fd_limit(wanted: int) -> int:
    """Room for one connection per in-flight request; returns the usable in-flight cap."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted + 256)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return min(wanted, soft - 256)


def _transport(args: argparse.Namespace, max_inflight: int):
    source = f"evbench/sender/{args.worker}"
    if args.target.startswith("kafka://"):
        config = dict(_key_value(item) for item in args.kafka_config)
        return KafkaTransport(args.target, source, args.request_timeout, config)
    return HttpTransport(args.target, source, max_inflight, request_timeout_s=args.request_timeout)


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
        transport = _transport(args, max_inflight)
    except (EvbenchError, ValueError) as exc:
        print(f"evbench send: {exc}", file=sys.stderr)
        return 2

    writer = PartWriter(args.out, SENT_FIELDS, prefix=f"sent-w{args.worker}")
    engine = Engine(
        transport,
        writer,
        steps,
        payloads,
        run_tag=run_tag,
        worker=args.worker,
        workers=args.workers,
        max_inflight=max_inflight,
        drain_timeout_s=args.drain_timeout,
        flush_interval_s=args.flush_interval,
        decoy_every=args.decoy_every,
        emit=_emit,
    )
    for sig in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(sig, engine.stop, signal.Signals(sig).name)

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
    # Start-up objects (imports, schedule, payload pad) never die: keep them out of every
    # between-steps collection so those stay short.
    gc.collect()
    gc.freeze()
    wall_start = time.perf_counter()
    summary = engine.run(start_ns)
    summary["run_tag"] = run_tag
    summary["wall_s"] = round(time.perf_counter() - wall_start, 3)
    (args.out / f"_sender-w{args.worker}.json").write_text(json.dumps(summary, indent=2))
    _emit({"event": "done", **summary})
    return 130 if summary["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())
