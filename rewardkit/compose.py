"""Composition: rewards combined as data, and itself a Scorer.

A composition is described by a mapping (written in YAML, TOML or JSON):

.. code-block:: yaml

    rewards:                      # component name -> spec
      correctness: {reward: math, weight: 1.0, options: {final_form: true}}
      format:      {reward: regex, weight: 0.1, options: {pattern: '\\\\boxed\\{'}}
    gates:                        # a component that must pass, or the total is `penalty`
      - {component: format, min: 1.0, penalty: -1.0}
    clip: [-1.0, 2.0]             # clip the total
    normalize: group              # none | batch | group | running, or {method, scale, eps}
    error_value: 0.0              # value of a sample that could not be scored

A component may carry ``shape: {method: par | center | none, reference_field, clip,
temperature}``: its reward is then read against a reference completion's reward (PAR, centring)
and clipped before weighting (:mod:`rewardkit.models.learned_shaping`).

The total is computed in this order: weighted sum of components → gates → clip → normalise.
Each component's value goes into ``Score.components`` and its ``info`` under ``info[name]``.
A component's ``reward`` may itself be a composition (a nested mapping).

A config *file* may hold other sections beside the reward (``train:``, ``serve:``): the reward is
then its ``reward:`` section. The same file drives ``rewardkit score``, ``serve`` and ``train``.
"""
from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .normalize import Normalizer
from .registry import install_config_loaders, load, program_choice
from .scorer import Scorer
from .types import Sample, Score


class ConfigError(ValueError):
    """A reward config is malformed; the message says where and what to write instead."""


class ConfigWarning(UserWarning):
    """A reward config holds something that is probably not what its author meant."""


_SECTION_KEYS = {"rewards", "gates", "clip", "normalize", "error_value", "name", "reward",
                 "options", "weight"}
_COMPONENT_KEYS = {"reward", "weight", "options", "shape"}
_GATE_KEYS = {"component", "min", "penalty"}


@dataclass(frozen=True)
class Gate:
    """``component`` must score at least ``min`` (and without error), else the total is
    ``penalty``."""

    component: str
    min: float = 1.0
    penalty: float = 0.0


@dataclass
class Component:
    name: str
    scorer: Scorer
    weight: float = 1.0


class Composition(Scorer):
    """Weighted sum of named rewards with gates, clipping and normalisation."""

    def __init__(self, components: Sequence[Component], gates: Sequence[Gate] = (),
                 clip: tuple[float, float] | None = None, normalize: Normalizer | None = None,
                 error_value: float = 0.0, name: str = "composition") -> None:
        if not components:
            raise ConfigError("a composition needs at least one reward under `rewards`")
        names = [c.name for c in components]
        for g in gates:
            if g.component not in names:
                raise ConfigError(
                    f"gate on {g.component!r}, which is not a component; components: {names}"
                )
        if clip is not None and clip[0] > clip[1]:
            raise ConfigError(f"clip must be [low, high] with low <= high, got {list(clip)}")
        self.components = list(components)
        self.gates = list(gates)
        self.clip = clip
        self.normalizer = normalize or Normalizer("none")
        self.error_value = error_value
        self.name = name

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        per_component = [c.scorer.score(samples) for c in self.components]
        out: list[Score] = []
        for i in range(len(samples)):
            out.append(self._combine([scores[i] for scores in per_component]))
        if self.normalizer.method == "none":
            return out
        # The raw total stays beside the normalised one: a normalised value alone hides what
        # the policy earned (a group of one normalises to 0.0 whatever it scored).
        for s in out:
            s.info["raw_total"] = s.value
        ok = [i for i, s in enumerate(out) if s.ok]
        normalized = self.normalizer([out[i].value for i in ok], [samples[i] for i in ok])
        for i, v in zip(ok, normalized):
            out[i].value = v
        return out

    def _combine(self, scores: list[Score]) -> Score:
        components: dict[str, float] = {}
        info: dict[str, Any] = {}
        errors: list[str] = []
        error_kind = None
        total = 0.0
        unc_sq = 0.0
        has_unc = False
        steps = None
        for comp, s in zip(self.components, scores):
            components[comp.name] = s.value
            for sub, v in s.components.items():
                components[f"{comp.name}.{sub}"] = v
            if s.info:
                info[comp.name] = s.info
            if not s.ok:
                errors.append(f"{comp.name}: {s.info['error']}")
                error_kind = error_kind or s.info.get("error_kind", "error")
            total += comp.weight * s.value
            if s.uncertainty is not None:
                has_unc = True
                unc_sq += (comp.weight * s.uncertainty) ** 2
            if s.steps is not None and len(self.components) == 1:
                steps = s.steps
        uncertainty = math.sqrt(unc_sq) if has_unc else None
        if errors:
            info["error"] = "; ".join(errors)
            info["error_kind"] = error_kind
            return Score(self.error_value, components, steps, uncertainty, info)
        for g in self.gates:
            if components[g.component] < g.min:
                total = g.penalty
                info["gate_failed"] = g.component
                break
        if self.clip is not None:
            total = min(max(total, self.clip[0]), self.clip[1])
        return Score(total, components, steps, uncertainty, info)

    def close(self) -> None:
        for c in self.components:
            c.scorer.close()


