"""A fleet worker: Locust's WorkerRunner around one open-loop sender process.

On the master's plan it starts `python -m loadgen` with its share of the slots (a child
process: exec'd, so the pacer runs on uvloop without gevent's patches), forwards every line the
sender prints to the master, and feeds Locust's statistics from the sender's per-second latency
counts, which run from each event's intended time: Locust's console, CSV and HTML are then free
of coordinated omission too. When the master says stop, the sender is stopped as Ctrl-C stops
it (every record kept); when the master quits or is lost, the sender is stopped by its pid.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from dataclasses import replace
from pathlib import Path

from locust.env import Environment
from locust.runners import WorkerRunner

from contract.senderlines import parse_sender_line
from loadgen.fleet import messages
from loadgen.fleet.locust_stats import feed
from loadgen.settings import SenderSettings, add_sender_arguments, settings_from_args
from runtime.procs import Child


def serve(master_host: str, master_port: int, out: Path | None, log_dir: Path) -> int:
    env = Environment(user_classes=[])
    try:
        runner: WorkerRunner = env.create_worker_runner(master_host, master_port)
    except ConnectionError:
        print(
            f"evbench send --worker: no fleet master at {master_host}:{master_port}",
            file=sys.stderr,
        )
        return 2
    worker = _Worker(env, runner, out, log_dir)
    runner.register_message(messages.PLAN, worker.on_plan, concurrent=True)
    runner.register_message(messages.STOP, worker.on_stop)
    # Only now can a plan be taken: Locust's own "ready" comes as soon as the worker connects,
    # and a plan sent before the handler exists would be dropped.
    runner.send_message(messages.READY, {"host": socket.gethostname()})
    try:
        runner.greenlet.join()  # until the master quits (or is lost for a minute)
    finally:
        worker.stop_sender()
    return worker.exit_code


class _Worker:
    def __init__(
        self, env: Environment, runner: WorkerRunner, out: Path | None, log_dir: Path
    ) -> None:
        self.env = env
        self.runner = runner
        self.out = out
        self.log_dir = log_dir
        self.sender: Child | None = None
        self.index: int | None = None
        self.exit_code = 0

    def on_plan(self, environment: Environment, msg) -> None:
        plan: messages.Plan = msg.data
        settings = _settings(plan["argv"])
        if self.out is not None:  # this host's records go where this worker was told
            settings = replace(settings, out=self.out)
        self.index = plan["index"]
        self.sender = settings.start(self.log_dir / f"sender-w{self.index}.log", "sender")
        ok: messages.PlanOk = {
            "index": self.index,
            "pid": self.sender.pid,
            "host": socket.gethostname(),
        }
        self.runner.send_message(messages.PLAN_OK, dict(ok))
        self._forward(self.sender, self.index)

    def _forward(self, sender: Child, index: int) -> None:
        """Every line of the sender to the master; its latency counts into Locust's stats."""
        while (doc := sender.lines.get()) is not None:
            parsed = parse_sender_line(doc)
            if parsed is not None and parsed["event"] == "answers":
                feed(self.env.stats, f"step {parsed['step']}", parsed)  # not for the master
                continue
            if parsed is not None and parsed["event"] == "done":
                # Locust's last statistics reach the master before the done line does (one
                # connection, in order), so the fleet's reports have every answer.
                self.runner._send_stats()
            line: messages.Line = {"index": index, "line": doc}
            self.runner.send_message(messages.LINE, dict(line))
        code = sender.wait()
        self.exit_code = 0 if code in (0, 130) else 1
        gone: messages.Exit = {"index": index, "code": code}
        self.runner.send_message(messages.EXIT, dict(gone))

    def on_stop(self, environment: Environment, msg) -> None:
        if self.sender is not None:
            self.sender.signal(signal.SIGINT)

    def stop_sender(self) -> None:
        if self.sender is not None and self.sender.alive():
            self.sender.stop()


def _settings(argv: list[str]) -> SenderSettings:
    parser = argparse.ArgumentParser(prog="the fleet master's plan")
    add_sender_arguments(parser)
    return settings_from_args(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master-host", default="127.0.0.1", help="the fleet master's host")
    parser.add_argument(
        "--master-port", type=int, default=5557, help="the fleet master's port (default 5557)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where this host's sent records go (default: the directory the master names)",
    )
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=Path(os.getcwd()),
        help="where the sender's log goes (default: here)",
    )
