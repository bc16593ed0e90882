"""How sure a tail figure is: the distribution-free confidence interval of a quantile, and the
call whether one run's figure differs from another's (pure, table-tested).

The number of samples below the true q-quantile is binomial(n, q) whatever latency's shape, so
the order statistics at ranks nq -/+ z sqrt(nq(1-q)) bound it with about 95 % confidence (the
normal approximation to the binomial; `rank_interval`). Where the upper rank is past the samples
(P99.99 of 20,000 events), nothing bounds the quantile from above: the interval is open. Each
end is an exact order statistic where the kept top values reach its rank, else the T-Digest's
estimate at that rank, and the interval says so.

Two runs' figures differ only when their intervals do not overlap, beyond a tolerance: a run
against itself, or against a repeat of the same system, comes out indistinguishable.
"""

from __future__ import annotations

import math

import fastdigest
import numpy as np

from analysis.digests import P9999_MIN_SAMPLES, quantile, tail_figures
from contract.figures import IntervalDoc, TailDoc

Z_95 = 1.959963984540054  # the two-sided 95 % normal quantile
BETTER, WORSE, SAME = "better", "worse", "indistinguishable"


def rank_interval(n: int, q: float, z: float = Z_95) -> tuple[int, int | None]:
    """The 1-based ranks (low, high) of the order statistics that bound the q-quantile of n
    samples with the confidence of `z`; high None: past the samples (no upper bound)."""
    spread = z * math.sqrt(n * q * (1 - q))
    low = max(1, math.floor(n * q - spread))
    high = math.ceil(n * q + spread) + 1
    return low, (high if high <= n else None)


def quantile_interval(
    digest: fastdigest.TDigest, top: np.ndarray | None, q: float
) -> IntervalDoc | None:
    """The ~95 % interval of the q-quantile (None without samples)."""
    n = int(digest.n_values)
    if n == 0:
        return None
    low, high = rank_interval(n, q)
    lo_ms, lo_exact = _order_statistic(digest, top, low)
    if high is None:
        return {"lo_ms": round(lo_ms, 4), "hi_ms": None, "exact": lo_exact, "n": n}
    hi_ms, hi_exact = _order_statistic(digest, top, high)
    return {"lo_ms": round(lo_ms, 4), "hi_ms": round(hi_ms, 4), "exact": lo_exact and hi_exact,
            "n": n}  # fmt: skip


def _order_statistic(
    digest: fastdigest.TDigest, top: np.ndarray | None, rank: int
) -> tuple[float, bool]:
    """The rank-th smallest sample (1-based), as `quantile` reads the q at that rank."""
    n = int(digest.n_values)
    return quantile(digest, top, (rank - 1) / (n - 1) if n > 1 else 0.0)


def change(before: IntervalDoc | None, after: IntervalDoc | None, tolerance: float = 0.0) -> str:
    """`after` against `before` for a latency (lower is better): worse when its whole interval
    lies above `before`'s beyond `tolerance` (a share), better when below; indistinguishable
    when they overlap, or a figure is missing."""
    if before is None or after is None:
        return SAME
    if before["hi_ms"] is not None and after["lo_ms"] > before["hi_ms"] * (1 + tolerance):
        return WORSE
    if after["hi_ms"] is not None and after["hi_ms"] * (1 + tolerance) < before["lo_ms"]:
        return BETTER
    return SAME


# The figures that get an interval, by their names in TailDoc, and their quantiles; P99.99
# only where it is not the max (under 10^4 samples it is, and says so). P50's ends lie below the
# kept top values: the T-Digest's estimates at its ranks (`exact` false), which `compare` calls
# each step's P50 from.
INTERVAL_QUANTILES = {"p50": 0.5, "p99": 0.99, "p9999": 0.9999}


def intervals(digest: fastdigest.TDigest, top: np.ndarray | None) -> dict[str, IntervalDoc]:
    """TailDoc's `ci95`: each of INTERVAL_QUANTILES' intervals the samples allow."""
    n = int(digest.n_values)
    found = {}
    for name, q in INTERVAL_QUANTILES.items():
        if name == "p9999" and n < P9999_MIN_SAMPLES:
            continue
        if (interval := quantile_interval(digest, top, q)) is not None:
            found[name] = interval
    return found


def with_intervals(digest: fastdigest.TDigest, top: np.ndarray | None) -> TailDoc:
    """The tail figures (analysis.digests.tail_figures) with their intervals."""
    return {**tail_figures(digest, top), "ci95": intervals(digest, top)}
