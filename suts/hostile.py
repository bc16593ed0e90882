"""A hostile client: a storm of malformed, oversized, slow and tricky requests against a receiver.

Each kind is one request (or one connection's worth) as raw bytes, sent on its own loopback
connection; the answers' status codes are tallied per kind ("closed" when the receiver closed the
connection without answering, "none" when nothing came back before the client gave up). The
receiver's tests run the storm and then check it is still up, its memory bounded, and that
valid events sent afterwards are recorded once each.

    python -m suts.hostile --url http://127.0.0.1:8080 --rounds 400
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3}) ")
_EVENT_HEADERS = (
    b"ce-specversion: 1.0\r\nce-type: dev.evbench.measure\r\nce-source: hostile\r\n"
    b"content-type: application/json\r\n"
)


def post(body: bytes, headers: bytes = b"", target: bytes = b"/") -> bytes:
    return (
        b"POST "
        + target
        + b" HTTP/1.1\r\nHost: receiver\r\n"
        + headers
        + b"Content-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def binary_event(ce_id: bytes, body: bytes = b"{}", extra: bytes = b"") -> bytes:
    return post(body, _EVENT_HEADERS + b"ce-id: " + ce_id + b"\r\n" + extra)


def structured_event(doc_json: str) -> bytes:
    return post(doc_json.encode(), b"content-type: application/cloudevents+json\r\n")


def _structured_id(id_json: str) -> bytes:
    return structured_event(
        '{"specversion":"1.0","source":"hostile","type":"t","id":' + id_json + "}"
    )


@dataclass(frozen=True)
class Kind:
    name: str
    build: Callable[[random.Random], bytes]
    answers: int = 1  # answers to wait for before closing (keep-alive kinds)
    hold_s: float = 0.0  # wait this long for the answers instead of the storm's timeout
    requests: int = 1  # requests it counts as


def _garbage(rng: random.Random) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 600))) + b"\r\n\r\n"


def _fuzzed_event(rng: random.Random) -> bytes:
    """A valid event with a few random bytes flipped: anything from fine to nonsense."""
    raw = bytearray(binary_event(b"fuzz-%d" % rng.getrandbits(32), b'{"k": 1}'))
    for _ in range(rng.randint(1, 4)):
        raw[rng.randrange(len(raw))] = rng.getrandbits(8)
    return bytes(raw)


PIPELINED = 50

KINDS: list[Kind] = [
    Kind("lone surrogate, structured id", lambda r: _structured_id('"\\ud800"')),
    Kind(
        "lone surrogate, payload id",
        lambda r: binary_event(b"ce-x", b'{"evbenchid":"\\udfff","pad":"x"}'),
    ),
    Kind("null id", lambda r: _structured_id("null")),
    Kind("object id", lambda r: _structured_id('{"a":1}')),
    Kind("boolean id", lambda r: _structured_id("true")),
    Kind("number id", lambda r: _structured_id("42")),
    Kind("empty id", lambda r: _structured_id('""')),
    Kind("300-character id", lambda r: binary_event(b"i" * 300)),
    Kind("invalid UTF-8 in ce-id", lambda r: binary_event(b"\xff\xfe\xfd")),
    Kind("structured, not JSON", lambda r: structured_event("{not json")),
    Kind("missing attributes", lambda r: post(b"{}", b"ce-id: 1\r\n")),
    Kind("garbage bytes", _garbage),
    Kind("fuzzed event", _fuzzed_event),
    Kind("16 KB URL", lambda r: post(b"{}", target=b"/" + b"u" * 16384)),
    Kind("1 MB header", lambda r: post(b"{}", b"x-big: " + b"h" * 2**20 + b"\r\n")),
    Kind("10,000 headers", lambda r: post(b"{}", b"x-h: 0123456789\r\n" * 10_000)),
    Kind(
        "declares a 100 MB body",
        lambda r: b"POST / HTTP/1.1\r\nHost: r\r\nContent-Length: 104857600\r\n\r\n",
    ),
    Kind(
        "2 MB chunked body",
        lambda r: (
            b"POST / HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\n"
            + _EVENT_HEADERS
            + b"ce-id: c\r\n\r\n"
            + (b"10000\r\n" + b"b" * 0x10000 + b"\r\n") * 32
            + b"0\r\n\r\n"
        ),
    ),
    Kind(
        "Expect: 100-continue",
        lambda r: binary_event(b"expect-ok", extra=b"Expect: 100-continue\r\n"),
        answers=2,
    ),
    Kind(
        "Expect: something else", lambda r: binary_event(b"expect-no", extra=b"Expect: teapot\r\n")
    ),
    Kind("HEAD /healthz", lambda r: b"HEAD /healthz HTTP/1.1\r\nHost: r\r\n\r\n"),
    Kind("CONNECT", lambda r: b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
    Kind(
        "Upgrade: websocket",
        lambda r: b"GET / HTTP/1.1\r\nHost: r\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    ),
    Kind(
        "PUT to an unknown path",
        lambda r: b"PUT /nope HTTP/1.1\r\nHost: r\r\nContent-Length: 0\r\n\r\n",
    ),
    Kind(
        "bad Content-Length", lambda r: b"POST / HTTP/1.1\r\nHost: r\r\nContent-Length: abc\r\n\r\n"
    ),
    Kind(
        "Content-Length and chunked",
        lambda r: (
            b"POST / HTTP/1.1\r\nHost: r\r\nContent-Length: 4\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ),
    ),
    Kind("NUL in a header", lambda r: b"GET /healthz HTTP/1.1\r\nHost: r\x00x\r\n\r\n"),
    Kind(
        f"{PIPELINED} pipelined requests, answers unread until the end",
        lambda r: b"GET /stats HTTP/1.1\r\nHost: r\r\n\r\n" * PIPELINED,
        answers=PIPELINED,
        requests=PIPELINED,
    ),
    Kind(
        "cut off mid-body", lambda r: binary_event(b"cut", b"{" + b"x" * 5000)[:-2000], hold_s=0.05
    ),
]
# Slow kinds hold a connection until the receiver's timeouts end it (run with short timeouts).
SLOW_KINDS: list[Kind] = [
    Kind(
        "slowloris: headers never end",
        lambda r: b"POST / HTTP/1.1\r\nHost: r\r\nx-a: 1\r\n",
        hold_s=60,
    ),
    Kind("body never ends", lambda r: binary_event(b"slow", b"{" + b"x" * 100)[:-50], hold_s=60),
    Kind("connects, says nothing", lambda r: b"", hold_s=60),
]


async def _one(host: str, port: int, kind: Kind, rng: random.Random, timeout_s: float) -> list:
    """Send one kind's bytes; the statuses answered, then 'closed', 'reset' or 'none' (no
    answer in time) if fewer answers came than the kind expects."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, TimeoutError):
        return ["refused"]
    statuses: list[str] = []
    seen = b""
    try:
        data = kind.build(rng)
        if data:
            writer.write(data)
            # The receiver may stop reading an abusive request and answer at once.
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(writer.drain(), timeout_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (kind.hold_s or timeout_s)
        while len(statuses) < kind.answers:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), deadline - loop.time())
            except TimeoutError:
                statuses.append("none")
                break
            except OSError:
                statuses.append("reset")
                break
            if not chunk:
                statuses.append("closed")
                break
            seen += chunk
            statuses = [m.decode() for m in _STATUS.findall(seen)]
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return statuses


