"""rewardkit rewards as verl's custom reward function.

verl scores a rollout by calling a user function named in its config::

    custom_reward_function:
      path: <this file>          # python -c "import rewardkit.integrations.verl as m; print(m.__file__)"
      name: compute_score        # or compute_score_batch with reward_model.reward_manager=batch

with ``compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)``, where
``ground_truth`` is the row's ``reward_model.ground_truth`` and ``extra_info`` its ``extra_info``
column. The function may return a float or a dict whose ``"score"`` is the reward; verl logs
every other key of the dict as a per-sample metric.

Which reward scores a row is decided, first match wins, by:

1. ``extra_info["reward"]``: a reward name (options in ``extra_info["reward_options"]``) or a
   config mapping, for datasets that mix tasks. A row is data, not code: it may name registered
   rewards only, and never an import path, a config file or an option that loads models or
   code (:func:`rewardkit.registry.load_untrusted`); such a row raises
   :class:`~rewardkit.registry.UntrustedRewardError` before anything it names is imported;
2. a reward config file (YAML/TOML/JSON) named by ``custom_reward_function.reward_kwargs``
   ``reward_config`` in verl's config, else by the environment variable ``REWARDKIT_VERL_CONFIG``:
   its ``data_sources:`` section maps data-source patterns to reward specs, and its reward (a
   ``reward:``/``rewards:`` section, as for ``rewardkit score --config``) scores every other row;
3. :data:`DATA_SOURCE_REWARDS`, the built-in mapping of well-known data sources.

A row matched by none of them is a configuration error, raised with the mapping, as verl itself
does for unknown data sources. Scorers are built once per process and reused.

Imports here are absolute on purpose: verl loads this file by its path as a stand-alone module,
where relative imports fail.
"""
from __future__ import annotations

import fnmatch
import json
import os
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

from rewardkit.compose import ConfigError, from_config, read_config_file, warn_misplaced_keys
from rewardkit.registry import load_untrusted
from rewardkit.scorer import Scorer
from rewardkit.types import Score

CONFIG_ENV = "REWARDKIT_VERL_CONFIG"
"""Environment variable naming a reward config file that overrides the built-in mapping."""

RewardSpec = Mapping[str, Any]

DATA_SOURCE_REWARDS: tuple[tuple[str, RewardSpec], ...] = (
    ("openai/gsm8k", {"reward": "math", "options": {"preset": "gsm8k"}}),
    ("gsm8k", {"reward": "math", "options": {"preset": "gsm8k"}}),
    ("lighteval/math", {"reward": "math"}),
    ("digitallearninggmbh/math-lighteval", {"reward": "math"}),
    ("huggingfaceh4/math-500", {"reward": "math"}),
    ("math_dapo", {"reward": "math"}),
    ("aime*", {"reward": "math"}),
    ("numina_*", {"reward": "math"}),
    ("*math*", {"reward": "math"}),
    ("codecontests", {"reward": "code"}),
    ("deepmind/code_contests", {"reward": "code"}),
    ("apps", {"reward": "code"}),
    ("codeparrot/apps", {"reward": "code"}),
    ("taco", {"reward": "code"}),
    ("*/taco*", {"reward": "code"}),
    ("codeforces", {"reward": "code"}),
    ("*humaneval*", {"reward": "code"}),
    ("*mbpp*", {"reward": "code"}),
)
"""Built-in data source → reward mapping, checked in order. Patterns are shell-style
(``fnmatch``) and matched against the lower-cased ``data_source``. The names follow verl's own
preprocessing scripts (``openai/gsm8k``, ``lighteval/MATH``, ``DigitalLearningGmbH/MATH-lighteval``,
``math_dapo``, ``aime*``, ``numina_*``, ``codecontests``, ``apps``, ``taco``, ``codeforces``)."""

RESERVED_KEYS = ("score", "error", "raw_total", "extra_info")
"""Keys of the returned dict that are not components; a component with one of these names is
reported as ``<name>_component``."""

_scorers: dict[str, Scorer] = {}
_file_configs: dict[str, dict[str, Any]] = {}
_lock = threading.Lock()


class UnmappedDataSourceError(ValueError):
    """No reward is configured for a data source; the message lists the mapping and the fixes."""


