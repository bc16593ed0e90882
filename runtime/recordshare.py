"""Records served over HTTP and fetched back, so that a run made inside a cluster comes home.

A receiver serves its own records (receivers.server: GET /records, /records/<path>), a sender's
records are served by `evbench serve-records DIR`, and `evbench collect` fetches both into a
normal run directory. Only complete files are listed: part files are written under a dot-name
and renamed when whole (runtime.parquet), and dot-files are never listed, so a listing
taken mid-run is a consistent prefix of the records, never half a file. Parquet files are
listed by the one rule of contract.partnames (a part a rolled file holds is not offered; a
part listed mid-run may be rolled away before it is fetched). Neither side trusts the
other: a server lists only regular files inside its directory whose footers read, a collector
takes only paths inside its own and files that match the listing.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, TypedDict

import pyarrow as pa
import pyarrow.parquet as pq

from contract.partnames import kept_names

PREFIX = "/records"
_SUFFIXES = (".parquet", ".json", ".jsonl")


class RecordFile(TypedDict):
    path: str  # relative to the records' directory, with forward slashes
    bytes: int


class RecordListing(TypedDict):
    """GET /records: what a receiver or sender host offers `evbench collect`."""

    files: list[RecordFile]


def listing(directory: Path, skipped: Callable[[str], None] | None = None) -> RecordListing:
    """Every complete record file under `directory`: relative path and size. Only regular files
    that stay inside it once links are resolved (a link pointing out is skipped, and said to
    `skipped`), and only Parquet files whose footer reads (a stray or torn file is not a
    record)."""
    files: list[RecordFile] = []
    if not directory.is_dir():
        return {"files": files}
    root = directory.resolve()
    records: dict[Path, set[str]] = {}  # each directory's record files, by the one rule
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if path.suffix not in _SUFFIXES or any(p.startswith(".") for p in relative.parts):
            continue
        if path.suffix == ".parquet" and not _a_record(path, records):
            continue
        if (why := _not_servable(path, root)) is not None:
            if skipped is not None:
                skipped(f"{relative.as_posix()}: not served ({why})")
            continue
        files.append({"path": relative.as_posix(), "bytes": path.stat().st_size})
    return {"files": files}


def _not_servable(path: Path, root: Path) -> str | None:
    """Why `path` is not a record file to serve, or None."""
    real = path.resolve()
    if not real.is_relative_to(root):
        return f"a link to {real}, outside the records' directory"
    if not real.is_file():
        return "not a regular file"
    if path.suffix == ".parquet" and not _footer_reads(real):
        return "not a readable Parquet file"
    return None


def _a_record(path: Path, records: dict[Path, set[str]] | None = None) -> bool:
    """Whether a Parquet file is one of its directory's records (`records`: those known)."""
    known = records if records is not None else {}
    if path.parent not in known:
        try:
            known[path.parent] = set(kept_names(os.listdir(path.parent)))
        except OSError:
            known[path.parent] = set()
    return path.name in known[path.parent]


def _footer_reads(path: Path) -> bool:
    try:
        pq.read_metadata(path)
    except (pa.ArrowException, OSError):
        return False
    return True


def resolve(directory: Path, url_path: str) -> Path | None:
    """The record file a GET /records/<path> names, on the listing's terms, or None (never a
    path outside, never what the listing leaves out). Only that file is looked at: a listing
    reads every footer, once per collect, not once per file fetched."""
    wanted = urllib.parse.unquote(url_path.removeprefix(PREFIX + "/"))
    relative = PurePosixPath(wanted)
    if not wanted or "\x00" in wanted or relative.is_absolute():
        return None
    if relative.suffix not in _SUFFIXES or any(p.startswith(".") for p in relative.parts):
        return None
    path = directory / relative
    if not path.exists() or (path.suffix == ".parquet" and not _a_record(path)):
        return None
    return path if _not_servable(path, directory.resolve()) is None else None


