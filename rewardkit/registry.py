"""Rewards by name: ``rewardkit.load("math", **options)``, ``rewardkit list``.

Three sources, looked up in this order:
1. rewards registered in this process (:func:`register`, the :func:`reward` decorator);
2. rewardkit's built-ins, imported lazily so ``import rewardkit`` stays cheap;
3. third-party packages, through the entry-point group ``rewardkit.rewards``. An entry point may
   name a Scorer subclass, a factory returning a Scorer, or a plain reward function
   ``f(prompt, completion, reference, **kw) -> float``.

Code that the operator writes may also load an import path ``package.module:attr`` or a config
file. Data may not: a dataset row or a request that picks a reward goes through
:func:`load_untrusted`, which accepts only the names above (and compositions of them) and
refuses import paths, file paths and the options that load models, code or secrets — before
anything they name is imported or called. Datasets are shared and downloaded; they are not code.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import os
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from .scorer import FunctionScorer, Scorer

ENTRY_POINT_GROUP = "rewardkit.rewards"


class UntrustedRewardError(ValueError):
    """Data (a dataset row, a request) named an import path, a file, or an option that only the
    operator may choose; nothing it named was imported or called."""


class UnknownRewardError(KeyError):
    """No reward of that name; the message lists the available ones."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


@dataclass(frozen=True)
class RewardEntry:
    name: str
    description: str
    target: str | Callable[..., Any]  # "module:attr" (lazy) or a factory
    source: str = "builtin"

    def factory(self) -> Callable[..., Any]:
        if callable(self.target):
            return self.target
        module, _, attr = self.target.partition(":")
        try:
            obj = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            raise ImportError(
                f"reward {self.name!r} could not be imported ({exc}); is its extra installed? "
                "See the README's table of rewards."
            ) from exc
        return obj


# name -> (module:attr, one-line description). Kept here so `rewardkit list` needs no imports.
_BUILTINS: dict[str, tuple[str, str]] = {
    "exact_match": ("rewardkit.verifiers.match:ExactMatch",
                    "1.0 if the completion equals the reference after normalisation"),
    "regex": ("rewardkit.verifiers.match:RegexMatch",
              "1.0 if the completion matches a pattern (option `pattern`, or the reference)"),
    "math": ("rewardkit.verifiers.math:MathVerifier",
             "1.0 if the final answer is mathematically equivalent to the reference"),
    "code": ("rewardkit.verifiers.code:CodeVerifier",
             "fraction/all of tests passed by the completion's code, run in a sandbox"),
    "reward_model": ("rewardkit.models.reward_model:RewardModelScorer",
                     "a learned outcome reward model (sequence classifier with one output)"),
    "process_reward": ("rewardkit.models.process_reward:ProcessRewardScorer",
                       "a learned process reward model: one score per reasoning step"),
    "implicit_reward": ("rewardkit.models.implicit_reward:ImplicitRewardScorer",
                        "a causal LM's log-likelihood of the completion (DPO's implicit reward, "
                        "or reference-free); per-step scores too"),
    "ensemble": ("rewardkit.models.ensemble:EnsembleScorer",
                 "several rewards combined (mean, min, uncertainty-weighted); spread as uncertainty"),
    "shaped": ("rewardkit.models.learned_shaping:ShapedReward",
               "a reward read against a reference completion: PAR σ(r − r_ref), centring, clip"),
    "remote": ("rewardkit.integrations.remote:RemoteScorer",
               "a reward served by `rewardkit serve` on another machine, over HTTP"),
    "iou": ("rewardkit.verifiers.iou:IoUReward",
            "boxes in the completion vs gold boxes: matched IoU/GIoU/DIoU/CIoU, hit rate, F1, mAP"),
    "rubric": ("rewardkit.verifiers.rubric:RubricReward",
               "weighted criteria: rules, embedding similarity, LLM judge; gates or one judge call"),
    "think_format": ("rewardkit.verifiers.shaping:ThinkFormat",
                     "1.0 if the completion is <think>...</think><answer>...</answer> (strict/soft)"),
    "tag_count": ("rewardkit.verifiers.shaping:TagCount",
                  "0.25 per reasoning tag that appears exactly once (open-r1's tag count)"),
    "cosine_length": ("rewardkit.verifiers.shaping:CosineLength",
                      "correctness scaled by length on a cosine: short right answers pay most"),
    "overlong": ("rewardkit.verifiers.shaping:OverlongPenalty",
                 "DAPO's soft overlong punishment: linear penalty in the last tokens before the max"),
    "adaptive_length": ("rewardkit.verifiers.shaping:AdaptiveLength",
                        "length shaping toward the group's correct answers' length"),
    "repetition": ("rewardkit.verifiers.shaping:RepetitionPenalty",
                   "n-gram repetition penalty in [max_penalty, 0] (open-r1's form)"),
    "language_consistency": ("rewardkit.verifiers.shaping:LanguageConsistency",
                             "share of the completion's letters in the prompt's script"),
    "json_schema": ("rewardkit.verifiers.shaping:JsonSchemaValid",
                    "1.0 if the completion holds JSON (or a tool call) valid against a schema"),
    "fuzzy_match": ("rewardkit.verifiers.shaping:FuzzyMatch",
                    "fuzzy string similarity to the reference in [0, 1] (rapidfuzz)"),
    "bleu": ("rewardkit.verifiers.shaping:Bleu", "sentence BLEU against the reference(s) in [0, 1]"),
    "chrf": ("rewardkit.verifiers.shaping:ChrF", "sentence chrF against the reference(s) in [0, 1]"),
    "rouge": ("rewardkit.verifiers.shaping:Rouge", "ROUGE F-measure against the reference(s)"),
    "embedding_similarity": ("rewardkit.verifiers.shaping:EmbeddingSimilarity",
                             "cosine of sentence embeddings of completion and reference"),
}