def compute_score(data_source: str, solution_str: str, ground_truth: Any,
                  extra_info: Mapping[str, Any] | None = None, reward_config: str | None = None,
                  components: bool = True, **verl_kwargs: Any) -> dict[str, Any]:
    """Score one verl rollout with the rewardkit reward chosen for its data source.

    This is the function for verl's per-sample reward managers: the reward loop
    (``reward_model.use_reward_loop=true``, verl's current default) and the legacy ``naive``
    manager. Both call it with keyword arguments, one row at a time.

    Args:
        data_source: the row's ``data_source`` (picks the reward, see the module docstring).
        solution_str: the decoded response.
        ground_truth: the row's ``reward_model.ground_truth``, passed as the Sample's reference.
        extra_info: the row's ``extra_info``; may choose the reward (``"reward"``,
            ``"reward_options"``); ``"question"`` or ``"prompt"``, if present, becomes the
            Sample's prompt; the whole mapping and the data source go into ``metadata``.
        reward_config: path of a reward config file; verl passes it from
            ``custom_reward_function.reward_kwargs.reward_config``. It reaches every worker, which
            an environment variable set on the driver may not. Overrides ``REWARDKIT_VERL_CONFIG``.
        components: report each component of a composition as its own key (default). verl's
            reward loop takes the keys of a batch's *first* row for every row, so a dataset whose
            rows use compositions with different component names needs ``components=False``
            (``reward_kwargs.components=false``): then only ``score``, ``error`` (and
            ``raw_total``) are returned.
        **verl_kwargs: extras some verl versions pass (``reward_router_address``,
            ``reward_model_tokenizer``, ``sandbox_fusion_url``, semaphores); accepted and not used.

    Returns:
        ``{"score": value, <component>: value, ..., "error": message}``. ``"score"`` is the
        reward verl trains on; each component of a composition is a float verl logs as a metric.
        ``"error"`` is always present, the empty string when the sample was scored, because verl
        collects every key of every sample into per-key lists that must all be the batch's length.
        A sample that could not be scored gets the reward's ``error_value`` (default 0.0).
    """
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info],
                               reward_config=reward_config, components=components)[0]


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str],
                        ground_truths: Sequence[Any],
                        extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
                        reward_config: str | None = None, components: bool = True,
                        **verl_kwargs: Any) -> list[dict[str, Any]]:
    """Score a whole verl batch; for ``reward_model.reward_manager=batch`` (with
    ``reward_model.use_reward_loop=false``), which calls it with the keyword arguments
    ``data_sources``, ``solution_strs``, ``ground_truths``, ``extra_infos``.

    Rows are grouped by the reward that scores them and each group is scored in one
    ``Scorer.score`` call, so rewards that batch (process pools, models) see the whole batch.
    Arguments and the returned dicts are as in :func:`compute_score`, one per row, in order.
    Every row's dict has the same keys (verl stacks each key into one array per batch): a
    component that a row's reward does not have is NaN in that row ("not applicable", left out
    by NaN-aware means), never a made-up 0.0.
    """
    n = len(data_sources)
    infos = list(extra_infos) if extra_infos is not None else [None] * n
    if not (len(solution_strs) == len(ground_truths) == len(infos) == n):
        raise ValueError(
            f"verl passed {n} data sources, {len(solution_strs)} solutions, "
            f"{len(ground_truths)} ground truths and {len(infos)} extra_infos; they must align"
        )
    groups: dict[str, list[int]] = {}
    scorers: dict[str, Scorer] = {}
    for i in range(n):
        spec = reward_spec(data_sources[i], infos[i], reward_config)
        from_row = _row_chooses(infos[i])
        key = ("row " if from_row else "") + _spec_key(spec)
        if key not in scorers:
            scorers[key] = _scorer(key, spec, from_row)
        groups.setdefault(key, []).append(i)
    results: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, rows in groups.items():
        samples = [_sample(data_sources[i], solution_strs[i], ground_truths[i], infos[i])
                   for i in rows]
        for i, score in zip(rows, scorers[key].score(samples)):
            results[i] = to_verl_result(score, components)
    return _same_keys(results)


