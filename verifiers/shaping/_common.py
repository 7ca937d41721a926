"""Helpers shared by the shaping rewards: optional imports that name their extra, lengths,
references as lists of strings, the correctness reward."""
from __future__ import annotations

from typing import Any, Mapping

from rewardkit.extras import require
from rewardkit.registry import load
from rewardkit.scorer import RewardInputError, Scorer, require_reference
from rewardkit.types import Sample

__all__ = ["UNITS", "Length", "correctness_scorer", "references", "require"]

UNITS = ("chars", "words", "tokens")


def references(sample: Sample, reward: str) -> list[str]:
    """The reference as a non-empty list of strings (a string or a list of strings)."""
    if sample.reference is None:
        raise RewardInputError(f"reward {reward!r} needs a reference text (or a list of them)")
    ref = require_reference(sample, reward)  # NaN is no reference either
    refs = [ref] if isinstance(ref, (str, int, float)) else ref
    if not isinstance(refs, (list, tuple)) or not refs or not all(
            isinstance(r, (str, int, float)) and not isinstance(r, bool) for r in refs):
        raise RewardInputError(
            f"reward {reward!r} needs a string reference or a list of strings, got "
            f"{type(ref).__name__}")
    return [str(r) for r in refs]


class Length:
    """Length of a completion in ``chars``, ``words`` or ``tokens``.

    Tokens come from ``metadata["completion_tokens"]`` when the caller knows them (a trainer
    does), else from the tokenizer at ``tokenizer`` (a path or name, loaded once)."""

    def __init__(self, unit: str, tokenizer: str | None, reward: str) -> None:
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
        self.unit, self.reward = unit, reward
        self._tokenizer_name = tokenizer
        self._tokenizer: Any = None

    def __call__(self, sample: Sample) -> int:
        text = sample.completion_text
        if self.unit == "chars":
            return len(text)
        if self.unit == "words":
            return len(text.split())
        meta: Mapping[str, Any] = sample.metadata or {}
        if isinstance(meta.get("completion_tokens"), int):
            return int(meta["completion_tokens"])
        if self._tokenizer_name is None:
            raise RewardInputError(
                f"reward {self.reward!r} counts tokens: pass the `tokenizer` option (a path or "
                "name), give metadata['completion_tokens'], or use unit='chars'/'words'")
        if self._tokenizer is None:
            transformers = require("transformers", "train", self.reward)
            self._tokenizer = transformers.AutoTokenizer.from_pretrained(self._tokenizer_name)
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])


def correctness_scorer(reward: str | Mapping[str, Any] | Scorer,
                       options: Mapping[str, Any] | None) -> Scorer:
    """The reward that says whether an answer is right (``math`` by default)."""
    if isinstance(reward, Scorer):
        return reward
    return load(reward, **dict(options or {}))
