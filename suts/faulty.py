"""Systems that misbehave on purpose, to show that the instruments do not bend with them.

Each runs in a thread of the calling process (a test or a benchmark), on loopback, port 0:
- `SlowServer(delay_s)` answers every request with 202, `delay_s` after it arrived: a system
  that keeps up with its intake but answers late, so an open-loop sender must keep many
  requests (and connections) in flight at once;
- `BlackHole` accepts connections and never answers: a stuck system.
"""

from __future__ import annotations

import asyncio
import socket
import threading

import httptools

from runtime.procs import raise_fd_limit

_ACCEPTED = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"


def _room_for_connections() -> None:
    """A server holding a thousand connections needs more than the usual 1024 descriptors."""
    raise_fd_limit(1 << 20)


class _Delayed(asyncio.Protocol):
    def __init__(self, server: SlowServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections += 1
        self.server.open.add(self)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self.transport is not None:
                self.transport.close()

    def on_message_complete(self) -> None:
        self.server.requests += 1
        asyncio.get_running_loop().call_later(self.server.delay_s, self._answer)

    def _answer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_ACCEPTED)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server.open.discard(self)


class SlowServer:
    def __init__(self, delay_s: float) -> None:
        _room_for_connections()
        self.delay_s = delay_s
        self.requests = 0
        self.connections = 0
        self.open: set[_Delayed] = set()
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("slow server did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            self._loop.create_server(lambda: _Delayed(self), "127.0.0.1", 0, backlog=4096)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()
        for protocol in list(self.open):  # newer Pythons' wait_closed waits for every client
            if protocol.transport is not None:
                protocol.transport.close()
        server.close()
        self._loop.run_until_complete(server.wait_closed())
        self._loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


class BlackHole:
    """A TCP server that accepts requests and never answers: a stuck system under test."""

    def __init__(self) -> None:
        _room_for_connections()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()
