"""Reward normalisation across a batch: none, per batch, per group, or running statistics.

Group normalisation is the GRPO baseline applied at the reward level (Shao et al. 2024,
DeepSeekMath): ``(r - mean_group) / (std_group + eps)``. Running normalisation keeps a streaming
mean/variance (Welford's algorithm) across calls, like the reward scaling of PPO implementations
(Engstrom et al. 2020, "Implementation Matters").
"""
from __future__ import annotations

import math
import threading
from collections import defaultdict
from typing import Any, Hashable, Sequence

from .types import Sample

METHODS = ("none", "batch", "group", "running")


class NormalizeWarning(UserWarning):
    """Normalisation that is probably not doing what was meant (e.g. groups of one)."""


def group_key(sample: Sample) -> Hashable:
    """Samples of one group share ``metadata["group"]``, or failing that the same prompt."""
    if sample.metadata and "group" in sample.metadata:
        g = sample.metadata["group"]
        return g if isinstance(g, Hashable) else repr(g)
    p = sample.prompt
    return p if isinstance(p, str) else repr(p)


def _standardize(values: Sequence[float], scale: bool, eps: float) -> list[float]:
    n = len(values)
    if n == 0:
        return []
    mean = sum(values) / n
    if not scale:
        return [v - mean for v in values]
    var = sum((v - mean) ** 2 for v in values) / n
    std = math.sqrt(var)
    return [(v - mean) / (std + eps) for v in values]


class Normalizer:
    """Normalise the rewards of a batch.

    Args:
        method: ``none``, ``batch`` (batch mean/std), ``group`` (per group, see
            :func:`group_key`) or ``running`` (streaming mean/std across calls).
        scale: divide by the std (True) or only subtract the mean (False, as in Dr. GRPO,
            Liu et al. 2025).
        eps: added to the std.
    """

    def __init__(self, method: str = "none", scale: bool = True, eps: float = 1e-6) -> None:
        if method not in METHODS:
            raise ValueError(f"normalize method must be one of {METHODS}, got {method!r}")
        self.method, self.scale, self.eps = method, scale, eps
        self._n = 0
        self._mean = 0.0
        self._m2 = 0.0
        self._lock = threading.Lock()
        self._warned_singletons = False

    def __call__(self, values: list[float], samples: Sequence[Sample]) -> list[float]:
        if self.method == "none" or not values:
            return values
        if self.method == "batch":
            return _standardize(values, self.scale, self.eps)
        if self.method == "group":
            groups: dict[Any, list[int]] = defaultdict(list)
            for i, s in enumerate(samples):
                groups[group_key(s)].append(i)
            if not self._warned_singletons and any(len(idx) == 1 for idx in groups.values()):
                self._warn_singletons(sum(len(idx) == 1 for idx in groups.values()), len(values))
            out = list(values)
            for idx in groups.values():
                for i, v in zip(idx, _standardize([values[i] for i in idx], self.scale, self.eps)):
                    out[i] = v
            return out
        return self._running(values)

    def _warn_singletons(self, singletons: int, total: int) -> None:
        """Once per normaliser: a group of one normalises to 0.0 whatever it scored, so a run
        whose groups are never formed (unique prompts offline, a trainer that scores one
        completion per call) would silently pay 0.0 for everything."""
        import warnings

        self._warned_singletons = True
        warnings.warn(
            f"normalize: group got {singletons} of {total} samples alone in their group; a group "
            "of one normalises to 0.0 whatever it scored (the raw total is kept in "
            "info['raw_total']). Score a prompt's completions together (offline: rows of one "
            "prompt adjacent; verl: compute_score_batch with the batch manager), set "
            "metadata['group'], or use normalize: batch / none", NormalizeWarning, stacklevel=4)

    def _running(self, values: list[float]) -> list[float]:
        with self._lock:
            for v in values:  # Welford update
                self._n += 1
                delta = v - self._mean
                self._mean += delta / self._n
                self._m2 += delta * (v - self._mean)
            mean = self._mean
            std = math.sqrt(self._m2 / self._n) if self._n > 1 else 0.0
        if not self.scale:
            return [v - mean for v in values]
        return [(v - mean) / (std + self.eps) for v in values]

    def state_dict(self) -> dict[str, float]:
        return {"n": self._n, "mean": self._mean, "m2": self._m2}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self._n, self._mean, self._m2 = int(state["n"]), float(state["mean"]), float(state["m2"])
