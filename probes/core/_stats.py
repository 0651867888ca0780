"""Statistics over one set of samples: median, p5, p95 and coefficient of variation."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from topology import Stats


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default ``linear`` method)."""
    if not values:
        raise ValueError("no samples")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} outside 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    lo = math.floor(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def summarize(values: Sequence[float]) -> Stats:
    """``cv`` is the sample standard deviation over the mean (0 for a single sample)."""
    if not values:
        raise ValueError("no samples")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"samples must be finite: {list(values)!r}")
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0
    return Stats(
        median=statistics.median(values),
        p5=percentile(values, 5),
        p95=percentile(values, 95),
        cv=cv,
        samples=tuple(float(v) for v in values),
    )
