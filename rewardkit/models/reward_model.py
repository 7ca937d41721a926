"""``reward_model``: a learned outcome reward model as a Scorer.

Any Hugging Face ``AutoModelForSequenceClassification`` with one output (Skywork-Reward,
single-head ArmoRM-style models, models trained by ``rewardkit train rm``) scores prompt +
completion; ``value`` is its logit, ``sigmoid(logit)``, or ``logit - center``.

The forward pass goes through :meth:`RewardModelScorer.forward_logits`, which returns every
output of the head (``[batch, outputs]``): a model with K heads on one trunk can be read in one
pass the same way.
"""
from __future__ import annotations

import math
import time
from typing import Any, Iterator, Sequence

from ..dataio import Source, detect_format, read_rows
from ..runtime.allocator import retain_freed_memory
from ..scorer import Scorer
from ..types import Sample, Score
from . import encoding
from .loading import (ModelLoadError, load_classifier, load_config, load_tokenizer, read_sidecar,
                      resolve_device_dtype)
from .pass_plan import check_max_padding, forward_passes, padding_policy

OUTPUTS = ("logit", "sigmoid", "centered")


class RewardModelScorer(Scorer):
    """Score completions with a sequence-classification reward model.

    Args:
        model: local folder or hub id, loaded with ``from_pretrained``.
        tokenizer: where the tokenizer is, when not beside the model.
        max_length: token budget per sample (default: the tokenizer's ``model_max_length``,
            capped at 4096). Longer inputs keep the end of the completion; ``info`` says so.
        batch_tokens: padded tokens per forward pass; samples are sorted by length and grouped
            under this budget, instead of a fixed batch size.
        max_batch_size: optional cap on samples per forward pass.
        max_padding: start another forward pass within a token budget when a row would be
            padded by more than this share of the batch's width. ``auto``: on CPU, where a pad
            token costs as much as a real one, cut where another pass costs less than the
            padding it saves, by each pass's measured time (the 0.1 rule until a few passes
            are timed; see :mod:`.pass_plan`); none on a GPU, where padding is nearly free.
        device: ``auto`` (CUDA if present), ``cpu``, ``cuda``, ``cuda:1``.
        dtype: ``auto`` (bf16 on CUDA, fp32 on CPU), ``float32``, ``bfloat16``, ``float16``.
        output: ``logit`` (raw score), ``sigmoid`` (σ(logit), a probability-like value in
            (0, 1); under Bradley–Terry σ(r₁ − r₂) is the preference probability), or
            ``centered`` (logit − center).
        center: the value subtracted with ``output="centered"``.
        center_data: samples (a list, or a JSONL/JSON/CSV/Parquet path with ``prompt`` and
            ``completion`` columns) whose mean logit becomes ``center``.
        chat_template: use the tokenizer's chat template when it has one (default True).
        plain_format: the text without a chat template (default ``"{prompt}{completion}"``,
            then EOS).
        pad_token: pad token to use when the tokenizer has none.
        trust_remote_code: allow models that ship their own code.
        error_value: value of a sample that cannot be scored.
    """

    name = "reward_model"

    def __init__(self, model: str, tokenizer: str | None = None, max_length: int | None = None,
                 batch_tokens: int = 16384, max_batch_size: int | None = None,
                 max_padding: float | str | None = "auto", device: str = "auto",
                 dtype: str = "auto", output: str = "logit",
                 center: float | None = None, center_data: Any = None,
                 chat_template: bool = True, plain_format: str | None = None,
                 pad_token: str | None = None, trust_remote_code: bool = False,
                 error_value: float = 0.0, name: str | None = None) -> None:
        if output not in OUTPUTS:
            raise ModelLoadError(f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")
        if output == "centered" and center is None and center_data is None:
            raise ModelLoadError("output='centered' needs center=VALUE or center_data=SAMPLES "
                                 "(a reference set whose mean logit is subtracted)")
        check_max_padding(max_padding)
        self.name = name or self.name
        outputs = self._load(model, tokenizer, max_length, batch_tokens, max_batch_size, device,
                             dtype, chat_template, plain_format, pad_token, trust_remote_code,
                             error_value)
        if outputs != 1:
            raise ModelLoadError(
                f"{model!r} has a classification head with {outputs} outputs; `reward_model` "
                "reads a head with one output (a reward). Multi-objective heads are not read "
                "as one reward.")
        self.max_padding, self.pass_cost = padding_policy(max_padding, self.device)
        self.output = output
        self.center = center
        if output == "centered" and center is None:
            self.center = self.mean_logit(_reference_samples(center_data))

    def _load(self, model: str, tokenizer: str | None, max_length: int | None,
              batch_tokens: int, max_batch_size: int | None, device: str, dtype: str,
              chat_template: bool, plain_format: str | None, pad_token: str | None,
              trust_remote_code: bool, error_value: float) -> int:
        """Load the classifier and tokenizer and set what encoding and batching read (shared
        with the multi-head form); return the number of outputs of the head."""
        if batch_tokens < 1 or (max_length is not None and max_length < 2):
            raise ModelLoadError("batch_tokens must be >= 1 and max_length >= 2")
        if not isinstance(model, str) or not model:
            raise ModelLoadError("model must be a local folder or a hub id (model=PATH_OR_ID)")
        self.error_value = error_value
        self.model_name = model
        self.sidecar = read_sidecar(model)
        self.device, self.dtype = resolve_device_dtype(device, dtype)
        if str(self.device) == "cpu":  # every batch would page-fault its activations back in
            retain_freed_memory()
        config = load_config(model, trust_remote_code)
        self.tokenizer = load_tokenizer(model, tokenizer, pad_token, trust_remote_code)
        self.model = self._load_model(model, config, trust_remote_code)
        if self.model.config.pad_token_id is None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.max_length = max_length or min(int(self.tokenizer.model_max_length or 4096), 4096)
        self.batch_tokens = batch_tokens
        self.max_batch_size = max_batch_size
        self.max_padding, self.pass_cost = padding_policy("auto", self.device)
        self.use_chat_template = chat_template
        self.plain_format = plain_format or self.sidecar.get("plain_format",
                                                             encoding.PLAIN_FORMAT)
        return int(getattr(self.model.config, "num_labels", 1))

    def _load_model(self, model: str, config: Any, trust_remote_code: bool) -> Any:
        """The network :meth:`forward_logits` runs (a subclass may load another, e.g. a base
        model with LoRA adapters)."""
        return load_classifier(model, "sequence", self.device, self.dtype, trust_remote_code,
                               config)

    # -- encoding and the forward pass ------------------------------------------------------------
    def encode(self, sample: Sample) -> encoding.Encoded:
        return self.encode_many([sample])[0]

    def encode_many(self, samples: Sequence[Sample]) -> list[encoding.Encoded]:
        """Token ids of each sample: rendered one by one, tokenised in one call."""
        plain = not (self.use_chat_template and getattr(self.tokenizer, "chat_template", None))
        fulls = [encoding.render_full(self.tokenizer, s.prompt, s.completion,
                                      self.use_chat_template, self.plain_format) for s in samples]

        def prefix_of(i: int) -> str:
            return encoding.render(self.tokenizer, samples[i].prompt, samples[i].completion,
                                   self.use_chat_template, self.plain_format)[0]

        return encoding.encode_texts(self.tokenizer, fulls, prefix_of, self.max_length, plain)

    def forward_logits(self, rows: Sequence[Sequence[int]]) -> Any:
        """The head's outputs ``[len(rows), outputs]`` (float32, on CPU) for token id rows."""
        import torch

        batch = encoding.pad(rows, self.tokenizer.pad_token_id, self.device)
        with torch.inference_mode():
            logits = self.model(**batch, use_cache=False).logits
        return logits.float().cpu()

    def passes(self, lengths: Sequence[int]) -> Iterator[list[int]]:
        """The forward passes for rows of these lengths (see :mod:`.pass_plan`)."""
        return forward_passes(lengths, self.batch_tokens, self.max_batch_size, self.max_padding,
                              self.pass_cost)

    def logits(self, encoded: Sequence[encoding.Encoded]) -> list[float]:
        """One logit per encoded sample, computed in token-budget batches (longest first).
        Identical token rows are run once and share the value (see :func:`encoding.unique_rows`)."""
        out: list[float] = [math.nan] * len(encoded)
        first, owner = encoding.unique_rows([e.ids for e in encoded])
        lengths = [len(encoded[i].ids) for i in first]
        for idx in self.passes(lengths):
            values = self.forward_logits([encoded[first[i]].ids for i in idx])[:, 0].tolist()
            for i, v in zip(idx, values):
                out[first[i]] = v
        return [out[first[owner[i]]] for i in range(len(encoded))]

    def mean_logit(self, samples: Sequence[Sample]) -> float:
        if not samples:
            raise ModelLoadError("center_data is empty; give reference samples")
        values = self.logits(self.encode_many(samples))
        return float(sum(values) / len(values))

    # -- Scorer -----------------------------------------------------------------------------------
    def encode_batch(self, samples: list[Sample]
                     ) -> tuple[list[Score | None], list[encoding.Encoded], list[int]]:
        """Encode every sample: error Scores for those that cannot be encoded (in their
        places), the encodings of the rest and their positions."""
        scores: list[Score | None] = [None] * len(samples)
        try:
            together = self.encode_many(samples)
        except Exception:  # noqa: BLE001 - one bad sample: encode each alone to find it
            together = None
        encoded: list[encoding.Encoded] = []
        where: list[int] = []
        for i, s in enumerate(samples):
            try:
                e = together[i] if together is not None else self.encode(s)
                if not e.ids:
                    raise ValueError("the sample encodes to no tokens")
            except Exception as exc:  # noqa: BLE001 - a bad sample gets its own error Score
                scores[i] = Score.from_error(exc, self.error_value, kind="encode")
                continue
            encoded.append(e)
            where.append(i)
        return scores, encoded, where

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        start = time.perf_counter()
        scores, encoded, where = self.encode_batch(samples)
        logits = self.logits(encoded) if encoded else []
        elapsed = (time.perf_counter() - start) / max(1, len(samples))
        for i, e, logit in zip(where, encoded, logits):
            if not math.isfinite(logit):
                scores[i] = Score.from_error(f"the model returned {logit}", self.error_value,
                                             kind="nan")
                continue
            info = {"logit": logit, **e.info(), "seconds": elapsed}
            scores[i] = Score(self.transform(logit), info=info)
        return [s for s in scores if s is not None]

    def transform(self, logit: float) -> float:
        if self.output == "sigmoid":
            return 1.0 / (1.0 + math.exp(-logit)) if logit >= 0 else \
                math.exp(logit) / (1.0 + math.exp(logit))
        if self.output == "centered":
            return logit - float(self.center)  # type: ignore[arg-type]
        return logit

    def close(self) -> None:
        self.model = None


def _reference_samples(data: Any) -> list[Sample]:
    """Samples from a list (Samples or dicts) or a file with prompt/completion columns."""
    if isinstance(data, (list, tuple)):
        return [Sample.coerce(d) for d in data]
    rows = read_rows(Source(str(data), detect_format(str(data))))
    return [Sample(r.get("prompt", ""), r["completion"]) for r in rows]