# What one client may cost `evbench serve-records`: its request's head (it never reads a body)
# must be whole within HEAD_TIMEOUT_S of the connection's accept and under HEAD_LIMIT_BYTES, so
# a silent, half-sent or trickling client is closed then (one request per connection: HTTP/1.0,
# no keep-alive to idle in); an answer must be taken at MIN_BYTES_PER_S after that, the rate a
# collector holds a peer to; at most MAX_CONNECTIONS are served at once, each on a thread,
# and beyond them a client is answered 503 and closed.
HEAD_TIMEOUT_S = 10.0
HEAD_LIMIT_BYTES = 64 * 1024
MAX_CONNECTIONS = 64
_BUSY_BODY = b"every connection slot is taken: retry\r\n"
_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)


class _HeadTooLong(Exception):
    """More than HEAD_LIMIT_BYTES read from one connection: it is closed unanswered."""


class _DeadlineReader(io.RawIOBase):
    """A connection's reads, each allowed only what is left of its deadline (a socket timeout
    alone is renewed by every byte a trickling client sends) and HEAD_LIMIT_BYTES in all."""

    def __init__(self, connection: socket.socket, deadline: float) -> None:
        self._connection, self._deadline, self._read_bytes = connection, deadline, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:  # a writable buffer (typeshed's, not importable)
        left_s = self._deadline - time.monotonic()
        if left_s <= 0:
            raise TimeoutError("the request's head was not whole by its deadline")
        if self._read_bytes >= HEAD_LIMIT_BYTES:
            raise _HeadTooLong()
        self._connection.settimeout(left_s)
        got = self._connection.recv_into(buffer, min(memoryview(buffer).nbytes, HEAD_LIMIT_BYTES))
        self._read_bytes += got
        return got


class _Handler(BaseHTTPRequestHandler):
    directory: Path
    head_timeout_s: float

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the plain reader; it would keep the socket's descriptor open
        deadline = time.monotonic() + self.head_timeout_s
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, deadline))

    def handle(self) -> None:
        # A timeout is caught in there (the connection dropped); a client that sent too much
        # or went away is let go here: there is nothing more to say to it.
        with contextlib.suppress(_HeadTooLong, ConnectionError):
            super().handle()

    def do_GET(self) -> None:  # http.server's name for it
        path = self.path.split("?", 1)[0]
        if path == PREFIX:
            offered = listing(self.directory, _said)
            self._send(200, json.dumps(offered).encode(), "application/json")
        elif path.startswith(PREFIX + "/") and (found := resolve(self.directory, path)):
            self._send(200, found, "application/octet-stream")
        else:
            self._send(404, b"GET /records or /records/<path>\n", "text/plain")

    def _send(self, status: int, body: bytes | Path, content_type: str) -> None:
        """The answer, within a deadline a reader taking MIN_BYTES_PER_S meets; a file is sent
        a chunk at a time, never read whole into memory."""
        size = len(body) if isinstance(body, bytes) else body.stat().st_size
        deadline = time.monotonic() + self.head_timeout_s + size / MIN_BYTES_PER_S
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(size))
        self._until(deadline)
        self.end_headers()
        if isinstance(body, bytes):
            self._until(deadline)
            self.wfile.write(body)
            return
        with body.open("rb") as source:
            while size > 0 and (chunk := source.read(min(size, 1 << 20))):
                self._until(deadline)
                self.wfile.write(chunk)
                size -= len(chunk)

    def _until(self, deadline: float) -> None:
        """The next write may take what is left before `deadline` (sendall's timeout is its
        whole duration); a TimeoutError, which drops the connection, once it has passed."""
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            raise TimeoutError("the answer was not taken by its deadline")
        self.connection.settimeout(left_s)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per file fetched is noise in a supervisor's log


def _said(line: str) -> None:
    """What `evbench serve-records` leaves out of a listing, on its stderr (its log)."""
    print(f"evbench serve-records: {line}", file=sys.stderr, flush=True)


_Request = socket.socket | tuple[bytes, socket.socket]  # socketserver's, a stream's or a datagram's


