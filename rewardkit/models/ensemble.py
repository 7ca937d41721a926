"""``ensemble``: several rewards combined into one, with their spread as the uncertainty.

A policy optimised against one learned reward finds that reward's errors (Gao et al. 2023,
"Scaling Laws for Reward Model Overoptimization"). Members that err differently disagree where
they err, and a penalty on the disagreement keeps the policy away from those regions (Coste et
al. 2023, "Reward Model Ensembles Help Mitigate Overoptimization", ICLR 2024; Eisenstein et al.
2023, "Helping or Herding?").

For member rewards r₁..r_k of one sample (after normalisation, see below), with
r̄ = (1/k) Σ rᵢ and the population variance σ² = (1/k) Σ (rᵢ − r̄)²:

==================  ====================================================================
``mean``            r̄
``min``             minᵢ rᵢ — worst-case optimisation (WCO, Coste et al. 2023)
``uwo``             r̄ − λ·σ² — UWO, uncertainty-weighted (Coste et al. 2023)
``mean_minus_std``  r̄ − λ·σ — a lower confidence bound
==================  ====================================================================

``Score.uncertainty`` is σ, ``Score.components`` each member's (normalised) value.

**Normalisation.** Reward models have arbitrary offsets and scales (Bradley–Terry only fixes
differences), so a raw mean lets the member with the largest scale dominate, and a variance
penalty mostly measures scale differences. Each member is therefore standardised,
(rᵢ − μᵢ)/σᵢ, before combining. μᵢ, σᵢ come from a **reference set** (``reference``: samples,
or a JSONL/JSON/CSV/Parquet path with ``prompt``/``completion``) when one is given — the
recommended form: the statistics are fixed, so the reward does not drift as the policy moves.
Without one they are **running** statistics (Welford), updated with each batch's values before
it is normalised, which drift with the policy's outputs and are undefined for the first
single-sample batch (a member's σ is then taken as 1). ``normalize=False`` combines raw values.
"""
from __future__ import annotations

import math
import threading
from typing import Any, Mapping, Sequence

from ..compose import ConfigError
from ..scorer import Scorer
from ..types import Sample, Score

COMBINES = ("mean", "min", "uwo", "mean_minus_std")


def combine_values(values: Sequence[float], combine: str, lam: float) -> tuple[float, float]:
    """``(combined reward, population std)`` of the member values (see the module docstring)."""
    k = len(values)
    mean = sum(values) / k
    var = sum((v - mean) ** 2 for v in values) / k
    std = math.sqrt(var)
    if combine == "mean":
        return mean, std
    if combine == "min":
        return min(values), std
    if combine == "uwo":
        return mean - lam * var, std
    if combine == "mean_minus_std":
        return mean - lam * std, std
    raise ConfigError(f"combine must be one of {', '.join(COMBINES)}, got {combine!r}")


class _Stats:
    """Per-member mean/std: fixed (from a reference set) or running (Welford's algorithm)."""

    def __init__(self, k: int) -> None:
        self.n = [0] * k
        self.mean = [0.0] * k
        self.m2 = [0.0] * k
        self.fixed = False

    def update(self, member: int, value: float) -> None:
        self.n[member] += 1
        delta = value - self.mean[member]
        self.mean[member] += delta / self.n[member]
        self.m2[member] += delta * (value - self.mean[member])

    def std(self, member: int) -> float:
        n = self.n[member]
        std = math.sqrt(self.m2[member] / n) if n > 1 else 0.0
        return std if std > 1e-8 else 1.0

    def normalize(self, member: int, value: float) -> float:
        return (value - self.mean[member]) / self.std(member)


