"""The fleet's master: Locust's MasterRunner as the coordinator of open-loop sender workers.

It waits for its workers, gives each its share of the slots and one start instant
(`messages.Plan`), prints the fleet's lines (loadgen.fleet.tally) as one sender would, and ends
when every worker has finished or failed. It never waits without a deadline: a worker whose
pacer dies, that Locust marks missing (no heartbeat for a few seconds), or that has not finished
well after the schedule's end is marked failed and the fleet goes on without it.

No Locust users are ever spawned (the runner is never `start()`ed): Locust is used for what a
coordinator needs (connections, heartbeats, messages, statistics and their reports), and the
load is made by the workers' pacers.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import gevent
from gevent.pywsgi import WSGIServer
from gevent.socket import socket as GeventSocket
from locust import stats as locust_stats
from locust.env import Environment
from locust.html import get_html_report
from locust.runners import STATE_MISSING, MasterRunner
from prometheus_client import make_wsgi_app

from contract.lines import WarningLine
from contract.metricslines import MetricsLine, metrics_listening, parse_metrics_line
from contract.senderlines import (
    FleetError,
    FleetListening,
    FleetWorker,
    SenderLine,
    parse_sender_line,
)
from contract.units import NS_PER_S
from loadgen.exposition import registry
from loadgen.fleet import messages
from loadgen.fleet.figures import FleetFigures
from loadgen.fleet.tally import Tally
from loadgen.pace import parse_warmup, resolve_pace
from loadgen.schedule import plan_steps
from loadgen.sendmetrics import CLIENT_TIMEOUT_S, MAX_CONNECTIONS, response
from loadgen.settings import SenderSettings, SendKnobs

# How long before the common start instant the plans go out: each worker must start its pacer
# (imports, record writer, clock exchanges) before the first slot.
_LEAD_S = 3.0
_PLAN_OK_TIMEOUT_S = 15.0
# After the schedule's end, its drain and request timeouts, how long a worker may take to say
# it is done before it is marked failed.
_DONE_SLACK_S = 30.0


@dataclass(frozen=True)
class FleetOptions:
    workers: int
    bind_host: str = "127.0.0.1"
    bind_port: int = 5557  # Locust's; 0 picks a free one (the listening line says which)
    expect_timeout_s: float = 60.0
    locust_csv: str | None = None  # prefix of Locust's CSV files
    locust_html: Path | None = None


def _emit(line: SenderLine | MetricsLine) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def serve(settings: SenderSettings, options: FleetOptions) -> int:
    env = Environment(user_classes=[])
    master: MasterRunner = env.create_master_runner(options.bind_host, options.bind_port)
    # With port 0, Locust's reconnect would bind 0 again: pin what was bound.
    port = master.server.port
    master.master_bind_port = port
    tally = Tally(options.workers, os.getpid())
    fleet = _Fleet(env, master, tally)
    master.register_message(messages.READY, fleet.on_ready)
    master.register_message(messages.PLAN_OK, fleet.on_plan_ok)
    master.register_message(messages.LINE, fleet.on_line)
    master.register_message(messages.EXIT, fleet.on_exit)
    gevent.signal_handler(signal.SIGINT, fleet.stop, "SIGINT")
    gevent.signal_handler(signal.SIGTERM, fleet.stop, "SIGTERM")
    listening: FleetListening = {
        "event": "fleet_listening",
        "host": options.bind_host,
        "port": port,
    }
    _emit(listening)
    metrics = _serve_metrics(settings.knobs, fleet.figures)
    writer = writing = None
    try:
        if not fleet.wait_for_workers(options.workers, options.expect_timeout_s):
            return 130 if fleet.stop_reason else 2
        fleet.send_plans(settings, options.workers)
        if options.locust_csv:
            writer = locust_stats.StatsCSVFileWriter(
                env, locust_stats.PERCENTILES_TO_REPORT, options.locust_csv, True
            )
            writing = gevent.spawn(writer.stats_writer)
        fleet.follow(_deadline_s(settings))
    finally:
        try:
            _write_reports(env, options, writer, writing)
        finally:
            master.quit()  # the workers stop their senders and exit
            if metrics is not None:
                metrics.stop(timeout=1)
    return fleet.exit_code()


class _MetricsServer(WSGIServer):
    """The fleet's /metrics on the terms of one sender's (loadgen.sendmetrics): a connection
    is given CLIENT_TIMEOUT_S in all, from its accept (its head, however slowly it trickles, its
    answer and any keep-alive after it), and beyond MAX_CONNECTIONS open at once a client is
    answered 503 and closed; so scrapers cannot hold the master's descriptors or greenlets."""

    open_connections = 0

    def handle(self, sock: GeventSocket, address: tuple[str, int]) -> None:
        # gevent closes `sock` once this returns.
        if self.open_connections >= MAX_CONNECTIONS:
            with contextlib.suppress(OSError), gevent.Timeout(CLIENT_TIMEOUT_S, False):
                sock.sendall(response("503 Service Unavailable", "text/plain", _BUSY))
            return
        self.open_connections += 1
        try:
            # gevent.Timeout is a BaseException: no handler in between takes it for its own.
            with gevent.Timeout(CLIENT_TIMEOUT_S, False):
                super().handle(sock, address)
        finally:
            self.open_connections -= 1