class _RecordsServer(ThreadingHTTPServer):
    """A thread per connection, at most `max_connections` of them; beyond, 503 and close."""

    daemon_threads = True
    request_queue_size = 128  # a burst is accepted and answered (if only 503), not left to hang

    def __init__(
        self, address: tuple[str, int], handler: type[_Handler], max_connections: int
    ) -> None:
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)

    def process_request(self, request: _Request, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):  # a fresh socket's buffer takes it at once
                assert isinstance(request, socket.socket)  # a stream server's request
                request.setblocking(False)
                request.send(_BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: its slot is free again
            self._slots.release()
            raise

    def process_request_thread(self, request: _Request, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: object, client_address: object) -> None:
        _said(f"a request from {client_address} failed: {sys.exc_info()[1]!r}")


def server(
    directory: Path,
    host: str,
    port: int,
    head_timeout_s: float = HEAD_TIMEOUT_S,
    max_connections: int = MAX_CONNECTIONS,
) -> ThreadingHTTPServer:
    """A server for `directory`'s records (call serve_forever; port 0 picks one)."""
    attributes = {"directory": directory, "head_timeout_s": head_timeout_s}
    handler = type("RecordsHandler", (_Handler,), attributes)
    return _RecordsServer((host, port), handler, max_connections)


class PeerError(Exception):
    """A collection that could not be finished: a peer unreachable, failing, or serving what is
    not its records (or this side unable to write them). Says what was tried; `fetched` are the
    files brought home before it failed, `missing` the listed ones that were not."""

    def __init__(self, message: str, fetched: list[Path], missing: list[str]) -> None:
        super().__init__(message)
        self.fetched, self.missing = fetched, missing


# After the connect-and-read timeout, a body must keep coming at this rate at least (a peer
# that trickles is given up on); one file is at most MAX_FILE_BYTES, a listing or a document
# MAX_DOCUMENT_BYTES (a size a peer claims is not believed past them).
MIN_BYTES_PER_S = 64 * 1024
MAX_FILE_BYTES = 1 << 34
MAX_DOCUMENT_BYTES = 1 << 26
# A listed path deeper or longer than a record's ever is, or with a name no file system takes,
# is refused before anything is made of it (2,000 levels ran mkdir out of its recursion).
MAX_PATH_PARTS = 16
MAX_PATH_BYTES = 1024
_NAME_MAX_BYTES = 255


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A peer is asked for its own records: a redirect elsewhere is its answer, an error."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def fetch_all(
    base_url: str, into: Path, timeout_s: float = 30.0, taken: set[str] | None = None
) -> list[Path]:
    """Every file `base_url` lists under /records, into `into` (same relative paths); each
    written under a dot-name first, so an interrupted fetch leaves no half file behind. A
    listing that names a path outside `into` (or one `taken` by another peer), a file whose size
    or Parquet footer does not match it, an unreachable or failing peer: PeerError, naming it."""
    base = base_url.rstrip("/")
    body = _get(base + PREFIX, timeout_s)
    entries = _entries(body, base + PREFIX, taken if taken is not None else set())
    fetched: list[Path] = []
    for number, (relative, size) in enumerate(entries):
        url = f"{base}{PREFIX}/{urllib.parse.quote(relative)}"
        try:
            fetched.append(_fetch_one(url, into / relative, size, timeout_s))
        except PeerError as exc:
            missing = [name for name, _ in entries[number:]]
            raise PeerError(str(exc), fetched, missing) from None
    return fetched


def fetch_json(url: str, timeout_s: float = 10.0) -> object:
    """A peer's JSON document (a receiver's /stats); PeerError when it cannot be had."""
    try:
        return json.loads(_get(url, timeout_s))
    except ValueError as exc:
        raise PeerError(f"{url}: not JSON ({exc})", [], []) from None


def _entries(body: bytes, url: str, taken: set[str]) -> list[tuple[str, int]]:
    """The listing's (relative path, bytes), each a record's path inside the run directory,
    listed once, of a believable size; the paths are added to `taken`."""
    try:
        files = json.loads(body)["files"]
        entries = [(f["path"], f["bytes"]) for f in files]
    except (ValueError, KeyError, TypeError) as exc:
        raise PeerError(f"{url}: not a records listing ({exc!r})", [], []) from None
    mine: set[str] = set()
    for relative, size in entries:
        if (why := _refused(relative, size, taken | mine)) is not None:
            raise PeerError(f"{url} lists {relative!r}: {why}: refused", [], [])
        mine.add(relative)
    taken |= mine
    return entries


