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
``std``             σ — the disagreement alone, for a composition that subtracts it from
                    another reward (``weight: -λ``): the gain from one reward, the penalty
                    from members that err differently
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

**Trained ensembles in one line.** ``model=DIR`` reads ``DIR/rewardkit.json``: ``kind:
rm_heads`` is a K-head model (:mod:`rewardkit.models.multihead`, one forward pass of the trunk);
``kind: rm_ensemble`` is the manifest ``rewardkit train rm --ensemble K`` writes::

    {"kind": "rm_ensemble", "form": "models" | "lora",
     "members": ["../member_0/final", ...], "names": ["member_0", ...],
     "base": "<base model>", "adapters": ["../member_0/final/adapter", ...]}

with paths relative to DIR (``base`` and ``adapters`` for ``form: lora`` only). ``models``
loads each member as a ``reward_model``; ``lora`` loads the base once with the K adapters
attached (:mod:`rewardkit.models.lora_members`: K forward passes, one trunk in memory).
``model=BASE, adapters=[...]`` loads adapters of one's own the same way.
"""
from __future__ import annotations

import inspect
import json
import math
import threading
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..compose import ConfigError
from ..registry import accepted_options, load
from ..scorer import Scorer
from ..types import Sample, Score
from .loading import SIDECAR, ModelLoadError
from .lora_members import LoraMembersScorer, check_adapter_dir, manifest_sidecar
from .multihead import MultiHeadRewardScorer
from .reward_model import RewardModelScorer, _reference_samples

COMBINES = ("mean", "min", "uwo", "mean_minus_std", "std")


class EnsembleNormalisationWarning(UserWarning):
    """An ensemble standardises its members without a reference set."""


RUNNING_STATS_WARNING = (
    "ensemble: no `reference` given, so each member is standardised with running statistics "
    "of the batches scored so far; the first batches are only compared with each other (a "
    "batch of two samples gives every member -1 and +1, and `min` then gives -1 to both). "
    "Pass reference=FILE (prompt/completion rows like the ones to be scored) for fixed "
    "statistics, or normalize=False to combine raw values.")


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
    if combine == "std":
        return std, std
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
        model: instead of ``members``, a trained ensemble folder: a K-head reward model
            (``rm_heads``, see :mod:`rewardkit.models.multihead`: its heads are the members,
            read from one forward pass of the trunk) or the ``rm_ensemble`` manifest of
            ``train rm --ensemble K`` (see the module docstring); with ``adapters``, the base
            model the adapters were trained on.
        adapters: with ``model=BASE``, LoRA adapter folders (peft ``save_pretrained`` of a
            ``SEQ_CLS`` model), one member each, all on one copy of the base.
        heads: with ``model``, the expected number of members (checked).
        model_options: with ``model``, options of the model (``max_length``, ``batch_tokens``,
            ``device``, ``dtype``, ``tokenizer``, ``pad_token``, ...), as for ``reward_model``.
        combine: ``mean``, ``min``, ``uwo`` (mean − λ·variance), ``mean_minus_std`` or ``std``.
        lam: λ of ``uwo`` and ``mean_minus_std``.
        normalize: standardise each member before combining (default True).
        reference: reference samples or a data file whose per-member mean/std normalise the
            members; without it, running statistics (see the module docstring).
        min_members: fewest members that must score a sample; fewer is an error Score. Default
            ``k``, every member: a member that cannot score would otherwise drop out silently,
            and with it the pessimism of ``min`` and the penalty of ``uwo`` (the member that
            vanishes may be the one that disagrees). Set it lower to tolerate failures
            explicitly; ``info["members_used"]`` and ``info["members_total"]`` then say how
            many scored.
        names: member names (default ``member_0``.., a spec's ``name``, or the heads' names).
        error_value: value of a sample that cannot be scored.
    """

    name = "ensemble"

    def __init__(self, members: Sequence[Any] | None = None, model: str | None = None,
                 heads: int | None = None, model_options: Mapping[str, Any] | None = None,
                 adapters: Sequence[str] | None = None,
                 combine: str = "mean", lam: float = 1.0, normalize: bool = True,
                 reference: Any = None, min_members: int | None = None,
                 names: Sequence[str] | None = None, error_value: float = 0.0) -> None:
        if combine not in COMBINES:
            raise ConfigError(f"combine must be one of {', '.join(COMBINES)}, got {combine!r}")
        if isinstance(lam, bool) or not isinstance(lam, (int, float)) or lam < 0:
            raise ConfigError(f"lam must be a number >= 0, got {lam!r}")
        if (members is None) == (model is None):
            raise ConfigError("give the ensemble either members=[...] (rewards) or model=DIR "
                              "(a trained ensemble or K-head reward model), not both or "
                              "neither")
        self.combine, self.lam, self.error_value = combine, float(lam), error_value
        # shared: one model giving every member's value per sample (K heads or K adapters)
        self.shared: Any = None
        if model is not None:
            self.shared, self.members, default_names = load_trained(
                model, adapters, heads, model_options)
        else:
            if heads is not None or model_options or adapters is not None:
                raise ConfigError("heads, adapters and model_options go with model=DIR, not "
                                  "members")
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
        self.min_members = self.k if min_members is None else int(min_members)
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
        elif self.normalize:
            warnings.warn(RUNNING_STATS_WARNING, EnsembleNormalisationWarning, stacklevel=2)

    # -- members ----------------------------------------------------------------------------
    @property
    def multihead(self) -> Any:
        """The one model whose K outputs are the members (K heads, or one base with K LoRA
        adapters), else None."""
        return self.shared

    def member_scores(self, samples: list[Sample]) -> list[list[Score]]:
        """One list of Scores per member (``[member][sample]``)."""
        if self.shared is None:
            return [m.score(samples) for m in self.members]
        joint = self.shared.score(samples)
        out: list[list[Score]] = [[] for _ in range(self.k)]
        for s in joint:
            for j, head in enumerate(self.shared.head_names):
                value = s.components.get(head)
                if value is None or not math.isfinite(value):
                    out[j].append(s if not s.ok else Score.from_error(
                        f"head {head} returned {value}", self.error_value, kind="nan"))
                else:
                    out[j].append(Score(value))
        return out

    def _fit_reference(self, reference: Any) -> None:
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
        info: dict[str, Any] = {"members_used": len(components), "members_total": self.k}
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
        if self.shared is not None:
            self.shared.close()