_BUSY = b"every connection slot is taken: retry\n"


def _serve_metrics(knobs: SendKnobs, figures: FleetFigures) -> WSGIServer | None:
    """The fleet's /metrics (--sender-metrics-port), served by the Prometheus client library's
    WSGI app on gevent, beside Locust; None when not asked for, or the port is taken (said:
    the run matters more than its live figures)."""
    if knobs.metrics_port is None:
        return None
    app = make_wsgi_app(registry(figures.now))
    server = _MetricsServer((knobs.metrics_host, knobs.metrics_port), app, log=None)
    try:
        server.start()
    except OSError as exc:
        where = f"{knobs.metrics_host}:{knobs.metrics_port}"
        why = f"/metrics not served: cannot listen on {where}: {exc}"
        _emit({"event": "warning", "message": why})
        return None
    _emit(metrics_listening(knobs.metrics_host, server.server_port))
    return server


def _write_reports(env: Environment, options: FleetOptions, writer, writing) -> None:
    """Locust's CSV and HTML; a failure here is said, never the run's failure."""
    try:
        if writer is not None and writing is not None:
            # The writer rewrites the CSVs every CSV_STATS_INTERVAL_SEC: one more pass, so the
            # files hold the workers' last reports (sent just before their done lines).
            gevent.sleep(locust_stats.CSV_STATS_INTERVAL_SEC + 0.2)
            writing.kill()
            writer.close_files()
        if options.locust_html is not None:
            options.locust_html.write_text(get_html_report(env, show_download_link=False))
        # Locust's console tables, on stderr (stdout carries the fleet's lines).
        for line in [
            *locust_stats.get_stats_summary(env.stats, False),
            "",
            *locust_stats.get_percentile_stats_summary(env.stats),
        ]:
            print(line, file=sys.stderr)
    except Exception as exc:
        warning: WarningLine = {
            "event": "warning",
            "message": f"Locust's reports were not written: {exc!r}",
        }
        _emit(warning)


def _deadline_s(settings: SenderSettings) -> float:
    """Seconds from the start instant by which every worker must have said it is done."""
    knobs = settings.knobs
    warmup = parse_warmup(knobs.warmup) if knobs.warmup else None
    steps = plan_steps(resolve_pace(settings.pace).steps, knobs.step_gap_s, warmup)
    schedule_s = steps[-1].end_offset_ns / NS_PER_S  # warm-up and gaps included
    return schedule_s + knobs.drain_timeout_s + knobs.request_timeout_s + _DONE_SLACK_S