def _refused(relative: object, size: object, taken: set[str]) -> str | None:
    """Why a listed (path, bytes) is not a record this side takes, or None."""
    if not isinstance(relative, str) or not relative or "\x00" in relative or "\\" in relative:
        return "not a relative path"
    path = PurePosixPath(relative)
    if path.is_absolute() or any(part.startswith(".") for part in path.parts):
        return "outside its records"
    if len(path.parts) > MAX_PATH_PARTS or len(relative.encode(errors="replace")) > MAX_PATH_BYTES:
        return (
            f"a path too deep or too long (over {MAX_PATH_PARTS} parts or {MAX_PATH_BYTES} bytes)"
        )
    if any(len(part.encode(errors="replace")) > _NAME_MAX_BYTES for part in path.parts):
        return f"a path too deep or too long (a name over {_NAME_MAX_BYTES} bytes)"
    if path.suffix not in _SUFFIXES:
        return "not a record's name"
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_FILE_BYTES:
        return f"a size of {size!r} bytes"
    parents = {p.as_posix() for p in path.parents}
    if relative in taken or parents & taken or any(t.startswith(relative + "/") for t in taken):
        return "listed twice (by this peer or another), or as a file and a directory"
    return None


def _fetch_one(url: str, target: Path, size: int, timeout_s: float) -> Path:
    tmp = target.with_name(f".{target.name}.part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as out:
            total = _stream(url, out, timeout_s, size)
        if total != size:
            raise PeerError(f"{url}: {total} bytes where the listing said {size}: refused", [], [])
        if target.suffix == ".parquet" and not _footer_reads(tmp):
            raise PeerError(
                f"{url}: not a readable Parquet file, as its name says: refused", [], []
            )
        tmp.replace(target)
    except _LocalWriteError as exc:
        raise PeerError(str(exc), [], []) from None
    except OSError as exc:  # this side's disk, not the peer
        raise PeerError(f"cannot write {target}: {exc.strerror or exc}", [], []) from None
    finally:
        # Never raised over the error that is being said (a dot-name is never listed anyway).
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return target


def _get(url: str, timeout_s: float) -> bytes:
    out = io.BytesIO()
    _stream(url, out, timeout_s, MAX_DOCUMENT_BYTES)
    return out.getvalue()


def _stream(url: str, out: BinaryIO, timeout_s: float, limit: int) -> int:
    """`url`'s body into `out`: connect and every read within `timeout_s`, after that at
    MIN_BYTES_PER_S at least, no more than `limit` bytes; its size. PeerError otherwise."""
    began, total = time.monotonic(), 0
    try:
        with _OPENER.open(url, timeout=timeout_s) as answer:
            while chunk := answer.read1(1 << 16):  # what has come: a trickle is seen
                total += len(chunk)
                if total > limit:
                    raise PeerError(f"{url}: more than the {limit} bytes listed: refused", [], [])
                _write(out, chunk, url)
                late_s = time.monotonic() - began - timeout_s
                if late_s > 0 and total < MIN_BYTES_PER_S * late_s:
                    raise PeerError(
                        f"{url}: the body stalled (under {MIN_BYTES_PER_S} B/s)", [], []
                    )
    except urllib.error.HTTPError as exc:
        raise PeerError(f"{url}: HTTP {exc.code} {exc.reason}", [], []) from None
    except urllib.error.URLError as exc:
        raise PeerError(f"{url}: unreachable ({exc.reason})", [], []) from None
    except TimeoutError:
        raise PeerError(f"{url}: no answer within {timeout_s:g} s", [], []) from None
    except (http.client.HTTPException, ConnectionError, ValueError) as exc:
        raise PeerError(f"{url}: not a well-formed HTTP answer ({exc!r})", [], []) from None
    return total


class _LocalWriteError(Exception):
    """Writing to this side's disk failed: not the peer's fault, and not caught as its."""


def _write(out: BinaryIO, chunk: bytes, url: str) -> None:
    try:
        out.write(chunk)
    except OSError as exc:
        raise _LocalWriteError(f"{url}: cannot keep what came ({exc.strerror or exc})") from exc