_registered: dict[str, RewardEntry] = {}

ConfigLoader = Callable[..., Scorer]
_config_loaders: dict[str, ConfigLoader] = {}
"""How :func:`load` builds a Scorer from a config mapping (``"mapping"``) or a config file
(``"file"``). :mod:`rewardkit.compose` installs them when imported (``import rewardkit`` does):
compose sits above this module, since a composition loads its components by name from here."""


def install_config_loaders(mapping: ConfigLoader, file: ConfigLoader) -> None:
    """Set the functions :func:`load` hands a config mapping and a config file to."""
    _config_loaders.update(mapping=mapping, file=file)


def _config_loader(kind: str) -> ConfigLoader:
    try:
        return _config_loaders[kind]
    except KeyError:
        raise RuntimeError("no config loader installed: import rewardkit (rewardkit.compose "
                           "installs it)") from None


def _builtin_entries() -> dict[str, RewardEntry]:
    return {n: RewardEntry(n, d, t) for n, (t, d) in _BUILTINS.items()}


def _entry_point_entries() -> dict[str, RewardEntry]:
    out: dict[str, RewardEntry] = {}
    for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
        out[ep.name] = RewardEntry(ep.name, f"(from {ep.value})", ep.value, source="entry point")
    return out


def _all_entries() -> dict[str, RewardEntry]:
    entries = _entry_point_entries()
    entries.update(_builtin_entries())
    entries.update(_registered)
    return entries


def register(name: str | None = None, description: str | None = None,
             override: bool = False) -> Callable[[Any], Any]:
    """Class or factory decorator: make a Scorer loadable by name.

    >>> @register("length")
    ... class Length(Scorer): ...
    """

    def deco(obj: Any) -> Any:
        _add(name or getattr(obj, "name", None) or obj.__name__, obj, description, override)
        return obj

    return deco


def _add(name: str, factory: Callable[..., Any], description: str | None, override: bool) -> None:
    if not override and (name in _registered or name in _BUILTINS):
        raise ValueError(
            f"a reward named {name!r} is already registered; pick another name or pass "
            "override=True"
        )
    doc = description or (inspect.getdoc(factory) or "").strip().splitlines()[:1]
    if isinstance(doc, list):
        doc = doc[0] if doc else ""
    _registered[name] = RewardEntry(name, doc, factory, source="registered")


