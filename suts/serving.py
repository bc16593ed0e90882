"""What every lab process shares: an aiohttp server on uvloop, JSON-line reports, delivery.

Each process prints `{"event": "listening", "port": N}` on stdout once bound (port 0 picks a free
one), serves `/healthz`, `/ready`, `/stats` and `/metrics` (Prometheus text, suts/metrics.py), and
on SIGTERM stops accepting, lets work in hand finish for a moment, and prints
`{"event": "stopped", "stats": {...}}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections import Counter
from typing import ClassVar

import aiohttp
import uvloop
from aiohttp import web
from prometheus_client.metrics_core import Metric

from contract.receiverlines import ComponentLine, ComponentStopped, Listening
from suts.cloudevents import http_attributes
from suts.metrics import (
    DELIVERY_COUNTERS,
    GC_CLOCK,
    component_registry,
    counter_families,
    exposition,
    gauge_families,
)

STOP_GRACE_S = 2.0


def emit(line: ComponentLine) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


class Component:
    """Base of a lab process: counters, readiness, and the HTTP routes they are read from."""

    kind: ClassVar[str]  # as `python -m suts <kind>` names it; the `hop` label of its metrics

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()
        self.started_ns = time.time_ns()

    def is_ready(self) -> bool:
        return True

    def ready_doc(self) -> dict[str, object]:
        return {}

    def stats_doc(self) -> dict[str, int]:
        return dict(self.stats)

    def gauges(self) -> dict[str, float]:
        """Levels (a queue's depth, say) that /metrics reports as `evbench_lab_<name>{hop}`."""
        return {}

    def metric_families(self) -> list[Metric]:
        """What /metrics reads of the component when scraped: its counters and gauges."""
        return [*counter_families(self.kind, self.stats), *gauge_families(self.kind, self.gauges())]

    async def start(self) -> None:
        """Open clients, start background work (called inside the running loop)."""

    async def stop(self) -> None:
        """Finish background work and close clients."""

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def read_event(self, request: web.Request) -> tuple[bytes, web.Response | None]:
        """An ingress's first step: the body, or the 400 to answer when it is not a CloudEvent."""
        body = await request.read()
        try:
            http_attributes(request.headers, body)
        except ValueError as exc:
            self.stats["rejected"] += 1
            return body, web.Response(status=400, text=str(exc))
        return body, None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/ready", self._ready)
        app.router.add_get("/stats", self._stats)
        self.registry = component_registry(self.metric_families)
        app.router.add_get("/metrics", self._metrics)
        self.routes(app)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats_doc())

    async def _metrics(self, request: web.Request) -> web.Response:
        # On the loop, not a thread: the families read counters the loop writes, and building
        # them takes about a millisecond once a scrape interval.
        body, content_type = exposition(self.registry, request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _ready(self, request: web.Request) -> web.Response:
        status = 200 if self.is_ready() else 503
        return web.json_response({"ready": status == 200, **self.ready_doc()}, status=status)


def serve(component: Component, host: str, port: int) -> int:
    GC_CLOCK.install()  # here, not on import: only a serving process pays for timing its GC
    uvloop.install()
    return asyncio.run(_serve(component, host, port))


async def _serve(component: Component, host: str, port: int) -> int:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await component.start()
    runner = web.AppRunner(component.app(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    emit(Listening(event="listening", host=host, port=bound))
    await stopping.wait()
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(runner.cleanup(), STOP_GRACE_S)
    await component.stop()
    emit(ComponentStopped(event="stopped", stats=component.stats_doc()))
    return 0


class Deliverer:
    """POSTs events to a subscriber with bounded concurrency and retries with backoff.

    Retries go to 5xx, 429 and transport errors, as Knative's delivery spec does; 4xx other
    than 429 is final. Returns the last status, 0 when nothing answered.
    """

    def __init__(
        self,
        concurrency: int,
        retries: int,
        backoff_ms: float,
        timeout_s: float,
        stats: Counter[str],
    ) -> None:
        self.concurrency = concurrency
        self.retries = retries
        self.backoff_s = backoff_ms / 1000
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.stats = stats
        # Present at 0 from the start, so /stats and /metrics show a hop that has delivered
        # nothing yet as 0 rather than leave it out.
        stats.update(dict.fromkeys(DELIVERY_COUNTERS, 0))
        self.session: aiohttp.ClientSession | None = None
        self.slots = asyncio.Semaphore(concurrency)

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(limit=self.concurrency, ttl_dns_cache=None)
        self.session = aiohttp.ClientSession(
            connector=connector, timeout=self.timeout, skip_auto_headers=("User-Agent",)
        )

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def deliver(self, url: str, headers: dict[str, str], body: bytes) -> int:
        assert self.session is not None
        status = 0
        async with self.slots:
            for attempt in range(self.retries + 1):
                if attempt:
                    self.stats["retries"] += 1
                    await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
                try:
                    async with self.session.post(url, data=body, headers=headers) as response:
                        await response.read()
                        status = response.status
                except (TimeoutError, aiohttp.ClientError, OSError):
                    status = 0
                if 200 <= status < 300 or (400 <= status < 500 and status != 429):
                    break
        if 200 <= status < 300:
            self.stats["delivered"] += 1
        else:
            self.stats["delivery_failed"] += 1
        return status


async def drain(tasks: set[asyncio.Task], timeout_s: float) -> None:
    if tasks:
        await asyncio.wait(list(tasks), timeout=timeout_s)
