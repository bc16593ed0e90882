"""The two broker hops around a channel, each its own process as in Knative's data plane.

- `BrokerIngress`: accepts an event, forwards it to the channel and answers with the channel's
  answer (so a full channel is a send failure the sender sees).
- `TriggerFilter`: the channel's subscriber, one process for every trigger; passes events whose
  attributes match a trigger's filter on to that trigger's subscriber and answers with its
  answer; drops the rest with 202, counted as `filtered`.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from suts.cloudevents import Filter, filter_attributes, forward_headers, matches
from suts.serving import Component, Deliverer


class BrokerIngress(Component):
    kind = "broker-ingress"

    def __init__(self, channel: str, concurrency: int, timeout_s: float) -> None:
        super().__init__()
        self.channel = channel
        # No retries here: the ingress reports the channel's answer and the sender records it.
        self.deliverer = Deliverer(concurrency, 0, 0, timeout_s, self.stats)

    async def start(self) -> None:
        await self.deliverer.start()

    async def stop(self) -> None:
        await self.deliverer.close()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/", self.ingress)

    async def ingress(self, request: web.Request) -> web.Response:
        body, rejection = await self.read_event(request)
        if rejection is not None:
            return rejection
        status = await self.deliverer.deliver(self.channel, forward_headers(request.headers), body)
        return web.Response(status=status if status else 502)


class TriggerFilter(Component):
    """Every trigger of the broker in one process, as Knative's filter serves them all: the
    channel delivers each event once per trigger, at that trigger's path (suts.settings
    .trigger_paths), and the trigger passes it on to its own subscriber when its filter
    matches."""

    kind = "trigger-filter"

    def __init__(
        self,
        triggers: Sequence[tuple[str, Filter]],
        concurrency: int,
        retries: int,
        backoff_ms: float,
        timeout_s: float,
    ) -> None:
        super().__init__()
        self.triggers = list(triggers)  # (subscriber, filter), trigger 1 first
        self.deliverer = Deliverer(concurrency, retries, backoff_ms, timeout_s, self.stats)

    async def start(self) -> None:
        await self.deliverer.start()

    async def stop(self) -> None:
        await self.deliverer.close()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/", self.dispatch)  # one trigger: the channel's only subscriber
        app.router.add_post("/triggers/{number}", self.dispatch)

    async def dispatch(self, request: web.Request) -> web.Response:
        number = request.match_info.get("number", "1")
        if not number.isdecimal() or not 1 <= int(number) <= len(self.triggers):
            return web.Response(status=404, text=f"no trigger {number}\n")
        subscriber, event_filter = self.triggers[int(number) - 1]
        body = await request.read()
        headers = forward_headers(request.headers)
        if not matches(event_filter, filter_attributes(headers)):
            self.stats["filtered"] += 1
            return web.Response(status=202)
        status = await self.deliverer.deliver(subscriber, headers, body)
        return web.Response(status=status if status else 502)
