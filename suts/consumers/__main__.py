"""`python -m suts.consumers CLIENT`: one Kafka consumer draining a topic, in a process of its own
so that its memory is its own, reporting on stdout as JSON lines:

    ready      the consumer exists (its settings, its pid)
    progress   every --report-interval: consumed so far, when the first message came (wall
               clock ns), the Python
               heap (with --tracemalloc) and librdkafka's fetch queue (confluent)
    trimmed    after --expect messages, malloc_trim(0) ran (with --trim-after-drain)
    done       at SIGTERM/SIGINT: consumed per partition, errors

The memory itself (RSS, USS, the high-water mark) is read by the parent from /proc, never by
the consumer about itself. A memory limit (--memory-limit) is set here, before the client is
imported, as RLIMIT_DATA: what the consumer does when memory runs short (an error, a crash, a
partition never consumed) is the observation, so nothing here catches it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import time

from contract.consumerlines import ConsumerDone, ConsumerLine, ConsumerProgress, ConsumerReady

CLIENTS = ("confluent", "aiokafka", "kafka-python")


def _emit(line: ConsumerLine) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m suts.consumers", description=__doc__)
    parser.add_argument("client", choices=CLIENTS)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument(
        "--setting", action="append", default=[], metavar="KEY=VALUE", help="a client setting"
    )
    parser.add_argument("--expect", type=int, default=None, help="messages in the backlog")
    parser.add_argument("--report-interval", type=float, default=1.0)
    parser.add_argument("--tracemalloc", action="store_true", help="report the Python heap")
    parser.add_argument("--trim-after-drain", action="store_true", help="malloc_trim(0) then")
    parser.add_argument("--memory-limit", type=int, default=None, metavar="BYTES")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = dict(item.split("=", 1) for item in args.setting)
    if args.memory_limit:
        resource.setrlimit(resource.RLIMIT_DATA, (args.memory_limit, args.memory_limit))
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start(1)
    from suts.consumers.clients import open_client  # after the limit: the client counts

    stop: list[str] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.append(signal.Signals(signum).name))
    client = open_client(args.client, args.bootstrap, args.topic, args.group, settings)
    started = time.monotonic()
    _emit(ConsumerReady(event="ready", pid=os.getpid(), client=args.client, settings=settings))
    consumed = 0
    per_partition: dict[int, int] = {}
    errors: list[str] = []
    first_ns = None  # wall clock: the parent's samples use it too
    trimmed = False
    next_report = started
    while not stop:
        for partition, error in client.poll():
            if error is not None:
                if len(errors) < 100:
                    errors.append(error)
                continue
            consumed += 1
            per_partition[partition] = per_partition.get(partition, 0) + 1
            if first_ns is None:
                first_ns = time.time_ns()
        if args.trim_after_drain and not trimmed and args.expect and consumed >= args.expect:
            trimmed = True
            _emit({"event": "trimmed", "released": _malloc_trim(), "consumed": consumed})
        if time.monotonic() >= next_report:
            next_report += args.report_interval
            progress: ConsumerProgress = {
                "event": "progress",
                "t_s": round(time.monotonic() - started, 3),
                "consumed": consumed,
                "first_message_ns": first_ns,
                **client.queue(),
            }
            _emit(_with_python_heap(progress) if args.tracemalloc else progress)
    client.close()
    done: ConsumerDone = {
        "event": "done",
        "stop": stop[0],
        "consumed": consumed,
        "first_message_ns": first_ns,
        "per_partition": {str(p): n for p, n in sorted(per_partition.items())},
        "errors": errors,
    }
    _emit(done)
    return 0


def _with_python_heap(progress: ConsumerProgress) -> ConsumerProgress:
    """The line with the Python heap (--tracemalloc): now, its peak since the last, and what
    tracing itself costs."""
    import tracemalloc

    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    progress["py_traced_bytes"] = current
    progress["py_peak_bytes"] = peak
    progress["tracemalloc_overhead_bytes"] = tracemalloc.get_tracemalloc_memory()
    return progress


def _malloc_trim() -> bool:
    """Give freed heap pages back to the OS: what stays resident after this is held, not
    cached by the allocator."""
    import ctypes

    return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))


if __name__ == "__main__":
    sys.exit(main())
