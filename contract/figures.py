"""What the analysis adds to summary.json for its readers beside the steps' figures: each
objective as judged (`--slo`, analysis.objectives) and the percentile spectrum
(analysis.spectrum)."""

from typing import Literal, NotRequired, TypedDict

MeasuredUnit = Literal["ms", "per_s", "events", "share"]
# Where a summary's objectives came from: the analysing command's `--slo`, or run.json's
# `objectives` (the run's own `--slo`, judged again by a re-analysis given none).
ObjectivesFrom = Literal["--slo", "run.json"]


class SpectrumPointDoc(TypedDict):
    """A point of the percentile spectrum (analysis.spectrum): the latency at quantile q."""

    q: float
    ms: float
    exact: bool  # an order statistic of every sample (else the T-Digest's estimate)
    max: bool  # the largest sample, at q = 1 - 1/n


class ObjectiveDoc(TypedDict):
    """An objective (`--slo`) as the analysis judged it (analysis.objectives)."""

    objective: str  # as given
    met: bool
    measured: float | None  # what decided it, in `unit` (None: not measured); a breaking point
    # that never came: the highest rate that held, below it
    unit: MeasuredUnit  # ms, events/s, events, or a share (0.001: 0.1 %)
    where: str  # the run, the step that breached it, or every judged step
    text: str


class IntervalDoc(TypedDict):
    """A quantile's ~95 % distribution-free confidence interval (analysis.confidence)."""

    lo_ms: float
    hi_ms: float | None  # None: the upper rank is past the samples (no upper bound)
    exact: bool  # both ends exact order statistics (else the T-Digest's estimate at the rank)
    n: int  # the samples it is drawn from


class TailDoc(TypedDict):
    """Latency tail figures in ms (analysis.digests.tail_figures)."""

    p50: float | None
    p99: float | None
    p999: float | None
    p9999: float | None
    max: float | None
    n: int
    p9999_is_max: bool
    # The figures computed exactly, as order statistics of every sample (analysis.digests).
    exact: list[str]
    # For each figure not exact: the most its rank can be off, as a fraction of n (the weight
    # of the digest's centroids around it); the true value lies between the order statistics
    # at q - rank_error and q + rank_error.
    rank_error: dict[str, float]
    # p50, p99, p9999: how sure (analysis.confidence); p50 absent in summaries from before
    ci95: NotRequired[dict[str, IntervalDoc]]
