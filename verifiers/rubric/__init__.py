"""Rubric rewards: a completion scored against weighted criteria — rules checked in code,
embedding similarity, and LLM-judged criteria (an OpenAI-compatible endpoint or a local
Hugging Face model) — aggregated as a weighted sum with gates, all-must-pass, or one implicit
judge call. ``rewardkit.load("rubric", criteria=[...], judge={...})``; see ``docs/rubric.md``.

Needs the ``rubric`` extra (httpx, jsonschema, sentence-transformers) for the criteria that use
them.
"""
from .criteria import Criterion, parse_criteria
from .judge import (DEFAULT_TEMPLATE, IMPLICIT_TEMPLATE, Judge, JudgeUnavailable, LocalJudge,
                    OpenAIJudge, parse_score, render)
from .reward import RubricReward

__all__ = ["Criterion", "DEFAULT_TEMPLATE", "IMPLICIT_TEMPLATE", "Judge", "JudgeUnavailable",
           "LocalJudge", "OpenAIJudge", "RubricReward", "parse_criteria", "parse_score", "render"]