class _Fleet:
    def __init__(self, env: Environment, master: MasterRunner, tally: Tally) -> None:
        self.env = env
        self.master = master
        self.tally = tally
        self.index_of: dict[str, int] = {}  # Locust client id -> our worker index
        self.ready: set[str] = set()  # client ids listening for a plan (messages.READY)
        self.planned_at: dict[int, float] = {}
        self.acked: set[int] = set()
        self.exits: dict[int, int] = {}
        self.stop_reason: str | None = None
        self.start_at_ns: int | None = None
        self.figures = FleetFigures(failed=tally.failed.keys())  # a view: kept up to date

    # start -----------------------------------------------------------------------------
    def wait_for_workers(self, count: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while len(self.ready) < count:
            if time.monotonic() > deadline or self.stop_reason:
                ready = len(self.ready)
                error: FleetError = {
                    "event": "error",
                    "message": f"{ready} of {count} workers connected within {timeout_s:g} s"
                    + (f" ({self.stop_reason})" if self.stop_reason else ""),
                }
                _emit(error)
                return False
            gevent.sleep(0.1)
        return True

    def send_plans(self, settings: SenderSettings, count: int) -> None:
        # Indexes 0..N-1 by client id: stable, and independent of Locust's own (never reused).
        clients = sorted(self.ready)[:count]
        self.start_at_ns = time.time_ns() + int((settings.start_delay_s + _LEAD_S) * NS_PER_S)
        for index, client_id in enumerate(clients):
            self.index_of[client_id] = index
            share = replace(
                settings,
                worker=index,
                workers=count,
                start_at_ns=self.start_at_ns,
                latency_histograms=True,
                # The master serves the fleet's /metrics from its workers' lines: theirs
                # would only collide on the port where two share a host.
                metrics_lines=settings.knobs.metrics_port is not None,
                knobs=replace(settings.knobs, metrics_port=None),
            )
            plan: messages.Plan = {"index": index, "count": count, "argv": share.argv()}
            self.master.send_message(messages.PLAN, dict(plan), client_id=client_id)
            self.planned_at[index] = time.monotonic()

    # what workers say (called in Locust's message greenlet: quick, never blocking) ---------
    def on_ready(self, environment: Environment, msg) -> None:
        self.ready.add(msg.node_id)

    def on_plan_ok(self, environment: Environment, msg) -> None:
        ok: messages.PlanOk = msg.data
        self.acked.add(ok["index"])
        # Where each worker's sender runs, so a supervisor on that host can sample it.
        worker: FleetWorker = {"event": "fleet_worker", **ok}
        _emit(worker)

    def on_line(self, environment: Environment, msg) -> None:
        forwarded: messages.Line = msg.data
        index = forwarded["index"]
        line = parse_sender_line(forwarded["line"])
        if line is not None:
            for out in self.tally.line(index, line):
                _emit(out)
            return
        # The workers' figures, for the fleet's /metrics (--metrics-lines, asked in the plan).
        figures = parse_metrics_line(forwarded["line"])
        why = None
        if figures is not None and figures["event"] == "metrics":
            why = self.figures.update(index, figures)
        if why:
            _emit({"event": "warning", "message": why})

    def on_exit(self, environment: Environment, msg) -> None:
        index, code = msg.data["index"], msg.data["code"]
        self.exits[index] = code
        if index not in self.tally.done:
            for doc in self.tally.fail(index, f"its sender exited ({code}) before finishing"):
                _emit(doc)

    # the run ---------------------------------------------------------------------------
    def follow(self, deadline_s: float) -> None:
        """Print the fleet's progress once a second until every worker finished or failed."""
        assert self.start_at_ns is not None
        ends_at = self.start_at_ns / NS_PER_S + deadline_s
        while not self.tally.finished:
            gevent.sleep(1.0)
            if (line := self.tally.progress_line()) is not None:
                _emit(line)
            # Locust only keeps chart history for a runner it started; this one never is.
            locust_stats.update_stats_history(self.master)
            self._check_workers(ends_at)

    def _check_workers(self, ends_at: float) -> None:
        now = time.monotonic()
        for client_id, index in self.index_of.items():
            node = self.master.clients.get(client_id)
            if node is None or node.state == STATE_MISSING:
                self._fail(index, "missing: no heartbeat from it for several seconds")
            elif index not in self.acked and now - self.planned_at[index] > _PLAN_OK_TIMEOUT_S:
                self._fail(index, f"did not start its sender within {_PLAN_OK_TIMEOUT_S:g} s")
            elif time.time() > ends_at:
                self._fail(index, "not done long after the schedule's end")

    def _fail(self, index: int, reason: str) -> None:
        for doc in self.tally.fail(index, reason):
            _emit(doc)

    def stop(self, reason: str) -> None:
        """Ctrl-C: every worker stops sending as one sender would; the fleet still waits for
        their done lines (with every record written), a second Ctrl-C included."""
        self.stop_reason = reason
        self.master.send_message(messages.STOP, {"reason": reason})

    def exit_code(self) -> int:
        if self.tally.failed:
            return 1
        return 130 if self.stop_reason else 0
