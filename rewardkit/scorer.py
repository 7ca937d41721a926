"""The Scorer interface: a batch of Samples in, one Score per sample out, never an exception.

Subclasses implement :meth:`Scorer.score_one` (per sample) or override :meth:`Scorer.score_batch`
(models and process pools want the whole batch). :meth:`Scorer.score` is the public entry point:
it validates, runs the batch, and turns any failure into an error Score for the sample that
caused it, so the rest of the batch is never lost.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Sequence

from .types import Sample, SampleError, Score


class RewardInputError(ValueError):
    """A sample lacks what the reward needs (e.g. no reference). Scored as an error."""

    kind = "bad_input"


class Scorer:
    """Base class of every reward.

    Attributes:
        name: the reward's name (the registry name, or the component name in a composition).
        error_value: the value a sample gets when it cannot be scored (default 0.0).
    """

    name: str = "scorer"
    error_value: float = 0.0

    # -- to implement -------------------------------------------------------------------------
    def score_one(self, sample: Sample) -> Score | float:
        raise NotImplementedError(
            f"{type(self).__name__} must implement score_one(sample) or score_batch(samples)"
        )

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        """Score a batch. The default scores each sample alone; override to batch."""
        return [self._score_one_safely(s) for s in samples]

    # -- public -------------------------------------------------------------------------------
    def score(self, samples: Sequence[Sample | dict] | Sample) -> list[Score]:
        """Score a batch; one Score per sample, in order. A sample that fails gets a Score
        whose ``info["error"]`` says why and whose value is ``error_value``."""
        if isinstance(samples, (Sample, dict)):
            raise TypeError(
                "score() takes a batch (a list of Samples); for one sample call score([sample])"
            )
        batch: list[Any] = list(samples)
        bad: dict[int, Score] = {}
        good: list[Sample] = []
        for i, s in enumerate(batch):
            try:
                sample = Sample.coerce(s)
            except SampleError as exc:
                bad[i] = Score.from_error(exc, self.error_value)
                continue
            problem = sample.problem
            if problem is not None:  # never reaches the reward (see Sample.problem)
                bad[i] = Score.from_error(SampleError(problem), self.error_value)
            else:
                good.append(sample)
        try:
            scores = self.score_batch(good)
            if len(scores) != len(good):
                raise RuntimeError(
                    f"{type(self).__name__}.score_batch returned {len(scores)} scores "
                    f"for {len(good)} samples"
                )
        except Exception:
            # Isolate the failure: score each sample alone so only the culprit gets an error.
            scores = [self._score_one_safely(s) for s in good] if self._has_score_one() else [
                self._batch_failed(s) for s in good
            ]
        scores = [finite_or_error(s, self.error_value) for s in scores]
        if not bad:
            return scores
        it = iter(scores)
        return [bad[i] if i in bad else next(it) for i in range(len(batch))]

    async def ascore(self, samples: Sequence[Sample | dict]) -> list[Score]:
        """Async form of :meth:`score` for servers and trainers; runs in a worker thread."""
        import asyncio  # only async callers pay for importing it

        return await asyncio.to_thread(self.score, samples)

    def __call__(self, samples: Sequence[Sample | dict]) -> list[Score]:
        return self.score(samples)

    def close(self) -> None:
        """Release pools, models, sandboxes. Safe to call twice."""

    def __enter__(self) -> "Scorer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    # -- helpers ------------------------------------------------------------------------------
    def _has_score_one(self) -> bool:
        return type(self).score_one is not Scorer.score_one

    def _batch_failed(self, sample: Sample) -> Score:
        try:
            out = self.score_batch([sample])
            return out[0]
        except Exception as exc:  # noqa: BLE001 - the contract: errors become Scores
            return Score.from_error(exc, self.error_value)

    def _score_one_safely(self, sample: Sample) -> Score:
        try:
            out = self.score_one(sample)
        except Exception as exc:  # noqa: BLE001 - the contract: errors become Scores
            return Score.from_error(exc, self.error_value)
        if isinstance(out, Score):
            return out
        return _as_score(out, self.error_value)


def finite_or_error(score: Score, error_value: float) -> Score:
    """``score``, or an error Score when its value, a component, a step or its uncertainty is
    NaN or infinite. Checked once, in :meth:`Scorer.score`, for every reward: a trainer
    normalising a group's advantages turns one NaN or infinity into NaN for the whole group
    (and JSON has neither). An error Score (its value is ``error_value``) is left as it is."""
    if not score.ok:
        return score
    if (not score.components and score.steps is None and score.uncertainty is None
            and isinstance(score.value, (int, float)) and math.isfinite(score.value)):
        return score  # the common case, checked without building the list below
    numbers: list[tuple[str, Any]] = [("value", score.value)]
    numbers += [(f"component {k!r}", v) for k, v in score.components.items()]
    if score.steps is not None:
        numbers += [(f"step {i}", v) for i, v in enumerate(score.steps)]
    if score.uncertainty is not None:
        numbers.append(("uncertainty", score.uncertainty))
    for what, v in numbers:
        try:
            finite = math.isfinite(v)
        except TypeError:
            finite = False
        if not finite:
            kind = "nan" if isinstance(v, float) and math.isnan(v) else "non_finite"
            return Score(error_value, info={
                **score.info, "error": f"the reward's {what} is {v!r}, not a finite number",
                "error_kind": kind})
    return score


def _as_score(out: Any, error_value: float) -> Score:
    """Turn what a reward function returned (a number, a (value, info) pair, a dict with
    ``value``/``score``) into a Score."""
    if isinstance(out, bool) or isinstance(out, (int, float)):
        value = float(out)
        if math.isnan(value):
            return Score.from_error("reward returned NaN", error_value, kind="nan")
        return Score(value)
    if isinstance(out, Score):
        return out
    if isinstance(out, dict):
        key = "value" if "value" in out else "score" if "score" in out else None
        if key is None:
            return Score.from_error(
                f"reward returned a dict without 'value' or 'score': keys {sorted(out)}",
                error_value, kind="bad_return",
            )
        rest = {k: v for k, v in out.items() if k != key}
        score = _as_score(out[key], error_value)
        score.info.update(rest)
        return score
    if out is None:
        return Score.from_error("reward returned None", error_value, kind="bad_return")
    return Score.from_error(
        f"reward returned {type(out).__name__}; return a float, a dict with 'value', or a Score",
        error_value, kind="bad_return",
    )


class FunctionScorer(Scorer):
    """A Scorer around a plain function ``f(prompt, completion, reference, **options)``.

    ``completion`` and ``prompt`` are passed as text (the last assistant / user message of a chat)
    unless ``raw=True``, in which case they are passed as given. If the function accepts a
    ``metadata`` or ``sample`` keyword, it gets it.
    """

    def __init__(self, fn: Callable[..., Any], name: str | None = None, raw: bool = False,
                 error_value: float = 0.0, **options: Any) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")
        self.raw = raw
        self.error_value = error_value
        self.options = options
        signature = inspect.signature(fn)
        params = signature.parameters
        extra = {k: None for k in ("metadata", "sample") if k in params}
        try:
            signature.bind("", "", None, **options, **extra)
        except TypeError as exc:
            accepted = [p for p in list(params)[3:] if p not in extra]
            raise TypeError(f"reward {self.name!r}: {exc}; its options are: "
                            f"{', '.join(accepted) or 'none'}") from None
        self._wants_metadata = "metadata" in params
        self._wants_sample = "sample" in params

    def score_one(self, sample: Sample) -> Score:
        kw = dict(self.options)
        if self._wants_metadata:
            kw["metadata"] = sample.metadata
        if self._wants_sample:
            kw["sample"] = sample
        if self.raw:
            out = self.fn(sample.prompt, sample.completion, sample.reference, **kw)
        else:
            out = self.fn(sample.prompt_text, sample.completion_text, sample.reference, **kw)
        return _as_score(out, self.error_value)


def is_missing(value: Any) -> bool:
    """None, or a float NaN: JSON's ``NaN``, or a missing cell as pandas reads a table."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def require_reference(sample: Sample, reward: str) -> Any:
    """The sample's reference, or a clear error when it has none. A NaN (or a list holding
    one) is no reference: read as text it is the answer "nan", which a completion saying
    "nan" would match."""
    ref = sample.reference
    if ref is None:
        raise RewardInputError(
            f"reward {reward!r} needs a reference but the sample has none "
            "(offline: map the column with --reference-field)"
        )
    if is_missing(ref) or (isinstance(ref, (list, tuple)) and any(map(is_missing, ref))):
        raise RewardInputError(
            f"reward {reward!r} got NaN as the sample's reference (a missing value in the "
            "data?); give the reference as a string or a number")
    return ref

