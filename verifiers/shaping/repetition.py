"""Degeneration penalties: repeated n-grams, and answering in another script than the prompt."""
from __future__ import annotations

import unicodedata
from collections import Counter
from typing import Any

from rewardkit.scorer import Scorer
from rewardkit.types import Sample, Score


class RepetitionPenalty(Scorer):
    """The n-gram repetition penalty of Yeo et al. 2025 (arXiv:2502.03373, appendix C.2), in
    open-r1's form: ``(1 − distinct n-grams / n-grams) · max_penalty``, so 0 for text without a
    repeated n-gram down to ``max_penalty`` for one n-gram said over and over.

    Args:
        ngram_size: n (default 3).
        max_penalty: the most negative value (must be <= 0).
        unit: ``words`` (lower-cased, whitespace-split; open-r1's English mode) or ``chars``
            (character n-grams, for languages written without spaces).
    """

    name = "repetition"

    def __init__(self, ngram_size: int = 3, max_penalty: float = -1.0, unit: str = "words",
                 error_value: float = 0.0) -> None:
        if max_penalty > 0:
            raise ValueError(f"max_penalty must be <= 0 (it is a penalty), got {max_penalty}")
        if ngram_size < 1:
            raise ValueError(f"ngram_size must be at least 1, got {ngram_size}")
        if unit not in ("words", "chars"):
            raise ValueError(f"unit must be 'words' or 'chars', got {unit!r}")
        self.n, self.max_penalty, self.unit = ngram_size, float(max_penalty), unit
        self.error_value = error_value

    def score_one(self, sample: Sample) -> Score:
        text = sample.completion_text
        items: Any = text.lower().split() if self.unit == "words" else text
        if len(items) < self.n:
            return Score(0.0, info={"ngrams": 0})
        grams = [tuple(items[i:i + self.n]) for i in range(len(items) - self.n + 1)]
        distinct = len(set(grams))
        value = (1 - distinct / len(grams)) * self.max_penalty
        return Score(value + 0.0, info={"ngrams": len(grams), "distinct": distinct})


def script_of(ch: str) -> str | None:
    """The Unicode script family of a letter (LATIN, CYRILLIC, CJK, HIRAGANA, ARABIC, ...),
    from its character name; None for non-letters."""
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0] if name else None


def script_shares(text: str) -> dict[str, float]:
    counts = Counter(s for s in map(script_of, text) if s is not None)
    total = sum(counts.values())
    return {s: c / total for s, c in counts.items()} if total else {}


class LanguageConsistency(Scorer):
    """The share of the completion's letters written in the prompt's script(s) — the language
    consistency reward of DeepSeek-R1 (arXiv:2501.12948, §2.3.3: the proportion of target-language
    words in the chain of thought), with scripts standing in for languages.

    The target scripts are those making up at least ``min_share`` of the prompt's letters (a
    Japanese prompt mixes kanji and kana), or ``target`` (e.g. ``"LATIN"``, ``["CJK",
    "HIRAGANA", "KATAKANA"]``), or ``metadata["script"]``. A completion without letters scores
    ``empty_value``.
    """

    name = "language_consistency"

    def __init__(self, target: str | list[str] | None = None, min_share: float = 0.2,
                 empty_value: float = 1.0, error_value: float = 0.0) -> None:
        self.target = [target] if isinstance(target, str) else target
        self.min_share, self.empty_value = float(min_share), float(empty_value)
        self.error_value = error_value

    def score_one(self, sample: Sample) -> Score:
        target = self.target or (sample.metadata or {}).get("script")
        if isinstance(target, str):
            target = [target]
        if not target:
            prompt = script_shares(sample.prompt_text)
            target = [s for s, share in prompt.items() if share >= self.min_share]
        wanted = {t.upper() for t in target}
        shares = script_shares(sample.completion_text)
        if not shares:
            return Score(self.empty_value, info={"target": sorted(wanted), "reason": "no letters"})
        if not wanted:
            return Score(self.empty_value, info={"reason": "the prompt has no letters"})
        value = sum(share for s, share in shares.items() if s in wanted)
        return Score(value, info={"target": sorted(wanted),
                                  "scripts": {s: round(v, 4) for s, v in shares.items()}})
