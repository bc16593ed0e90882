"""What the analysis adds to summary.json for its readers beside the steps' figures: each
objective as judged (`--slo`, analysis.objectives) and the percentile spectrum
(analysis.spectrum)."""

from typing import Literal, TypedDict

MeasuredUnit = Literal["ms", "per_s", "events", "share"]


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