async def storm(
    url: str,
    rounds: int,
    concurrency: int = 16,
    slow: int = 0,
    seed: int = 7,
    timeout_s: float = 10.0,
) -> Counter[tuple[str, str]]:
    """`rounds` of every kind, `slow` connections of each slow kind held alongside; returns
    (kind, answer) -> count. A kind with several requests counts each of its answers."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    rng = random.Random(seed)
    queue: asyncio.Queue[Kind] = asyncio.Queue()
    for _ in range(rounds):
        for kind in rng.sample(KINDS, len(KINDS)):
            queue.put_nowait(kind)
    tally: Counter[tuple[str, str]] = Counter()

    async def worker() -> None:
        while not queue.empty():
            kind = queue.get_nowait()
            for status in await _one(host, port, kind, rng, timeout_s):
                tally[(kind.name, status)] += 1

    async def slow_one(kind: Kind) -> None:
        for status in await _one(host, port, kind, rng, timeout_s):
            tally[(kind.name, status)] += 1

    slow_tasks = [slow_one(k) for k in SLOW_KINDS for _ in range(slow)]
    await asyncio.gather(*slow_tasks, *(worker() for _ in range(concurrency)))
    return tally


def table(tally: Counter[tuple[str, str]]) -> str:
    answers = sorted({a for _, a in tally})
    kinds = list(dict.fromkeys(k for k, _ in sorted(tally, key=lambda ka: _order(ka[0]))))
    width = max(len(k) for k in kinds)
    lines = [f"{'kind':<{width}} " + " ".join(f"{a:>7}" for a in answers)]
    for kind in kinds:
        cells = " ".join(f"{tally.get((kind, a), 0) or '':>7}" for a in answers)
        lines.append(f"{kind:<{width}} {cells}")
    lines.append(f"{'total':<{width}} {sum(tally.values())} requests")
    return "\n".join(lines)


def _order(name: str) -> int:
    names = [k.name for k in KINDS + SLOW_KINDS]
    return names.index(name) if name in names else len(names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the receiver's base URL")
    parser.add_argument("--rounds", type=int, default=400, help="rounds of every kind")
    parser.add_argument("--slow", type=int, default=50, help="connections of each slow kind")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    tally = asyncio.run(storm(args.url, args.rounds, args.concurrency, args.slow))
    print(table(tally))
    print(json.dumps({f"{k} -> {a}": n for (k, a), n in sorted(tally.items())}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
