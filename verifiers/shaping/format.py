"""Reasoning-format rewards: ``<think>…</think><answer>…</answer>`` (DeepSeek-R1's template).

:class:`ThinkFormat` is open-r1's format reward (strict: the whole completion is exactly the
template with newlines around the tags; soft: the two blocks in order, anything inside).
:class:`TagCount` is open-r1's tag-count reward, 0.25 per tag that appears exactly once, a
denser signal early in training. The answer inside ``<answer>`` is read with the ``math``
verifier's own extraction, so ``\\boxed{}`` and "the answer is" forms inside it mean the same
thing to both rewards.
"""
from __future__ import annotations

import re
from typing import Any

from rewardkit.scorer import Scorer
from rewardkit.types import Sample, Score
from rewardkit.verifiers.math import extract_answer

_STRICT = re.compile(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", re.DOTALL)
_SOFT = re.compile(r"^\s*<think>.*?</think>\s*<answer>.*?</answer>\s*$", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def math_answer(text: str) -> str | None:
    """The final answer in ``text`` as the ``math`` verifier extracts it, or None."""
    return extract_answer(text)


class ThinkFormat(Scorer):
    """1.0 when the completion follows the reasoning template, else 0.0.

    Args:
        strict: open-r1's strict form, ``^<think>\\n…\\n</think>\\n<answer>\\n…\\n</answer>$``
            (default). False: the soft form, the blocks in order with any spacing.
        require_answer: also require a non-empty answer that the math extraction can read.
    """

    name = "think_format"

    def __init__(self, strict: bool = True, require_answer: bool = False,
                 error_value: float = 0.0) -> None:
        self.pattern = _STRICT if strict else _SOFT
        self.require_answer = require_answer
        self.error_value = error_value

    def score_one(self, sample: Sample) -> Score:
        text = sample.completion_text
        info: dict[str, Any] = {}
        # each tag exactly once, checked first: it also keeps the regex below linear-time
        if any(text.count(tag) != 1 for tag in ("<think>", "</think>", "<answer>", "</answer>")):
            return Score(0.0, info={"reason": "each of the four tags must appear exactly once"})
        if self.pattern.match(text) is None:
            return Score(0.0, info={"reason": "not in the <think>/<answer> format"})
        inner = _ANSWER.search(text).group(1).strip()  # type: ignore[union-attr]
        answer = math_answer(inner) or inner or None
        info["answer"] = answer
        if self.require_answer and not answer:
            return Score(0.0, info={**info, "reason": "empty answer"})
        return Score(1.0, info=info)


class TagCount(Scorer):
    """0.25 for each of ``<think>\\n``, ``\\n</think>\\n``, ``\\n<answer>\\n``, ``\\n</answer>``
    that appears exactly once (open-r1's ``tag_count_reward``)."""

    name = "tag_count"
    TAGS = ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>")

    def __init__(self, error_value: float = 0.0) -> None:
        self.error_value = error_value

    def score_one(self, sample: Sample) -> Score:
        text = sample.completion_text
        counts = {tag.strip(): text.count(tag) for tag in self.TAGS}
        return Score(0.25 * sum(c == 1 for c in counts.values()), info={"tag_counts": counts})
