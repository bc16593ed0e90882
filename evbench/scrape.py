"""Prometheus text endpoints scraped during a session (`--scrape NAME=URL`, and the lab's own
/metrics), into samples/metrics/ on the run's time axis.

Each endpoint has a thread of its own, so one that hangs or answers garbage costs only itself:
every attempt gives up after about the interval (connecting and each read get half of it, and
a body still trickling in when it is up is dropped), a late tick is skipped rather than queued,
and nothing here ever waits on the run; stopping costs a hung endpoint at most about one more
interval. Bodies are parsed by the Prometheus client library's parser, never by hand; each attempt
also adds the scraper's own `up` and `scrape_duration_seconds` rows, as Prometheus does, so a
dead endpoint is visible on the same axis as the system's figures.
"""

from __future__ import annotations

import argparse
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
from prometheus_client.parser import text_string_to_metric_families

from contract.errors import EvbenchError
from contract.insight import SCRAPE_DURATION_METRIC, UP_METRIC, ScrapeDoc
from contract.layout import safe_component
from contract.records import METRIC_SAMPLE_FIELDS, MetricSampleRow
from runtime.argtypes import named_url
from runtime.parquet import PartWriter, record_roll_s

Origin = Literal["user", "lab"]
_FLUSH_EVERY = 10  # scrapes between part files: a crash loses at most this many seconds
_LONGEST_ERROR_CHARS = 200  # of an error kept in run.json
# An attempt takes at most about this many intervals: connecting and each read are bounded by
# half an interval, and a body still coming in after the interval is given up on.
_ATTEMPT_BOUND = 1.5


@dataclass(frozen=True)
class ScrapeTarget:
    name: str  # names its rows' `endpoint` and its part files
    url: str
    origin: Origin = "user"


def scrape_target(text: str) -> ScrapeTarget:
    """`--scrape [NAME=]URL`: without a name, the endpoint is named after its host and port."""
    name, url = named_url(text)
    if name is None:
        where = urllib.parse.urlsplit(url)
        spelled = f"{where.hostname}-{where.port or where.scheme}"
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", spelled).strip("-._")
    try:
        return ScrapeTarget(safe_component("scrape name", name), url)
    except EvbenchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def canonical_labels(labels: dict[str, str]) -> str:
    """`{a="x",b="y"}`, sorted, values escaped as the text format escapes them; "" for none."""
    if not labels:
        return ""
    pairs = (f'{key}="{_escape(value)}"' for key, value in sorted(labels.items()))
    return "{" + ",".join(pairs) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def parse_exposition(text: str, endpoint: str, t_ns: int) -> list[MetricSampleRow]:
    """Every sample of a Prometheus text exposition as a row; ValueError when the parser
    refuses the body (then none of it is kept: a half-read scrape would look like a drop)."""
    families = list(text_string_to_metric_families(text))
    # `# TYPE foo counter` followed by `foo_total` reads as an empty typed family and an
    # untyped one: the sample keeps the type its TYPE line declared.
    declared = {family.name: family.type for family in families if not family.samples}
    rows = []
    for family in families:
        kind = family.type
        if kind == "unknown" and family.name.endswith("_total"):
            kind = declared.get(family.name.removesuffix("_total"), kind)
        for sample in family.samples:
            labels = canonical_labels(sample.labels)
            rows.append(MetricSampleRow(t_ns, endpoint, sample.name, kind, labels, sample.value))
    return rows


def scraper_rows(endpoint: str, t_ns: int, up: bool, duration_s: float) -> list[MetricSampleRow]:
    """The scraper's own rows for one attempt."""
    return [
        MetricSampleRow(t_ns, endpoint, UP_METRIC, "gauge", "", 1.0 if up else 0.0),
        MetricSampleRow(t_ns, endpoint, SCRAPE_DURATION_METRIC, "gauge", "", duration_s),
    ]