def _as_float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    return float(value)


def did_you_mean(unknown: Iterable[Any], known: Iterable[str]) -> str:
    """`` (did you mean 'weight'?)`` for mistyped keys that are close to a known one, else
    an empty string."""
    known = sorted(known)
    pairs = [(str(k), close[0]) for k in sorted(unknown, key=str)
             if (close := difflib.get_close_matches(str(k), known, n=1))]
    if not pairs:
        return ""
    if len(pairs) == 1:
        return f" (did you mean {pairs[0][1]!r}?)"
    return " (did you mean " + ", ".join(f"{m!r} for {k!r}" for k, m in pairs) + "?)"


def check_keys(spec: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """Refuse keys of ``spec`` outside ``allowed``, suggesting the closest allowed ones."""
    allowed = set(allowed)
    unknown = set(spec) - allowed
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown, key=str)}"
                          f"{did_you_mean(unknown, allowed)}; allowed: {sorted(allowed)}")


SHAPER = "rewardkit.models.learned_shaping:shape_component"
"""The factory a component's ``shape:`` mapping goes to, loaded by import path like any reward
(so the core names the models room without importing it)."""


def _component(name: str, spec: Any, where: str) -> Component:
    if isinstance(spec, str):
        spec = {"reward": spec}
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where} must be a reward name or a mapping with `reward`, got {spec!r}")
    check_keys(spec, _COMPONENT_KEYS, where)
    if "reward" not in spec:
        raise ConfigError(f"{where} needs `reward:` (a reward name, or a nested composition)")
    options = spec.get("options") or {}
    if not isinstance(options, Mapping):
        raise ConfigError(f"{where}.options must be a mapping, got {options!r}")
    reward = spec["reward"]
    try:
        scorer = from_config(dict(reward), **options) if isinstance(reward, Mapping) else load(
            str(reward), **options)
    except (ConfigError, KeyError, TypeError, ValueError, ImportError) as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    if spec.get("shape") is not None:  # PAR / centring / clipping of a learned reward
        with program_choice():  # the wrapper is the code's own choice; `shape` is plain data
            scorer = load(SHAPER, scorer=scorer, shape=spec["shape"], where=where)
    return Component(name, scorer, _as_float(spec.get("weight", 1.0), f"{where}.weight"))


def warn_misplaced_keys(config: Mapping[str, Any], where: str = "reward config") -> None:
    """Warn about reward keys (``normalize:``, ``clip:``, ...) written beside a ``reward:``
    section instead of inside it: they would be silently ignored, and a ``normalize: group``
    that never applies changes every reward of a run."""
    if "rewards" in config or not isinstance(config.get("reward"), Mapping):
        return
    misplaced = sorted(set(config) & (_SECTION_KEYS - {"reward", "name"}))
    if misplaced:
        import warnings

        keys = ", ".join(f"`{k}:`" for k in misplaced)
        warnings.warn(
            f"{where}: {keys} at the top level, beside `reward:`, is ignored; it belongs inside "
            "the `reward:` section (indent it under `reward:`)", ConfigWarning, stacklevel=3)


