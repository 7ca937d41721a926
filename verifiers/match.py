"""Text matching rewards: ``exact_match`` (equal after light canonicalisation) and ``regex``."""
from __future__ import annotations

import re
import string
from typing import Any, Sequence

from rewardkit.scorer import RewardInputError, Scorer, require_reference
from rewardkit.types import Sample, Score

_PUNCT = string.punctuation
_SPACE = re.compile(r"\s+")


class ExactMatch(Scorer):
    """1.0 if the completion equals the reference after normalisation, else 0.0.

    Args:
        case_sensitive: compare case (default False).
        strip_punctuation: drop leading/trailing punctuation such as a final period (default True).
        normalize_whitespace: collapse runs of whitespace to one space (default True).

    The reference is a string or a list of acceptable strings.
    """

    name = "exact_match"

    def __init__(self, case_sensitive: bool = False, strip_punctuation: bool = True,
                 normalize_whitespace: bool = True, error_value: float = 0.0) -> None:
        self.case_sensitive = case_sensitive
        self.strip_punctuation = strip_punctuation
        self.normalize_whitespace = normalize_whitespace
        self.error_value = error_value

    def canonical(self, text: str) -> str:
        """``text`` as it is compared: whitespace collapsed, end punctuation and case dropped
        (each as the options say)."""
        if self.normalize_whitespace:
            text = _SPACE.sub(" ", text)
        text = text.strip()
        if self.strip_punctuation:
            text = text.strip(_PUNCT).strip()
        if not self.case_sensitive:
            text = text.lower()
        return text

    def score_one(self, sample: Sample) -> Score:
        ref = require_reference(sample, self.name)
        refs: Sequence[Any] = ref if isinstance(ref, (list, tuple)) else (ref,)
        got = self.canonical(sample.completion_text)
        for r in refs:
            if not isinstance(r, (str, int, float)):
                raise RewardInputError(
                    f"exact_match needs a string reference (or a list of strings), got "
                    f"{type(r).__name__}"
                )
            if got == self.canonical(str(r)):
                return Score(1.0)
        return Score(0.0)


_FLAGS = {"i": re.IGNORECASE, "ignorecase": re.IGNORECASE, "s": re.DOTALL, "dotall": re.DOTALL,
          "m": re.MULTILINE, "multiline": re.MULTILINE, "x": re.VERBOSE, "verbose": re.VERBOSE}


class RegexMatch(Scorer):
    """1.0 if the completion matches a regular expression, else 0.0.

    Args:
        pattern: the regex. If None, each sample's reference is used as its pattern.
        mode: ``search`` (anywhere, default), ``match`` (at the start) or ``fullmatch`` (the
            whole completion, e.g. a strict output format).
        flags: regex flags as names, e.g. ``"dotall,ignorecase"`` or ``["s", "i"]``.
        strip: strip surrounding whitespace before matching (default True).
    """

    name = "regex"

    def __init__(self, pattern: str | None = None, mode: str = "search",
                 flags: str | Sequence[str] = (), strip: bool = True,
                 error_value: float = 0.0) -> None:
        if mode not in ("search", "match", "fullmatch"):
            raise ValueError(f"regex mode must be 'search', 'match' or 'fullmatch', got {mode!r}")
        names = [f.strip().lower() for f in (flags.split(",") if isinstance(flags, str) else flags)
                 if f.strip()]
        unknown = [f for f in names if f not in _FLAGS]
        if unknown:
            raise ValueError(f"unknown regex flag(s) {unknown}; use {sorted(set(_FLAGS))}")
        self.flags = 0
        for f in names:
            self.flags |= _FLAGS[f]
        self.mode = mode
        self.strip = strip
        self.error_value = error_value
        if isinstance(pattern, (int, float)) and not isinstance(pattern, bool):
            pattern = str(pattern)  # `-O pattern=1` arrives as a number
        try:
            self.pattern = re.compile(pattern, self.flags) if pattern is not None else None
        except re.error as exc:
            raise ValueError(f"invalid regex pattern {pattern!r}: {exc}") from exc

    def score_one(self, sample: Sample) -> Score:
        pattern = self.pattern
        if pattern is None:
            ref = require_reference(sample, self.name)
            try:
                pattern = re.compile(str(ref), self.flags)
            except re.error as exc:
                raise RewardInputError(f"reference is not a valid regex: {exc}") from exc
        text = sample.completion_text
        if self.strip:
            text = text.strip()
        return Score(1.0 if getattr(pattern, self.mode)(text) else 0.0)