def reward(name: str | Callable[..., Any] | None = None, *, description: str | None = None,
           raw: bool = False, override: bool = False) -> Any:
    """Decorator: a plain function ``f(prompt, completion, reference, **options) -> float``
    becomes a registered reward, loadable with ``rewardkit.load(name, **options)``.

    The decorated object stays a plain function (callable as before) with a ``.scorer(**options)``
    attribute that builds its Scorer.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        reward_name = name if isinstance(name, str) else fn.__name__

        def factory(**options: Any) -> Scorer:
            return FunctionScorer(fn, name=reward_name, raw=raw, **options)

        factory.__doc__ = fn.__doc__
        _add(reward_name, factory, description, override)
        fn.scorer = factory  # type: ignore[attr-defined]
        return fn

    if callable(name) and not isinstance(name, str):
        return deco(name)
    return deco


def unregister(name: str) -> None:
    _registered.pop(name, None)


def list_rewards() -> dict[str, str]:
    """Every loadable reward name with its one-line description, sorted by name."""
    return {n: e.description for n, e in sorted(_all_entries().items())}


def _unknown(name: str) -> UnknownRewardError:
    names = sorted(_all_entries())
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return UnknownRewardError(
        f"unknown reward {name!r}.{hint} Available: {', '.join(names)}. "
        "(`rewardkit list` describes each; a YAML/TOML path loads a composition.)"
    )


_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def _is_config_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml", ".toml", ".json")) or os.sep in name


OPERATOR_OPTIONS = frozenset({
    "trust_remote_code",                                   # runs a model repository's own code
    "model", "tokenizer", "model_options", "adapters",     # load weights and tokenizers
    "reference", "center_data", "similarity_model",        # load a model or read a data file
    "judge", "url", "token",                               # reach a server, carry a secret
    "sandbox", "isolation", "allow_unenforced", "python_packages",  # widen the code sandbox
})
"""Options a dataset row or a request may not set, at any depth of what it chooses: each loads
code, a model or a file, reaches the network with the operator's credentials, or widens what a
candidate program may do. The operator sets them in the run's config, whose rewards a row may
then pick by data source."""

_untrusted: ContextVar[bool] = ContextVar("rewardkit_untrusted_load", default=False)


def load_untrusted(name_or_config: str | Mapping[str, Any], **options: Any) -> Scorer:
    """A Scorer that data chose (a dataset row's reward, a request's composition): a registered
    name or a composition mapping of registered names, with options.

    An import path, a config file path or an option of :data:`OPERATOR_OPTIONS` — in the spec or
    anywhere in the rewards it loads in turn (composition members, ensemble members, the
    correctness reward of a length shaping) — raises :class:`UntrustedRewardError` before
    anything it names is imported or called.
    """
    if isinstance(name_or_config, (Scorer, Path)) or not isinstance(name_or_config,
                                                                      (str, Mapping)):
        raise UntrustedRewardError(
            f"a reward chosen by data must be a reward name or a composition mapping, got "
            f"{type(name_or_config).__name__}")
    token = _untrusted.set(True)
    try:
        return load(name_or_config, **options)
    finally:
        _untrusted.reset(token)


@contextmanager
def program_choice() -> Iterator[None]:
    """Load as the program itself, inside :func:`load_untrusted`: for a target the code names
    (a composition's shaping wrapper), never for one that came with the data."""
    token = _untrusted.set(False)
    try:
        yield
    finally:
        _untrusted.reset(token)


def _check_untrusted(name_or_config: Any, options: Mapping[str, Any]) -> None:
    if not _untrusted.get():
        return
    refused = sorted(set(options) & OPERATOR_OPTIONS)
    if refused:
        raise UntrustedRewardError(
            f"option(s) {refused} cannot come from data (a dataset row or a request): they load "
            "models, code or files, reach the network or widen the sandbox. Set them in the "
            "run's reward config, and let rows pick that reward by data source")
    if isinstance(name_or_config, Path) or (
            isinstance(name_or_config, str) and name_or_config not in _all_entries()
            and (_is_config_path(name_or_config) or _IMPORT_PATH.match(name_or_config))):
        kind = "a file path" if is_config_path(name_or_config) else "an import path"
        raise UntrustedRewardError(
            f"reward {str(name_or_config)!r} chosen by data is {kind}; data (a dataset row or a "
            "request) may only name registered rewards (`rewardkit list`) or compose them. "
            "Import paths and config files belong in the run's own config")


def load(name_or_config: str | Path | Mapping[str, Any] | Scorer, **options: Any) -> Scorer:
    """A Scorer from a registered name, an import path ``package.module:attr`` (a Scorer class,
    a factory, or a reward function), a composition config (a dict, or a YAML/TOML/JSON file),
    or a Scorer (returned as is). For a reward that data chose, use :func:`load_untrusted`.

    Options are passed to the reward's constructor; unknown options raise a TypeError that names
    the accepted ones.
    """
    if isinstance(name_or_config, Scorer):
        if options:
            raise TypeError("options cannot be applied to an already built Scorer")
        return name_or_config
    _check_untrusted(name_or_config if not isinstance(name_or_config, Mapping) else None,
                     options)
    if isinstance(name_or_config, Mapping):
        return _config_loader("mapping")(dict(name_or_config), **options)
    if isinstance(name_or_config, Path) or _is_config_path(str(name_or_config)):
        return _config_loader("file")(Path(name_or_config), **options)
    name = str(name_or_config)
    return build(resolve(name).factory(), name, options)


def resolve(name: str) -> RewardEntry:
    """The entry of a reward name or import path, without building the reward: an unknown
    name raises :class:`UnknownRewardError` naming the closest ones, before any slow start."""
    entry = _all_entries().get(name)
    if entry is None and _IMPORT_PATH.match(name):
        _check_untrusted(name, {})
        entry = RewardEntry(name, "", name, source="import path")
    if entry is None:
        raise _unknown(name)
    return entry


def is_config_path(name: str | Path) -> bool:
    """Whether :func:`load` reads ``name`` as a config file rather than a reward name."""
    return isinstance(name, Path) or _is_config_path(str(name))


def build(factory: Any, name: str, options: dict[str, Any]) -> Scorer:
    """Call a reward factory with options, turning a bad option into a clear error. A target
    that cannot be a reward (a class that is not a Scorer, a builtin, a module attribute that is
    not callable) is refused before it is called."""
    _check_factory(factory, name)
    if not _is_plain_reward_fn(factory):
        try:
            inspect.signature(factory).bind(**options)
        except TypeError as exc:
            raise TypeError(
                f"reward {name!r}: {exc}. Accepted options: {accepted_options(factory) or 'none'}"
            ) from None
        except ValueError:  # no signature (a builtin): let the call decide
            pass
        scorer = factory(**options)
    else:  # a plain reward function from an entry point or import path
        scorer = FunctionScorer(factory, name=name, **options)
    if not isinstance(scorer, Scorer):
        raise TypeError(f"reward {name!r}: factory returned {type(scorer).__name__}, not a Scorer")
    if getattr(scorer, "name", Scorer.name) == Scorer.name:
        scorer.name = name
    return scorer


def _check_factory(factory: Any, name: str) -> None:
    if isinstance(factory, type):
        ok = issubclass(factory, Scorer)
    else:
        ok = inspect.isfunction(factory) or inspect.ismethod(factory) or (
            callable(factory) and not inspect.isbuiltin(factory)
            and not inspect.isroutine(factory) and not inspect.ismodule(factory))
    if not ok:
        raise TypeError(
            f"reward {name!r} names {factory!r}, which is not a reward: give a Scorer subclass, "
            "a factory function returning a Scorer, or a reward function "
            "f(prompt, completion, reference, **options) -> float")


def _is_plain_reward_fn(obj: Any) -> bool:
    if not inspect.isfunction(obj):
        return False
    params = list(inspect.signature(obj).parameters)
    return params[:3] == ["prompt", "completion", "reference"]


def accepted_options(factory: Any) -> str:
    """The keyword options a reward factory (a Scorer class or a function) takes, comma
    separated, for error messages."""
    try:
        target = factory.__init__ if isinstance(factory, type) else factory
        params = [p for p in inspect.signature(target).parameters.values()
                  if p.name not in ("self",) and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        return ""
    return ", ".join(p.name for p in params)