def from_config(config: Mapping[str, Any], **overrides: Any) -> Scorer:
    """A Scorer from a reward config mapping (see the module docstring)."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"a reward config must be a mapping, got {type(config).__name__}")
    if "rewards" not in config and isinstance(config.get("reward"), Mapping):
        warn_misplaced_keys(config)
        config = config["reward"]  # a whole config file: use its reward section
    config = {**config, **overrides}
    check_keys(config, _SECTION_KEYS, "reward config")
    if "rewards" not in config:
        if "reward" not in config:
            raise ConfigError(
                "a reward config needs `rewards:` (a composition) or `reward:` (one reward name)"
            )
        name = str(config["reward"])
        extra = set(config) - {"reward", "options", "name"}
        if not extra:
            return load(name, **(config.get("options") or {}))
        config = {**{k: config[k] for k in extra},
                  "rewards": {config.get("name", name): {
                      "reward": name, "options": config.get("options") or {}}}}
    rewards = config["rewards"]
    if isinstance(rewards, Mapping):
        items = list(rewards.items())
    elif isinstance(rewards, list):
        items = []
        for i, spec in enumerate(rewards):
            if not isinstance(spec, Mapping) or "name" not in spec and "reward" not in spec:
                raise ConfigError(f"rewards[{i}] must be a mapping with `reward` (and `name`)")
            spec = dict(spec)
            items.append((str(spec.pop("name", spec.get("reward"))), spec))
    else:
        raise ConfigError("`rewards` must map component names to specs (or be a list of specs)")
    components = [_component(str(n), s, f"rewards.{n}") for n, s in items]
    gates = []
    for i, g in enumerate(config.get("gates") or []):
        if isinstance(g, Mapping):
            check_keys(g, _GATE_KEYS, f"gates[{i}]")
        if not isinstance(g, Mapping) or "component" not in g:
            raise ConfigError(f"gates[{i}] must be a mapping with `component`, `min`, `penalty`")
        gates.append(Gate(str(g["component"]), _as_float(g.get("min", 1.0), f"gates[{i}].min"),
                          _as_float(g.get("penalty", 0.0), f"gates[{i}].penalty")))
    clip = config.get("clip")
    if clip is not None:
        if not isinstance(clip, (list, tuple)) or len(clip) != 2:
            raise ConfigError(f"clip must be [low, high], got {clip!r}")
        clip = (_as_float(clip[0], "clip[0]"), _as_float(clip[1], "clip[1]"))
    norm = config.get("normalize", "none")
    if isinstance(norm, str):
        norm = {"method": norm}
    if not isinstance(norm, Mapping):
        raise ConfigError(f"normalize must be a method name or a mapping, got {norm!r}")
    check_keys(norm, {"method", "scale", "eps"}, "normalize")
    try:
        normalizer = Normalizer(**norm)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return Composition(components, gates, clip, normalizer,
                       _as_float(config.get("error_value", 0.0), "error_value"),
                       str(config.get("name", "composition")))


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a YAML, TOML or JSON config file into a dict, with errors that name the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            import yaml

            with open(path, encoding="utf-8") as f:  # a stream, so YAML's marks name the file
                data = yaml.safe_load(f)
        elif suffix == ".toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                import tomli as tomllib
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(f"config file {str(path)!r}: use .yaml, .yml, .toml or .json")
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - every parser has its own error class
        raise ConfigError(f"config file {str(path)!r} could not be parsed: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at the top level")
    return data


def from_config_file(path: Path, **overrides: Any) -> Scorer:
    """A Scorer from a config file (its ``reward:`` section, or the whole file).

    A composition without a ``name:`` is named after the file (``math_and_format.yaml`` →
    ``math_and_format``), so trainers log each file's reward under its own name."""
    data = read_config_file(path)
    warn_misplaced_keys(data, str(path))
    section = data["reward"] if "rewards" not in data and isinstance(
        data.get("reward"), Mapping) else data
    try:
        scorer = from_config(section, **overrides)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    if isinstance(scorer, Composition) and "name" not in section:
        scorer.name = Path(path).stem
    return scorer


install_config_loaders(from_config, from_config_file)
