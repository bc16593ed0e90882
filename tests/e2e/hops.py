"""The user's own systems, written here with the standard library and confluent-kafka: nothing
of the lab's drivers. A hop accepts events at its door and forwards them to a subscriber URL;
one of known capacity forwards at most `rate_per_s` from a bounded queue, so a search must find
that capacity from outside."""

from __future__ import annotations

import http.client
import queue
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from confluent_kafka import Consumer

Event = tuple[bytes, dict[str, str]]  # body, headers


class Forwarder:
    """Forwards queued events to `subscriber` over one keep-alive connection, at most
    `rate_per_s` (None: as fast as it can), counting what it forwarded and what it could
    not."""

    def __init__(self, subscriber: str, rate_per_s: float | None, queue_limit: int) -> None:
        self.target = urllib.parse.urlsplit(subscriber)
        self.rate_per_s = rate_per_s
        self.events: queue.Queue[Event | None] = queue.Queue(maxsize=queue_limit)
        self.forwarded = self.undeliverable = self.refused = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def offer(self, event: Event) -> bool:
        """Queued (True), or refused because the queue is full."""
        try:
            self.events.put_nowait(event)
        except queue.Full:
            self.refused += 1
            return False
        return True

    def close(self) -> None:
        self.events.put(None)
        self.thread.join(timeout=10)

    def _run(self) -> None:
        connection = http.client.HTTPConnection(self.target.netloc, timeout=5)
        next_at = time.monotonic()
        while (event := self.events.get()) is not None:
            if self.rate_per_s:
                next_at = max(next_at + 1 / self.rate_per_s, time.monotonic() - 0.05)
                time.sleep(max(0.0, next_at - time.monotonic()))
            body, headers = event
            try:
                connection.request("POST", self.target.path or "/", body, headers)
                connection.getresponse().read()
                self.forwarded += 1
            except (OSError, http.client.HTTPException):
                self.undeliverable += 1
                connection.close()  # reconnects on the next request


class HttpHop:
    """An HTTP ingress: 202 for an event it queued, 503 when its queue is full."""

    def __init__(
        self, subscriber: str, rate_per_s: float | None = None, queue_limit: int = 10_000
    ) -> None:
        self.forwarder = forwarder = Forwarder(subscriber, rate_per_s, queue_limit)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the sender expects

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                accepted = forwarder.offer((body, headers))
                self.send_response(202 if accepted else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.forwarder.close()


class KafkaHop:
    """A consumer group on the user's topic (a KafkaSource, as the user runs it) forwarding
    every record to the subscriber as a binary-mode CloudEvent, at most `rate_per_s`."""

    def __init__(
        self, bootstrap: str, topic: str, subscriber: str, rate_per_s: float | None = None
    ) -> None:
        self.forwarder = Forwarder(subscriber, rate_per_s, queue_limit=1000)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"hop-{topic}",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
            }
        )
        assigned = threading.Event()
        self.consumer.subscribe([topic], on_assign=lambda consumer, partitions: assigned.set())
        self.assigned = assigned
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def wait_assigned(self, timeout_s: float = 30.0) -> None:
        """A user's source runs before the test does: its group has its partitions."""
        if not self.assigned.wait(timeout_s):
            raise TimeoutError(f"the hop's consumer got no partitions within {timeout_s:g} s")

    def _run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.2)
            if message is None or message.error():
                continue
            headers = {
                # Kafka's binary mode names them ce_id; HTTP's, ce-id
                key.replace("_", "-", 1) if key.startswith("ce_") else key: _text(value)
                for key, value in message.headers() or []
            }
            headers.setdefault("content-type", "application/octet-stream")
            # A full queue holds the consumer back, as a source's pending deliveries would.
            self.forwarder.events.put((message.value() or b"", headers))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.consumer.close()
        self.forwarder.close()


def _text(value: str | bytes | None) -> str:
    return value.decode() if isinstance(value, bytes) else value or ""