def _same_keys(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every dict with the union of all keys, in one order; a missing metric is NaN."""
    keys: dict[str, None] = {}
    for r in results:
        keys.update(dict.fromkeys(r))
    if all(len(r) == len(keys) for r in results):
        return results
    order = ["score", *(k for k in keys if k not in ("score", "error")), "error"]
    return [{k: r.get(k, "" if k == "error" else float("nan")) for k in order} for r in results]


def reward_spec(data_source: str, extra_info: Mapping[str, Any] | None = None,
                reward_config: str | None = None) -> dict[str, Any]:
    """The reward spec (``{"reward": name, "options": {...}}`` or a composition config) that
    scores a row, following the order in the module docstring."""
    if _row_chooses(extra_info):
        chosen = extra_info["reward"]
        if isinstance(chosen, str):
            options = extra_info.get("reward_options") or {}
            if not isinstance(options, Mapping):
                raise ValueError(
                    f"extra_info['reward_options'] must be a mapping of options, got "
                    f"{type(options).__name__}"
                )
            return {"reward": chosen, "options": _without_nulls(_plain(options))}
        if isinstance(chosen, Mapping):
            return _without_nulls(_plain(chosen))
        raise ValueError(
            f"extra_info['reward'] must be a reward name or a config mapping, got "
            f"{type(chosen).__name__}"
        )
    source = str(data_source)
    config = _config_file(reward_config or os.environ.get(CONFIG_ENV))
    for pattern, spec in config.get("data_sources", {}).items():
        if fnmatch.fnmatchcase(source.lower(), str(pattern).lower()):
            return _as_spec(spec, f"{config['path']}: data_sources.{pattern}")
    if config.get("reward") is not None:
        return dict(config["reward"])
    for pattern, spec in DATA_SOURCE_REWARDS:
        if fnmatch.fnmatchcase(source.lower(), pattern):
            return dict(spec)
    raise UnmappedDataSourceError(_unmapped_message(source))


def to_verl_result(score: Score, components: bool = True) -> dict[str, Any]:
    """A Score as verl's result dict: ``score``, one float per component, ``raw_total`` (the
    total before normalisation, for normalised compositions), ``error``."""
    out: dict[str, Any] = {"score": float(score.value)}
    if components:
        for name, value in score.components.items():
            out[f"{name}_component" if name in RESERVED_KEYS else name] = float(value)
    if "raw_total" in score.info:
        out["raw_total"] = float(score.info["raw_total"])
    out["error"] = score.error or ""
    return out


def clear_cache() -> None:
    """Forget the scorers and the config file read so far (closing the scorers); the next call
    builds them again, e.g. after ``REWARDKIT_VERL_CONFIG`` changed."""
    with _lock:
        for scorer in _scorers.values():
            scorer.close()
        _scorers.clear()
        _file_configs.clear()


def _sample(data_source: str, solution: str, ground_truth: Any,
            extra_info: Mapping[str, Any] | None) -> dict[str, Any]:
    info = dict(extra_info) if isinstance(extra_info, Mapping) else {}
    prompt = info.get("question", info.get("prompt", ""))
    if not isinstance(prompt, str):
        prompt = ""
    metadata = {**info, "data_source": data_source}
    # A dict, not a Sample: Scorer.score validates it and turns a bad row (e.g. a solution that
    # is not text) into an error Score instead of an exception.
    return {"prompt": prompt, "completion": solution, "reference": _plain(ground_truth),
            "metadata": metadata}


def _plain(value: Any) -> Any:
    """Numpy scalars and arrays (parquet columns arrive as such) as plain Python values."""
    if hasattr(value, "tolist") and callable(value.tolist):
        return value.tolist()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _without_nulls(value: Any) -> Any:
    """A mapping without None-valued keys, recursively. Parquet stores ``extra_info`` as one
    struct column, so every row gets the union of all rows' keys, with None where a row had
    none: ``{"pattern": None}`` in a math row is "no option", not an option."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _spec_key(spec: Mapping[str, Any]) -> str:
    return json.dumps(_plain(dict(spec)), sort_keys=True, default=str)


def _row_chooses(extra_info: Mapping[str, Any] | None) -> bool:
    """Whether the row itself names its reward (data, loaded as such)."""
    return isinstance(extra_info, Mapping) and extra_info.get("reward") is not None


def _scorer(key: str, spec: Mapping[str, Any], from_row: bool) -> Scorer:
    with _lock:
        scorer = _scorers.get(key)
        if scorer is None:
            scorer = load_untrusted(dict(spec)) if from_row else from_config(dict(spec))
            _scorers[key] = scorer
        return scorer


def _as_spec(spec: Any, where: str) -> dict[str, Any]:
    if isinstance(spec, str):
        return {"reward": spec}
    if isinstance(spec, Mapping):
        return dict(spec)
    raise ValueError(f"{where}: a reward spec is a reward name or a mapping, got {spec!r}")


def _config_file(path: str | None) -> dict[str, Any]:
    """The parsed reward config file: ``data_sources`` (pattern → spec) and ``reward`` (the spec
    for every other row, or None). Read once per process and path."""
    if not path:
        return {}
    with _lock:
        if path in _file_configs:
            return _file_configs[path]
    data = read_config_file(Path(path))  # its errors name the file
    warn_misplaced_keys(data, path)
    sources = data.pop("data_sources", None) or {}
    if not isinstance(sources, Mapping):
        raise ConfigError(
            f"reward config {path}: data_sources must map data-source patterns to rewards, e.g. "
            "data_sources: {'openai/gsm8k': math}"
        )
    for key in ("train", "serve", "score"):
        data.pop(key, None)
    if "rewards" in data:
        reward: dict[str, Any] | None = data
    elif isinstance(data.get("reward"), Mapping):
        reward = dict(data["reward"])
    elif isinstance(data.get("reward"), str):
        reward = {k: v for k, v in data.items() if k in ("reward", "options")}
    else:
        reward = None
    if not sources and reward is None:
        raise ConfigError(
            f"reward config {path}: the file names no reward; give a `reward:`/`rewards:` "
            "section, a `data_sources:` mapping, or both"
        )
    config = {"path": path, "data_sources": dict(sources), "reward": reward}
    with _lock:
        _file_configs[path] = config
    return config


def _describe(spec: Mapping[str, Any]) -> str:
    options = spec.get("options") or {}
    return str(spec["reward"]) + (f" {dict(options)}" if options else "")


def _unmapped_message(source: str) -> str:
    mapping = ", ".join(f"{p} -> {_describe(s)}" for p, s in DATA_SOURCE_REWARDS)
    return (
        f"no rewardkit reward is mapped to data_source {source!r}. Built-in mapping: {mapping}. "
        f"Name the reward per row in extra_info['reward'], or point "
        f"custom_reward_function.reward_kwargs.reward_config (or {CONFIG_ENV}) at a YAML/TOML "
        "file with a `reward:` section (for every row) or a `data_sources:` mapping "
        f"(e.g. data_sources: {{'{source}': exact_match}})."
    )
