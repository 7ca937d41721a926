"""Intervals for the audit's rates and means.

The variants of one row are not independent (one gold, one prompt: a reward that misreads the
row misreads all of them), so the interval resamples *rows*, each with all its variants (a
cluster bootstrap, Davison & Hinkley 1997, §3.8), and reads the statistic as a ratio of sums
over the resampled rows. Written with numpy here rather than with ``scipy.stats.bootstrap``:
scipy is not a dependency of the core install the audit runs in, and the ratio of sums over
clusters is a few lines of numpy.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float], seed: int = 0,
                   resamples: int = RESAMPLES, level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap interval of ``sum(numerators) / sum(denominators)`` over rows
    drawn with replacement (row ``i`` contributes ``numerators[i]`` of ``denominators[i]``)."""
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if len(num) == 0 or den.sum() <= 0:
        return (math.nan, math.nan)
    point = float(num.sum() / den.sum())
    if len(num) == 1:
        return (point, point)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(num), size=(resamples, len(num)))
    totals = den[picks].sum(axis=1)
    stats = num[picks].sum(axis=1)[totals > 0] / totals[totals > 0]
    tail = (1.0 - level) / 2
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return (float(low), float(high))
