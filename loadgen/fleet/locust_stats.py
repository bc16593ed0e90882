"""Locust's statistics fed from a sender's per-second latency counts.

A sender with `--latency-histograms` prints, every second and once more at its end, an
`answers` line: the answers since the last one by whole ms from each event's intended time
(`latency_ms_counts`) and the failures by error (`errors`). Logging them
one request at a time would cost a Locust call per event; this logs a window in one pass per
distinct millisecond, with the same effect on Locust's entries as `RequestStats.log_request`
(counts, total and extremes, the rounded-time histogram, requests per second, content length)
and `log_error`.
"""

from __future__ import annotations

import time

from locust.stats import RequestStats, StatsEntry, StatsError, bucket_response_time

from contract.senderlines import SenderAnswers

METHOD = "POST"


def _log_many(entry: StatsEntry, latency_ms: int, count: int, content_length: int) -> None:
    now = time.time()
    entry.num_requests += count
    entry.num_reqs_per_sec[int(now)] += count
    entry.last_request_timestamp = now
    entry.total_response_time += latency_ms * count
    if entry.min_response_time is None or latency_ms < entry.min_response_time:
        entry.min_response_time = latency_ms
    entry.max_response_time = max(entry.max_response_time, latency_ms)
    entry.response_times[bucket_response_time(latency_ms)] += count
    entry.total_content_length += content_length * count


def feed(stats: RequestStats, name: str, answers: SenderAnswers, content_length: int = 0) -> int:
    """Log one `answers` line under `name`; returns how many were logged."""
    entry = stats.get(name, METHOD)
    logged = 0
    for latency_text, count in answers["latency_ms_counts"].items():
        latency_ms = max(0, int(latency_text))  # a clock step could make one negative
        _log_many(entry, latency_ms, count, content_length)
        _log_many(stats.total, latency_ms, count, content_length)
        logged += count
    for error, count in answers["errors"].items():
        _errors_many(stats, name, error, count)
    return logged


def _errors_many(stats: RequestStats, name: str, error: str, count: int) -> None:
    """`RequestStats.log_error` `count` times over, in one go."""
    now = time.time()
    for entry in (stats.total, stats.get(name, METHOD)):
        entry.num_failures += count
        entry.num_fail_per_sec[int(now)] += count
    key = StatsError.create_key(METHOD, name, error)
    found = stats.errors.get(key)
    if found is None:
        found = stats.errors[key] = StatsError(METHOD, name, error)
    found.occurred()
    found.occurrences += count - 1
