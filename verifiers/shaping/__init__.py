"""Shaping rewards: reasoning format, length, repetition, language, structured output and text
similarity. Each is loadable by name (``rewardkit list``); options are documented on each class
and in ``docs/shaping.md``.

Optional libraries: ``text`` extra (rapidfuzz, sacrebleu, rouge-score) for the similarity
rewards, ``rubric`` extra (jsonschema, sentence-transformers) for ``json_schema`` and
``embedding_similarity``. A missing one fails when the reward is built, naming the extra.
"""
from .format import TagCount, ThinkFormat, math_answer
from .length import AdaptiveLength, CosineLength, OverlongPenalty
from .repetition import LanguageConsistency, RepetitionPenalty, script_of
from .similarity import Bleu, ChrF, EmbeddingSimilarity, FuzzyMatch, Rouge
from .structured import JsonSchemaValid, find_json

__all__ = ["AdaptiveLength", "Bleu", "ChrF", "CosineLength", "EmbeddingSimilarity", "FuzzyMatch",
           "JsonSchemaValid", "LanguageConsistency", "OverlongPenalty", "RepetitionPenalty",
           "Rouge", "TagCount", "ThinkFormat", "find_json", "math_answer", "script_of"]