class EnsembleScorer(Scorer):
    """Several rewards combined by ``mean``, ``min``, ``uwo`` or ``mean_minus_std``.

    Args:
        members: Scorers, reward names, or specs ``{reward, options, name}`` (built with
            ``rewardkit.load``; ``reward`` may be a composition mapping).
        model: instead of ``members``, a K-head reward model (see
            :mod:`rewardkit.models.multihead`): its heads are the members, read from one
            forward pass of the trunk.
        heads: with ``model``, the expected number of heads (checked).
        model_options: with ``model``, options of the model (``max_length``, ``batch_tokens``,
            ``device``, ``dtype``, ``tokenizer``, ``pad_token``, ...), as for ``reward_model``.
        combine: ``mean``, ``min``, ``uwo`` (mean − λ·variance) or ``mean_minus_std``.
        lam: λ of ``uwo`` and ``mean_minus_std``.
        normalize: standardise each member before combining (default True).
        reference: reference samples or a data file whose per-member mean/std normalise the
            members; without it, running statistics (see the module docstring).
        min_members: fewest members that must score a sample; fewer is an error Score. Default
            ``min(2, k)``: with one member left the spread is 0 and a penalty would vanish.
        names: member names (default ``member_0``.., a spec's ``name``, or the heads' names).
        error_value: value of a sample that cannot be scored.
    """

    name = "ensemble"

    def __init__(self, members: Sequence[Any] | None = None, model: str | None = None,
                 heads: int | None = None, model_options: Mapping[str, Any] | None = None,
                 combine: str = "mean", lam: float = 1.0, normalize: bool = True,
                 reference: Any = None, min_members: int | None = None,
                 names: Sequence[str] | None = None, error_value: float = 0.0) -> None:
        if combine not in COMBINES:
            raise ConfigError(f"combine must be one of {', '.join(COMBINES)}, got {combine!r}")
        if isinstance(lam, bool) or not isinstance(lam, (int, float)) or lam < 0:
            raise ConfigError(f"lam must be a number >= 0, got {lam!r}")
        if (members is None) == (model is None):
            raise ConfigError("give the ensemble either members=[...] (rewards) or model=DIR "
                              "(a K-head reward model), not both or neither")
        self.combine, self.lam, self.error_value = combine, float(lam), error_value
        self.multihead = None
        if model is not None:
            from .multihead import MultiHeadRewardScorer

            self.multihead = MultiHeadRewardScorer(model, heads=heads, **dict(model_options
                                                                              or {}))
            self.members: list[Scorer] = []
            default_names = self.multihead.head_names
        else:
            if heads is not None or model_options:
                raise ConfigError("heads and model_options go with model=DIR, not members")
            if isinstance(members, (str, Mapping)) or not members:
                raise ConfigError("members must be a non-empty list of rewards (Scorers, names, "
                                  "or {reward, options} specs)")
            self.members = [_build_member(m, i) for i, m in enumerate(members)]
            default_names = [m.get("name") if isinstance(m, Mapping) and "name" in m
                             else f"member_{i}" for i, m in enumerate(members)]
        self.k = len(default_names)
        self.names = [str(n) for n in (names if names is not None else default_names)]
        if len(self.names) != self.k or len(set(self.names)) != self.k:
            raise ConfigError(f"names must be {self.k} distinct names, got {list(self.names)}")
        self.min_members = min(2, self.k) if min_members is None else int(min_members)
        if not 1 <= self.min_members <= self.k:
            raise ConfigError(f"min_members must be between 1 and {self.k} (the number of "
                              f"members), got {min_members}")
        self.normalize = bool(normalize)
        self.stats = _Stats(self.k)
        self._lock = threading.Lock()
        if reference is not None:
            if not self.normalize:
                raise ConfigError("reference sets normalisation statistics; it has no use with "
                                  "normalize=False")
            self._fit_reference(reference)

    # -- members ----------------------------------------------------------------------------
    def member_scores(self, samples: list[Sample]) -> list[list[Score]]:
        """One list of Scores per member (``[member][sample]``)."""
        if self.multihead is None:
            return [m.score(samples) for m in self.members]
        joint = self.multihead.score(samples)
        out: list[list[Score]] = [[] for _ in range(self.k)]
        for s in joint:
            for j, head in enumerate(self.multihead.head_names):
                value = s.components.get(head)
                if value is None or not math.isfinite(value):
                    out[j].append(s if not s.ok else Score.from_error(
                        f"head {head} returned {value}", self.error_value, kind="nan"))
                else:
                    out[j].append(Score(value))
        return out

    def _fit_reference(self, reference: Any) -> None:
        from .reward_model import _reference_samples

        samples = _reference_samples(reference)
        if len(samples) < 2:
            raise ConfigError("reference needs at least two samples to give each member a "
                              "mean and a std")
        per_member = self.member_scores(samples)
        for j, scores in enumerate(per_member):
            ok = [s.value for s in scores if s.ok and math.isfinite(s.value)]
            if len(ok) < 2:
                raise ConfigError(f"member {self.names[j]!r} scored {len(ok)} of the "
                                  f"{len(samples)} reference samples; it needs at least two")
            for v in ok:
                self.stats.update(j, v)
        self.stats.fixed = True

    # -- Scorer -----------------------------------------------------------------------------
    def score_batch(self, samples: list[Sample]) -> list[Score]:
        per_member = self.member_scores(samples)
        ok = [[s.ok and math.isfinite(s.value) for s in scores] for scores in per_member]
        with self._lock:
            if self.normalize and not self.stats.fixed:
                for j, scores in enumerate(per_member):
                    for s, good in zip(scores, ok[j]):
                        if good:
                            self.stats.update(j, s.value)
            return [self._combine(i, per_member, ok) for i in range(len(samples))]

    def _combine(self, i: int, per_member: list[list[Score]], ok: list[list[bool]]) -> Score:
        raw: dict[str, float] = {}
        components: dict[str, float] = {}
        errors: dict[str, str] = {}
        for j, name in enumerate(self.names):
            s = per_member[j][i]
            if not ok[j][i]:
                errors[name] = s.error or f"returned {s.value}"
                continue
            raw[name] = s.value
            components[name] = self.stats.normalize(j, s.value) if self.normalize else s.value
        info: dict[str, Any] = {"members_used": len(components)}
        if self.normalize:
            info["raw"] = raw
        if errors:
            info["member_errors"] = errors
        if len(components) < self.min_members:
            return Score.from_error(
                f"{len(components)} of {self.k} members scored the sample, fewer than "
                f"min_members={self.min_members}: " + "; ".join(
                    f"{n}: {e}" for n, e in errors.items()),
                self.error_value, kind="ensemble_members", **info)
        value, std = combine_values(list(components.values()), self.combine, self.lam)
        return Score(value, components, uncertainty=std, info=info)

    def close(self) -> None:
        for m in self.members:
            m.close()
        if self.multihead is not None:
            self.multihead.close()


def _build_member(spec: Any, i: int) -> Scorer:
    from ..registry import load

    if isinstance(spec, Scorer):
        return spec
    if isinstance(spec, str):
        return load(spec)
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"reward", "options", "name"}
        if unknown or "reward" not in spec:
            raise ConfigError(f"members[{i}] must be a reward name, a Scorer, or a mapping with "
                              f"`reward` (and `options`, `name`); got keys {sorted(spec)}")
        options = spec.get("options") or {}
        if not isinstance(options, Mapping):
            raise ConfigError(f"members[{i}].options must be a mapping, got {options!r}")
        try:
            return load(spec["reward"], **options)
        except (KeyError, TypeError, ValueError, ImportError) as exc:
            raise ConfigError(f"members[{i}]: {exc}") from exc
    raise ConfigError(f"members[{i}] must be a reward name, a Scorer, or a mapping with "
                      f"`reward`; got {type(spec).__name__}")
