"""The lines a sender (or a fleet's master) prints about its Prometheus /metrics, typed once
(contract.lines' rules hold: an `event` Literal per kind, writers build each line as its type,
readers parse it once where they read it).

- `metrics_listening`: with `--sender-metrics-port`, once its /metrics server is bound (a port
  of 0 asked for a free one: this line says which).
- `metrics`: with `--metrics-lines`, every second and once more before the done line, the
  figures its /metrics serves; a fleet worker's sender prints them for its master, which serves
  their sums. Stdlib only.
"""

# No `from __future__ import annotations`, as in contract.lines: TypedDicts read their
# annotations at definition time.
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias, TypedDict, cast, get_args, get_type_hints

from contract.errors import EvbenchError

METRICS_PATH = "/metrics"


class MetricsListening(TypedDict):
    event: Literal["metrics_listening"]
    host: str
    port: int
    url: str  # http://HOST:PORT/metrics, what a Prometheus scrape_config targets


class HistogramDoc(TypedDict):
    """Observations by bucket, as Prometheus' `le` buckets but NOT cumulative: counts[i] is
    how many fell in (bounds_s[i-1], bounds_s[i]]; the last count, one more than the bounds,
    is those above every bound."""

    bounds_s: list[float]
    counts: list[int]
    sum_s: float


class SenderMetrics(TypedDict):
    """A sender's figures since it started: counts as in its done line, levels now, and its
    histograms of sender lag (sent - intended) and publish latency (ack - sent, acked events
    only) as of its last record flush."""

    event: Literal["metrics"]
    sent: int
    ok: int
    failures: int  # the in-flight cap's refusals included, as in the done line
    inflight_cap_refused: int
    timed_out: int
    rows_written: int
    inflight: int
    step: int  # the step under way, or the last one (0 before the first)
    target_rate_per_s: int  # the pace's rate now: 0 before, between and after the steps
    lag: HistogramDoc
    publish_latency: HistogramDoc


def metrics_listening(host: str, port: int) -> MetricsListening:
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address, in a URL
    return {
        "event": "metrics_listening",
        "host": host,
        "port": port,
        "url": f"http://{shown}:{port}{METRICS_PATH}",
    }


MetricsLine: TypeAlias = MetricsListening | SenderMetrics

_KINDS: dict[str, type] = {
    get_args(get_type_hints(kind)["event"])[0]: kind for kind in get_args(MetricsLine)
}


def parse_metrics_line(doc: Mapping[str, Any]) -> MetricsLine | None:
    """A sender's metrics line as its type; None for any other event; an EvbenchError names
    the keys a line of these kinds lacks."""
    kind = _KINDS.get(str(doc.get("event")))
    if kind is None:
        return None
    required: frozenset[str] = vars(kind)["__required_keys__"]
    if missing := sorted(required - doc.keys()):
        what = f"the sender printed a '{doc['event']}' line"
        raise EvbenchError(f"{what} without {', '.join(missing)}")
    return cast(MetricsLine, dict(doc))
