"""Records served over HTTP and fetched back, so that a run made inside a cluster comes home.

A receiver serves its own records (receivers.server: GET /records, /records/<path>), a sender's
records are served by `evbench serve-records DIR`, and `evbench collect` fetches both into a
normal run directory. Only complete files are listed: part files are written under a dot-name
and renamed when whole (contract.parquet), and dot-files are never listed, so a listing
taken mid-run is a consistent prefix of the records, never half a file. Standard library only.
"""

from __future__ import annotations

import json
import shutil
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypedDict

PREFIX = "/records"
_SUFFIXES = (".parquet", ".json", ".jsonl")


class RecordFile(TypedDict):
    path: str  # relative to the records' directory, with forward slashes
    bytes: int


class RecordListing(TypedDict):
    """GET /records/: what a receiver or sender host offers `evbench collect`."""

    files: list[RecordFile]


def listing(directory: Path) -> RecordListing:
    """Every complete record file under `directory`: relative path and size."""
    files: list[RecordFile] = []
    if directory.is_dir():
        for path in sorted(directory.rglob("*")):
            relative = path.relative_to(directory)
            if (
                path.is_file()
                and path.suffix in _SUFFIXES
                and not any(part.startswith(".") for part in relative.parts)
            ):
                files.append({"path": relative.as_posix(), "bytes": path.stat().st_size})
    return {"files": files}


def resolve(directory: Path, url_path: str) -> Path | None:
    """The listed file a GET /records/<path> names, or None (never a path outside, never an
    unlisted file)."""
    wanted = urllib.parse.unquote(url_path.removeprefix(PREFIX + "/"))
    listed = {f["path"] for f in listing(directory)["files"]}
    return directory / wanted if wanted in listed else None


class _Handler(BaseHTTPRequestHandler):
    directory: Path

    def do_GET(self) -> None:  # http.server's name for it
        path = self.path.split("?", 1)[0]
        if path == PREFIX:
            self._send(200, json.dumps(listing(self.directory)).encode(), "application/json")
        elif path.startswith(PREFIX + "/") and (found := resolve(self.directory, path)):
            self._send(200, found.read_bytes(), "application/octet-stream")
        else:
            self._send(404, b"GET /records or /records/<path>\n", "text/plain")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per file fetched is noise in a supervisor's log


def server(directory: Path, host: str, port: int) -> ThreadingHTTPServer:
    """A server for `directory`'s records (call serve_forever; port 0 picks one)."""
    handler = type("RecordsHandler", (_Handler,), {"directory": directory})
    return ThreadingHTTPServer((host, port), handler)


def fetch_all(base_url: str, into: Path, timeout_s: float = 30.0) -> list[Path]:
    """Every file `base_url` lists under /records, into `into` (same relative paths); each
    written under a dot-name first, so an interrupted fetch leaves no half file behind."""
    with urllib.request.urlopen(base_url.rstrip("/") + PREFIX, timeout=timeout_s) as answer:
        files = json.load(answer)["files"]
    fetched = []
    for entry in files:
        relative = Path(entry["path"])
        if relative.is_absolute() or ".." in relative.parts:
            raise ValueError(f"{base_url} lists a path outside its records: {entry['path']}")
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.part")
        url = f"{base_url.rstrip('/')}{PREFIX}/{urllib.parse.quote(relative.as_posix())}"
        with urllib.request.urlopen(url, timeout=timeout_s) as answer, open(tmp, "wb") as out:
            shutil.copyfileobj(answer, out)
        if tmp.stat().st_size != entry["bytes"]:
            tmp.unlink()
            raise ValueError(f"{url}: got a different size than listed ({entry['bytes']} bytes)")
        tmp.replace(target)
        fetched.append(target)
    return fetched
