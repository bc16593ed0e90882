"""HTTP ingress producing to a Kafka topic; answers 202 only after the broker acknowledged.

The Kafka channel's and Kafka broker's receiver: binary-mode `ce-*` headers become `ce_*` record
headers (the CloudEvents Kafka binding), the body the record value. confluent-kafka fires
delivery callbacks inside `poll()`, which runs on its own thread; each callback hands its result
to the event loop, which answers the waiting request.
"""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web
from confluent_kafka import KafkaException, Producer

from suts.cloudevents import to_kafka_headers
from suts.serving import Component


class KafkaIngress(Component):
    kind = "kafka-ingress"

    def __init__(self, topic: str, producer_config: dict[str, str]) -> None:
        super().__init__()
        self.topic = topic
        self.producer_config = producer_config
        self.producer: Producer | None = None
        self._closing = threading.Event()
        self._poller: threading.Thread | None = None

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.producer = Producer(self.producer_config)
        self._poller = threading.Thread(target=self._poll_forever, name="producer-poll")
        self._poller.start()

    def _poll_forever(self) -> None:
        assert self.producer is not None
        while not self._closing.is_set():
            self.producer.poll(0.05)

    async def stop(self) -> None:
        self._closing.set()
        if self._poller is not None:
            await asyncio.to_thread(self._poller.join)
        if self.producer is not None:
            await asyncio.to_thread(self.producer.flush, 5)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/", self.ingress)

    async def ingress(self, request: web.Request) -> web.Response:
        body, rejection = await self.read_event(request)
        if rejection is not None:
            return rejection
        assert self.producer is not None
        acked: asyncio.Future[str | None] = self.loop.create_future()

        def on_delivery(err, msg) -> None:  # on the poll thread
            result = None if err is None else f"{err.name()}: {err.str()}"
            self.loop.call_soon_threadsafe(_settle, acked, result)

        try:
            self.producer.produce(
                self.topic,
                value=body,
                headers=to_kafka_headers(request.headers),
                on_delivery=on_delivery,
            )
        except BufferError:
            self.stats["producer_queue_full"] += 1
            return web.Response(status=503, text="producer queue full")
        except KafkaException as exc:
            self.stats["produce_failed"] += 1
            return web.Response(status=500, text=f"produce failed: {exc}")
        error = await acked
        if error is not None:
            self.stats["produce_failed"] += 1
            return web.Response(status=500, text=f"produce failed: {error}")
        self.stats["accepted"] += 1
        return web.Response(status=202)


def _settle(future: asyncio.Future, result: str | None) -> None:
    if not future.done():  # the request may have been cancelled (client went away)
        future.set_result(result)