def _build_member(spec: Any, i: int) -> Scorer:
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


# -- trained ensembles: model=DIR ---------------------------------------------------------------

def _manifest(model: str) -> dict[str, Any]:
    """``DIR/rewardkit.json`` of a local folder (``{}`` for a hub id or a folder without it)."""
    path = Path(model) / SIDECAR
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{str(path)!r} could not be read as JSON ({exc}); expected the "
                             "manifest of a trained ensemble or a K-head model's sidecar") \
            from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"{str(path)!r} must hold a JSON object, got "
                             f"{type(data).__name__}")
    return data


def _paths(manifest: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = manifest.get(key)
    if not isinstance(value, list) or not value or not all(
            isinstance(v, str) and v for v in value):
        raise ModelLoadError(f"{where}: `{key}` must be a non-empty list of paths relative to "
                             f"the manifest's folder, got {value!r}")
    return value


def load_trained(model: str, adapters: Sequence[str] | None, heads: int | None,
                 model_options: Mapping[str, Any] | None) -> tuple[Any, list[Scorer], list[str]]:
    """``(shared scorer or None, member Scorers, member names)`` of ``model=DIR`` (see the
    module docstring)."""
    options = dict(model_options or {})
    root = Path(str(model))
    where = f"{str(root / SIDECAR)!r}"
    members: list[Scorer] = []
    shared: Any = None
    if adapters is not None:
        if isinstance(adapters, (str, Path)) or not adapters:
            raise ConfigError("adapters must be a non-empty list of LoRA adapter folders")
        shared = _construct("lora", model=str(model), adapters=[str(a) for a in adapters],
                            **options)
        names = list(shared.head_names)
    else:
        manifest = _manifest(str(model))
        kind = manifest.get("kind")
        if kind == "rm_ensemble":
            form = manifest.get("form")
            rel = _paths(manifest, "members", where)
            member_dirs = [str(root / p) for p in rel]
            names = manifest.get("names") or [f"member_{i}" for i in range(len(rel))]
            if not isinstance(names, list) or len(names) != len(rel):
                raise ModelLoadError(f"{where}: `names` must list one name per member "
                                     f"({len(rel)}), got {names!r}")
            names = [str(n) for n in names]
            if form == "models":
                for i, d in enumerate(member_dirs):
                    if not Path(d).is_dir():
                        raise ModelLoadError(
                            f"{where}: members[{i}] {rel[i]!r} → {d!r} does not exist; expected "
                            "a reward model folder (config.json, weights, tokenizer) written by "
                            "`rewardkit train rm`")
                members = [_construct("models", model=d, name=n, **options)
                           for d, n in zip(member_dirs, names)]
            elif form == "lora":
                base = manifest.get("base")
                if not isinstance(base, str) or not base:
                    raise ModelLoadError(f"{where}: form 'lora' needs `base`, the base model "
                                         f"(path or hub id) the adapters were trained on; got "
                                         f"{base!r}")
                if not Path(base).is_absolute() and (root / base).exists():
                    base = str(root / base)
                adapter_rel = _paths(manifest, "adapters", where)
                if len(adapter_rel) != len(rel):
                    raise ModelLoadError(f"{where}: {len(adapter_rel)} adapters for "
                                         f"{len(rel)} members; give one adapter per member")

                dirs = [str(check_adapter_dir(root / a, f"{where}: adapters[{i}] {a!r}"))
                        for i, a in enumerate(adapter_rel)]
                existing = [d for d in member_dirs if Path(d).is_dir()]
                shared = _construct("lora", model=base, adapters=dirs, names=names,
                                    sidecar=manifest_sidecar(existing), **options)
            else:
                raise ModelLoadError(f"{where}: `form` must be 'models' (K reward models) or "
                                     f"'lora' (one base and K adapters), got {form!r}")
        else:  # rm_heads, or any single classifier: its heads are the members

            shared = MultiHeadRewardScorer(str(model), heads=heads, **options)
            names = list(shared.head_names)
    if heads is not None and heads != len(names):
        raise ModelLoadError(f"{str(model)!r} has {len(names)} members, not heads={heads}; "
                             "leave `heads` out to read every member")
    return shared, members, names


def _construct(form: str, **kwargs: Any) -> Any:
    """A member model, with an unknown model option turned into a ConfigError."""
    cls = LoraMembersScorer if form == "lora" else RewardModelScorer
    try:
        inspect.signature(cls).bind(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"model_options: {exc}; accepted: {accepted_options(cls)}") from exc
    return cls(**kwargs)
