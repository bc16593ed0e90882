"""A system of known capacity, to test the capacity search against (`python -m suts capacity`).

It takes events into a bounded queue (202, or 503 once the queue is full) and forwards them to
its subscriber at no more than `rate_per_s` a second. Below that rate nothing waits; above it
the queue grows, so end-to-end latency rises through a probe, and once the queue is full events
are refused: exactly the symptoms the breaking-point rule looks for.
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from suts.serving import Component

_FORWARDED_HEADERS = ("content-type",)


class CapacityHop(Component):
    kind = "capacity"

    def __init__(
        self,
        subscriber: str,
        rate_per_s: float,
        queue_limit: int,
        concurrency: int,
        timeout_s: float,
    ) -> None:
        super().__init__()
        self.subscriber = subscriber
        self.interval_s = 1.0 / rate_per_s
        self.queue_limit = queue_limit
        self.timeout_s = timeout_s
        self.queue: asyncio.Queue[tuple[dict[str, str], bytes]] = asyncio.Queue()
        self.slots = asyncio.Semaphore(concurrency)
        self.session: aiohttp.ClientSession | None = None
        self.forwarder: asyncio.Task[None] | None = None
        self.deliveries: set[asyncio.Task[None]] = set()  # held, or the loop may drop them

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        self.forwarder = asyncio.get_running_loop().create_task(self._forward())

    async def stop(self) -> None:
        if self.forwarder is not None:
            self.forwarder.cancel()
        if self.session is not None:
            await self.session.close()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/{tail:.*}", self._accept)

    def stats_doc(self) -> dict[str, int]:
        return {**self.stats, "queued": self.queue.qsize()}

    def gauges(self) -> dict[str, float]:
        return {"queue_depth_events": self.queue.qsize(), "queue_limit_events": self.queue_limit}

    async def _accept(self, request: web.Request) -> web.Response:
        body, refused = await self.read_event(request)
        if refused is not None:
            return refused
        if self.queue.qsize() >= self.queue_limit:
            self.stats["refused"] += 1
            return web.Response(status=503, text="queue full\n")
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower().startswith("ce-") or k.lower() in _FORWARDED_HEADERS
        }
        self.queue.put_nowait((headers, body))
        self.stats["accepted"] += 1
        return web.Response(status=202)

    async def _forward(self) -> None:
        """One event every interval at most: the capacity."""
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            headers, body = await self.queue.get()
            now = loop.time()
            if next_at > now:
                await asyncio.sleep(next_at - now)
            next_at = max(next_at, now) + self.interval_s
            await self.slots.acquire()
            task = loop.create_task(self._deliver(headers, body))
            self.deliveries.add(task)
            task.add_done_callback(self.deliveries.discard)

    async def _deliver(self, headers: dict[str, str], body: bytes) -> None:
        assert self.session is not None
        try:
            async with self.session.post(self.subscriber, data=body, headers=headers) as answer:
                self.stats["delivered" if answer.status < 300 else "delivery_failed"] += 1
        except (aiohttp.ClientError, TimeoutError):
            self.stats["delivery_failed"] += 1
        finally:
            self.slots.release()
