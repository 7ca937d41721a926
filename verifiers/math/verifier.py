"""The ``math`` reward: 1.0 when the completion's final answer equals the reference.

Each sample goes once through each stage: **extract** the stated answers (:mod:`.extract`) →
their **normal form** (:mod:`.normal_form`: cleaned, size-guarded, read) → **compare** with the
gold's normal form (:mod:`.compare` in this process; :mod:`.symbolic` with sympy in bounded
worker processes, :mod:`.pool`, only when the cheap comparison cannot tell). The verdict is
decided in one place, :func:`.verdict.decide`.
"""
from __future__ import annotations

import threading
from typing import Any

from ...scorer import RewardInputError, Scorer, require_reference
from ...types import Sample, Score
from .config import MathOptions, make_options
from .extract import extract
from .normal_form import Gold, UnreadableGold, read_answers, read_gold
from .pool import WorkerPool
from .verdict import decide, verdict


class MathVerifier(Scorer):
    """Scores 1.0 when the completion's final answer is mathematically equivalent to the
    reference (``Sample.reference``: the gold answer, LaTeX or plain, or a GSM8K / MATH /
    Minerva-style solution whose final answer is read), else 0.0. A reference from which no
    answer can be read is an error Score (``error_kind: bad_input``), never a silent 0.0.

    Args:
        preset: ``"default"`` (RL: explicit answers, final form required), ``"gsm8k"``
            (also the last number when nothing else is stated) or ``"eval"`` (no final-form
            requirement). See :data:`~.config.PRESETS`.
        **options: any field of :class:`~.config.MathOptions`, overriding the preset.

    ``Score.info`` holds ``extracted`` (the answer found, a list when several), ``source``,
    ``pred_normalized``, ``gold_normalized``, ``rule`` (exact, numeric, symbolic, structural,
    final_form) and on 0.0 ``reason``: no_answer, not_equivalent, conflicting, timeout,
    too_large or unparsable (with ``detail`` where useful).
    """

    name = "math"

    def __init__(self, preset: str = "default", **options: Any) -> None:
        self.options: MathOptions = make_options(preset, **options)
        self.preset = preset
        self._pool: WorkerPool | None = None
        self._pool_lock = threading.Lock()

    @property
    def pool(self) -> WorkerPool:
        with self._pool_lock:
            if self._pool is None:
                self._pool = WorkerPool(self.options.n_workers, self.options.memory_limit_mb)
            return self._pool

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def score_one(self, sample: Sample) -> Score:
        return self.score_batch([sample])[0]

    def _gold(self, sample: Sample, golds: dict[Any, Gold]) -> Gold:
        ref = require_reference(sample, self.name)
        if isinstance(ref, bool) or not isinstance(ref, (str, int, float)):
            raise RewardInputError(
                f"reward 'math' needs the gold answer as a string (LaTeX or plain) or a number, "
                f"got {type(ref).__name__}"
            )
        key = ref if isinstance(ref, str) else repr(ref)
        gold = golds.get(key)
        if gold is None:
            try:
                gold = golds[key] = read_gold(ref, self.options)
            except UnreadableGold as exc:
                raise RewardInputError(f"reward 'math' cannot read the reference: {exc}") from exc
        if gold.problem:
            raise RewardInputError(f"the reference answer is too large to verify: {gold.problem}")
        if not gold.canonical:
            raise RewardInputError("the reference answer is empty")
        return gold

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        opts = self.options
        golds: dict[Any, Gold] = {}  # each distinct gold is read once per batch
        scores: list[Score | None] = [None] * len(samples)
        pending: list[tuple[int, tuple[Any, ...]]] = []
        found: dict[int, tuple[Any, str | None]] = {}
        for i, sample in enumerate(samples):
            try:
                gold = self._gold(sample, golds)
            except RewardInputError as exc:
                scores[i] = Score.from_error(exc, self.error_value)
                continue
            text = sample.completion_text
            if len(text) > opts.max_completion_chars:
                scores[i] = _score(verdict(False, None, None, gold.shown, "too_large",
                                           detail=f"completion has {len(text)} characters "
                                           f"(max_completion_chars={opts.max_completion_chars})"),
                                   None, None)
                continue
            ex = extract(text, opts, gold_is_choice=gold.kind == "choice")
            if ex.problem:
                scores[i] = _score(verdict(False, None, None, gold.shown, "too_large",
                                           detail=ex.problem), None, ex.source)
                continue
            if not ex.candidates:
                scores[i] = _score(verdict(False, None, None, gold.shown, "no_answer"), None, None)
                continue
            shown = ex.candidates[0] if len(ex.candidates) == 1 else list(ex.candidates)
            found[i] = (shown, ex.source)
            answers = read_answers(ex.candidates, gold, opts)
            if len(answers) > 1 and ex.source == "boxed" and gold.is_list:
                # one box per part of an answer of several parts
                answers = read_answers([", ".join(a.raw for a in answers)], gold, opts)
            prompt = _prompt_text(sample)
            result = decide(gold, answers, opts, prompt)
            if result is None:
                pending.append((i, (gold, answers, opts, prompt)))
            else:
                scores[i] = _score(result, *found[i])
        if pending:
            timeout_detail = f"judging took longer than timeout={opts.timeout}s"
            results = self.pool.run(
                pending, opts.timeout,
                on_timeout=lambda i: verdict(False, None, None, None, "timeout",
                                             detail=timeout_detail),
                on_crash=lambda i: verdict(False, None, None, None, "too_large",
                                           detail="the worker ran out of memory or crashed"),
            )
            for i, _ in pending:
                result = results[i]
                if result.get("gold_normalized") is None:
                    result["gold_normalized"] = pending_gold(pending, i).shown
                if result.get("reason") == "unparsable" and str(
                        result.get("detail", "")).startswith("the gold answer could not be read"):
                    scores[i] = Score.from_error(RewardInputError(
                        f"reward 'math' cannot read the reference: {result['detail']}"),
                        self.error_value)
                    continue
                scores[i] = _score(result, *found[i])
        return scores  # type: ignore[return-value]


def _prompt_text(sample: Sample) -> str:
    """The prompt as text, for the restatement check (a prompt of an unexpected shape has none)."""
    if not sample.prompt:
        return ""
    try:
        return sample.prompt_text
    except Exception:  # noqa: BLE001 - no prompt text, no restatement check
        return ""


def pending_gold(pending: list[tuple[int, tuple[Any, ...]]], index: int) -> Gold:
    for i, payload in pending:
        if i == index:
            return payload[0]
    raise KeyError(index)


def _score(result: dict[str, Any], extracted: Any, source: str | None) -> Score:
    info = {"extracted": extracted, "source": source}
    info.update((k, v) for k, v in result.items() if k != "equivalent")
    return Score(1.0 if result["equivalent"] else 0.0, info=info)