class _Endpoint:
    """One endpoint's thread: scrape, parse, write, count."""

    def __init__(self, target: ScrapeTarget, out: Path, interval_s: float) -> None:
        self.target = target
        self.interval_s = interval_s
        self.writer = PartWriter(
            out, METRIC_SAMPLE_FIELDS, prefix=f"metrics-{target.name}", roll_s=record_roll_s()
        )
        self.doc = ScrapeDoc(
            name=target.name,
            url=target.url,
            interval_s=interval_s,
            origin=target.origin,
            scrapes=0,
            failures=0,
            samples=0,
            slowest_s=0.0,
            first_error=None,
            last_error=None,
        )
        self._stop = threading.Event()
        self._stopped = False  # set under the lock once stopped: a late attempt is dropped
        self._last_began = time.monotonic()
        self._last_ok = True
        self._lock = threading.Lock()  # the writer, between this thread and stop()
        self._thread = threading.Thread(target=self._run, name=f"scrape-{target.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def signal_stop(self) -> None:
        """Ask for the last attempt: the series then ends where the session did (a counter's
        final value, not the one up to an interval before)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        # An attempt under way and the last one together take at most about an interval
        # (see _last_attempt); whatever comes after the join is dropped.
        self._thread.join(timeout=self.interval_s * _ATTEMPT_BOUND + 0.5)
        with self._lock:
            self._stopped = True
            self._flush()
            self.writer.roll()  # a day of scrapes: ~1,440 files, as the records

    def _run(self) -> None:
        next_tick = time.monotonic()
        phase_s = self.interval_s / 2  # connect, then each read: see _ATTEMPT_BOUND
        with httpx.Client(timeout=phase_s, follow_redirects=True) as client:
            while not self._stop.is_set():
                self._once(client)
                if self.doc["scrapes"] % _FLUSH_EVERY == 0:
                    with self._lock:
                        self._flush()
                # Ticks missed by a slow attempt are skipped, not made up in a burst.
                next_tick += self.interval_s
                now = time.monotonic()
                if next_tick < now:
                    next_tick = now + self.interval_s - (now - next_tick) % self.interval_s
                self._stop.wait(next_tick - now)
            if self._last_attempt_worth_it():
                self._once(client)

    def _last_attempt_worth_it(self) -> bool:
        """Not after a failed attempt (a hung endpoint is not waited for twice), nor within
        half an interval of the last one (two samples that close make a counter's rate
        spike: its increments come in batches)."""
        since_s = time.monotonic() - self._last_began
        return self._last_ok and since_s >= self.interval_s / 2

    def _once(self, client: httpx.Client) -> None:
        t_ns, began = time.time_ns(), time.monotonic()
        self._last_began = began
        try:
            body = _get_within(client, self.target.url, began + self.interval_s)
            rows = parse_exposition(body, self.target.name, t_ns)
            error = None
        except (httpx.HTTPError, ValueError, UnicodeDecodeError, _TooSlow) as exc:
            rows, error = [], _describe(exc)
        self._last_ok = error is None
        took_s = time.monotonic() - began
        with self._lock:
            if self._stopped:
                return
            for row in [*rows, *scraper_rows(self.target.name, t_ns, error is None, took_s)]:
                self.writer.append(row)
            self._count(len(rows), took_s, error)

    def _flush(self) -> None:
        """Rows to a part file; a disk that refuses is said in run.json, and scraping goes on
        (the rows stay buffered for the next flush)."""
        try:
            self.writer.flush()
        except OSError as exc:
            self.doc["last_error"] = f"writing {self.writer.directory}: {exc}"

    def _count(self, samples: int, took_s: float, error: str | None) -> None:
        doc = self.doc
        doc["scrapes"] += 1
        doc["samples"] += samples
        doc["slowest_s"] = round(max(doc["slowest_s"], took_s), 6)
        if error is not None:
            doc["failures"] += 1
            doc["last_error"] = error
            doc["first_error"] = doc["first_error"] or error

    def snapshot(self) -> ScrapeDoc:
        """The account as of now, whole (the thread updates it under the lock)."""
        with self._lock:
            return ScrapeDoc(**self.doc)


class _TooSlow(Exception):
    """A body still coming in when the attempt's time was up."""


def _get_within(client: httpx.Client, url: str, deadline: float) -> str:
    """The body of a 2xx answer, given up on at `deadline`: the client's timeouts bound each
    phase (connect, each read), this bounds a body that trickles in."""
    with client.stream("GET", url) as answer:
        answer.raise_for_status()
        chunks = []
        for chunk in answer.iter_bytes():
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise _TooSlow(f"the body was still coming in after the interval ({url})")
        return b"".join(chunks).decode(answer.encoding or "utf-8")


def _describe(exc: Exception) -> str:
    """An attempt's failure in one line: what kind, and what was said."""
    if isinstance(exc, httpx.TimeoutException | _TooSlow):
        text = f"no answer within the interval ({type(exc).__name__})"
    elif isinstance(exc, httpx.HTTPStatusError):
        text = f"HTTP {exc.response.status_code}"
    elif isinstance(exc, httpx.HTTPError):
        text = f"{type(exc).__name__}: {exc}"
    else:
        text = f"not Prometheus text: {exc}"
    if len(text) <= _LONGEST_ERROR_CHARS:
        return text
    return text[: _LONGEST_ERROR_CHARS - 1] + "…"


class Scraper:
    """The session's endpoints; each started when added and stopped when removed (a lab
    system's when the system stops), and described for run.json whatever happened."""

    def __init__(self, out: Path, interval_s: float = 1.0) -> None:
        self.out = out
        self.interval_s = interval_s
        self._live: dict[str, _Endpoint] = {}
        self._done: list[ScrapeDoc] = []

    def add(self, target: ScrapeTarget) -> None:
        if target.name in self._live:  # a restarted system's component: a new address
            self.remove(target.name)
        endpoint = _Endpoint(target, self.out, self.interval_s)
        self._live[target.name] = endpoint
        endpoint.start()

    def remove(self, name: str) -> None:
        self._remove([name])

    def remove_origin(self, origin: Origin) -> None:
        self._remove([n for n, e in self._live.items() if e.target.origin == origin])

    def stop(self) -> None:
        self._remove(list(self._live))

    def _remove(self, names: list[str]) -> None:
        """Each endpoint's last attempt, all at once (a hung one costs its interval, once)."""
        endpoints = [e for name in names if (e := self._live.pop(name, None)) is not None]
        for endpoint in endpoints:
            endpoint.signal_stop()
        for endpoint in endpoints:
            try:
                endpoint.stop()
            finally:  # its account is kept whatever its stop met
                self._done.append(endpoint.snapshot())

    def docs(self) -> list[ScrapeDoc]:
        """Every endpoint's account so far (live ones as of now, each whole)."""
        return [*self._done, *(e.snapshot() for e in self._live.values())]
