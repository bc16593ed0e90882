"""In-memory channel: HTTP ingress -> bounded in-memory queue -> dispatcher fanning out.

Like Knative's IMC dispatcher in its asynchronous mode: an event is answered 202 as soon as it is
queued, and dispatcher workers (`--concurrency` of them) deliver it to every subscriber with
retries. Nothing is persisted: kill the process and every queued event is lost, which is what
the analysis should then report. A full queue answers 503, so overload shows as send failures
rather than as unbounded memory.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from suts.cloudevents import forward_headers
from suts.serving import Component, Deliverer, drain


class InMemoryChannel(Component):
    kind = "imc-channel"

    def __init__(
        self,
        subscribers: list[str],
        concurrency: int,
        retries: int,
        backoff_ms: float,
        timeout_s: float,
        queue_limit: int,
    ) -> None:
        super().__init__()
        self.subscribers = subscribers
        self.queue_limit = queue_limit
        self.queue: asyncio.Queue[tuple[dict[str, str], bytes]] = asyncio.Queue()
        self.deliverer = Deliverer(concurrency, retries, backoff_ms, timeout_s, self.stats)
        self.workers: set[asyncio.Task] = set()
        # Taken from the queue and not yet delivered (or given up): with the queue, what a kill
        # may lose, as /metrics tells it before the kill (one whose request already reached
        # the subscriber's socket may still be delivered).
        self.in_flight = 0

    async def start(self) -> None:
        await self.deliverer.start()
        self.workers = {
            asyncio.ensure_future(self._work()) for _ in range(self.deliverer.concurrency)
        }

    async def stop(self) -> None:
        for task in self.workers:
            task.cancel()
        await drain(self.workers, 1.0)
        await self.deliverer.close()

    def stats_doc(self) -> dict[str, int]:
        return {**self.stats, "queued": self.queue.qsize()}

    def gauges(self) -> dict[str, float]:
        return {
            "queue_depth_events": self.queue.qsize(),
            "queue_limit_events": self.queue_limit,
            "in_flight_events": self.in_flight,
        }

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/", self.ingress)

    async def ingress(self, request: web.Request) -> web.Response:
        body, rejection = await self.read_event(request)
        if rejection is not None:
            return rejection
        if self.queue.qsize() >= self.queue_limit:
            self.stats["queue_full"] += 1
            return web.Response(status=503, text="channel queue full")
        self.queue.put_nowait((forward_headers(request.headers), body))
        self.stats["accepted"] += 1
        return web.Response(status=202)

    async def _work(self) -> None:
        while True:
            headers, body = await self.queue.get()
            self.in_flight += 1
            try:
                if len(self.subscribers) == 1:
                    await self.deliverer.deliver(self.subscribers[0], headers, body)
                else:
                    await asyncio.gather(
                        *(self.deliverer.deliver(url, headers, body) for url in self.subscribers)
                    )
            finally:
                self.in_flight -= 1
