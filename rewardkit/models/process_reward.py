"""``process_reward``: a learned process reward model (PRM) as a Scorer.

The completion is split into steps; the model scores every step; ``Score.steps`` holds the
per-step scores (the probability that the step is right) and ``value`` their aggregate.

Two layouts are in use, and both are read here (``layout``):

``separator`` — TRL's PRMTrainer (Math-Shepherd-style data, Wang et al. 2024):
    an ``AutoModelForTokenClassification`` with two labels (0 wrong, 1 right). The input is
    ``[BOS] + prompt + step₁ + sep + step₂ + sep + …``, tokenised piece by piece without a
    chat template (``sep`` is ``separator``, default ``"\\n"``, TRL's ``step_separator``);
    the step's score is read at the *last token of the separator that follows it*.

``step_token`` — Qwen2.5-Math-PRM (Zhang et al. 2025, "The Lessons of Developing Process
    Reward Models"): every step is followed by a special token (``step_token``, default
    ``"<extra_0>"``); with a chat template the conversation is ``system`` (``system_prompt``),
    ``user`` = the prompt, ``assistant`` = ``step₁<extra_0>step₂<extra_0>…``. The step's score is
    the softmax over the two classes at that token, class 1 (right). Qwen's own checkpoint ships
    its modelling code (``trust_remote_code=True``); a token classifier saved by
    ``rewardkit train prm --set layout=step_token`` loads without it.

``auto`` takes the layout a model trained here recorded in its ``rewardkit.json``, else
``step_token`` when the tokenizer has ``step_token`` as a token of its own, else ``separator``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Sequence

from ..scorer import Scorer
from ..types import Sample, Score
from . import encoding
from .loading import (ModelLoadError, load_classifier, load_config, load_tokenizer, read_sidecar,
                      resolve_device_dtype)
from .pass_plan import check_max_padding, forward_passes, padding_policy

LAYOUTS = ("auto", "separator", "step_token")
AGGREGATES = ("min", "last", "prod", "mean")
DEFAULT_STEP_TOKEN = "<extra_0>"
QWEN_PRM_SYSTEM_PROMPT = ("Please reason step by step, and put your final answer within "
                          "\\boxed{}.")
"""The system prompt of Qwen2.5-Math-PRM's model card; pass it as ``system_prompt``."""


@dataclass
class StepEncoding:
    """Token ids and, per step, the position its score is read at (steps cut off by
    ``max_length`` have none)."""

    ids: list[int]
    positions: list[int]
    steps_cut: int = 0


def split_steps(text: str, step_sep: str = "\n\n") -> list[str]:
    """Steps of a completion: pieces between ``step_sep`` (default: blank lines), stripped,
    empty pieces dropped."""
    return [s.strip() for s in text.split(step_sep) if s.strip()]


def aggregate(scores: Sequence[float], how: str) -> float:
    """One value from per-step scores: ``min`` (the weakest step; Lightman et al. 2023 and
    Wang et al. 2024 rank solutions by it), ``last``, ``prod`` (the probability all steps are
    right, if independent; Lightman et al. 2023) or ``mean``."""
    if how == "min":
        return min(scores)
    if how == "last":
        return scores[-1]
    if how == "prod":
        return math.prod(scores)
    return sum(scores) / len(scores)


def encode_steps(tokenizer: Any, prompt: Any, steps: Sequence[str], layout: str,
                 separator: str = "\n", step_token: str = DEFAULT_STEP_TOKEN,
                 chat_template: bool = True, system_prompt: str | None = None,
                 max_length: int | None = None) -> StepEncoding:
    """Encode a prompt and its steps in ``layout`` (see the module docstring). With
    ``max_length`` the sequence keeps its first tokens; steps whose mark falls beyond are
    counted in ``steps_cut``."""
    if layout == "separator":
        ids: list[int] = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
        ids += tokenizer(encoding.as_text(prompt), add_special_tokens=False).input_ids
        sep = tokenizer(separator, add_special_tokens=False).input_ids
        if not sep:
            raise ModelLoadError(f"separator {separator!r} encodes to no tokens with this "
                                 "tokenizer; pick a separator it knows")
        positions = []
        for step in steps:
            ids += tokenizer(step, add_special_tokens=False).input_ids + sep
            positions.append(len(ids) - 1)
    else:
        token_id = tokenizer.convert_tokens_to_ids(step_token)
        body = "".join(f"{s}{step_token}" for s in steps)
        if chat_template and getattr(tokenizer, "chat_template", None):
            messages = ([{"role": "system", "content": system_prompt}] if system_prompt else [])
            messages += encoding.as_messages(prompt, "user")
            messages.append({"role": "assistant", "content": body})
            text = tokenizer.apply_chat_template(messages, tokenize=False)
            ids = list(tokenizer(text, add_special_tokens=False).input_ids)
        else:
            ids = list(tokenizer(encoding.as_text(prompt) + body).input_ids)
        positions = [i for i, t in enumerate(ids) if t == token_id]
        if len(positions) != len(steps):
            raise ValueError(f"{len(steps)} steps but {len(positions)} {step_token!r} marks after "
                             "tokenisation; a step must not contain the step token itself")
    cut = 0
    if max_length is not None and len(ids) > max_length:
        ids = ids[:max_length]
        kept = [p for p in positions if p < max_length]
        cut, positions = len(positions) - len(kept), kept
    return StepEncoding(ids, positions, cut)


class ProcessRewardScorer(Scorer):
    """Score every reasoning step of a completion with a process reward model.

    Args:
        model: local folder or hub id (``from_pretrained``).
        layout: ``auto``, ``separator`` (TRL PRMTrainer) or ``step_token`` (Qwen2.5-Math-PRM).
        step_sep: how the completion text is split into steps (default ``"\\n\\n"``, blank
            lines). A sample whose ``metadata["steps"]`` is a list of strings uses those steps.
        separator: ``separator`` layout: the text appended after each step, read at its last
            token (TRL's ``step_separator``; default ``"\\n"``, or what training recorded).
        step_token: ``step_token`` layout: the token after each step (default ``"<extra_0>"``).
        system_prompt: ``step_token`` layout with a chat template: the system message
            (Qwen2.5-Math-PRM expects :data:`QWEN_PRM_SYSTEM_PROMPT`).
        aggregate: ``min`` | ``last`` | ``prod`` | ``mean`` of the step scores → ``value``.
        positive_label: class index meaning "right" (default: the last class; one-output heads
            read ``sigmoid``).
        max_length, batch_tokens, max_batch_size, max_padding, device, dtype, chat_template,
        pad_token, trust_remote_code, error_value: as for ``reward_model``. Past ``max_length`` the
        sequence keeps its start; steps cut off are unscored and counted in ``info``.
    """

    name = "process_reward"

    def __init__(self, model: str, tokenizer: str | None = None, layout: str = "auto",
                 step_sep: str = "\n\n", separator: str | None = None,
                 step_token: str | None = None, system_prompt: str | None = None,
                 aggregate: str = "min", positive_label: int | None = None,
                 max_length: int | None = None, batch_tokens: int = 16384,
                 max_batch_size: int | None = None, max_padding: float | str | None = "auto",
                 device: str = "auto", dtype: str = "auto",
                 chat_template: bool = True, pad_token: str | None = None,
                 trust_remote_code: bool = False, error_value: float = 0.0,
                 name: str | None = None) -> None:
        if layout not in LAYOUTS:
            raise ModelLoadError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        if aggregate not in AGGREGATES:
            raise ModelLoadError(f"aggregate must be one of {', '.join(AGGREGATES)}, got "
                                 f"{aggregate!r}")
        if not step_sep:
            raise ModelLoadError("step_sep must be a non-empty string (default: blank lines)")
        check_max_padding(max_padding)
        self.name = name or self.name
        self.error_value = error_value
        sidecar = read_sidecar(model) if isinstance(model, str) else {}
        self.device, self.dtype = resolve_device_dtype(device, dtype)
        config = load_config(model, trust_remote_code)
        self.tokenizer = load_tokenizer(model, tokenizer, pad_token, trust_remote_code)
        self.model = load_classifier(model, "token", self.device, self.dtype, trust_remote_code,
                                     config)
        self.step_token = step_token or sidecar.get("step_token", DEFAULT_STEP_TOKEN)
        self.separator = separator if separator is not None else sidecar.get("separator", "\n")
        if layout == "auto":
            layout = sidecar.get("layout") or (
                "step_token" if self.step_token in self.tokenizer.get_vocab() else "separator")
        if layout == "step_token" and self.step_token not in self.tokenizer.get_vocab():
            raise ModelLoadError(f"layout 'step_token' needs the token {self.step_token!r} in "
                                 "the tokenizer's vocabulary; set step_token=TOKEN, or use "
                                 "layout='separator'")
        self.layout = layout
        self.outputs = int(getattr(self.model.config, "num_labels", 2))
        self.positive_label = self.outputs - 1 if positive_label is None else positive_label
        if not 0 <= self.positive_label < max(self.outputs, 1):
            raise ModelLoadError(f"positive_label {self.positive_label} is not a class of a "
                                 f"{self.outputs}-output head")
        self.step_sep = step_sep
        self.system_prompt = system_prompt
        self.aggregate = aggregate
        self.use_chat_template = chat_template
        self.max_length = max_length or min(int(self.tokenizer.model_max_length or 4096), 4096)
        self.batch_tokens = batch_tokens
        self.max_batch_size = max_batch_size
        self.max_padding, self.pass_cost = padding_policy(max_padding, self.device)

    def steps_of(self, sample: Sample) -> list[str]:
        given = (sample.metadata or {}).get("steps")
        if given is not None:
            if not isinstance(given, (list, tuple)) or not all(isinstance(s, str) for s in given):
                raise ValueError("metadata['steps'] must be a list of strings")
            steps = [s for s in given if s.strip()]
        else:
            steps = split_steps(sample.completion_text, self.step_sep)
        if not steps:
            raise ValueError("the completion has no steps to score (it is empty)")
        return steps

    def encode(self, sample: Sample) -> StepEncoding:
        return encode_steps(self.tokenizer, sample.prompt, self.steps_of(sample), self.layout,
                            self.separator, self.step_token, self.use_chat_template,
                            self.system_prompt, self.max_length)

    def step_probabilities(self, encoded: Sequence[StepEncoding]) -> list[list[float]]:
        """Per-step probabilities of "right", in token-budget batches (longest first)."""
        import torch

        out: list[list[float]] = [[] for _ in encoded]
        lengths = [len(e.ids) for e in encoded]
        for idx in forward_passes(lengths, self.batch_tokens, self.max_batch_size,
                                  self.max_padding, self.pass_cost):
            batch = encoding.pad([encoded[i].ids for i in idx], self.tokenizer.pad_token_id,
                                 self.device)
            with torch.inference_mode():
                result = self.model(**batch, use_cache=False)
            logits = (result.logits if hasattr(result, "logits") else result[0]).float()
            if self.outputs == 1:
                probs = torch.sigmoid(logits[..., 0])
            else:
                probs = torch.softmax(logits, dim=-1)[..., self.positive_label]
            probs = probs.cpu()
            for row, i in enumerate(idx):
                out[i] = probs[row, encoded[i].positions].tolist()
        return out

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        start = time.perf_counter()
        scores: list[Score | None] = [None] * len(samples)
        encoded: list[StepEncoding] = []
        where: list[int] = []
        for i, s in enumerate(samples):
            try:
                e = self.encode(s)
                if not e.positions:
                    raise ValueError(f"no step fits in max_length={self.max_length} tokens")
            except ModelLoadError:
                raise
            except Exception as exc:  # noqa: BLE001 - a bad sample gets its own error Score
                scores[i] = Score.from_error(exc, self.error_value, kind="encode")
                continue
            encoded.append(e)
            where.append(i)
        probs = self.step_probabilities(encoded) if encoded else []
        elapsed = (time.perf_counter() - start) / max(1, len(samples))
        for i, e, p in zip(where, encoded, probs):
            if not all(math.isfinite(v) for v in p):
                scores[i] = Score.from_error("the model returned a non-finite score",
                                             self.error_value, kind="nan")
                continue
            info: dict[str, Any] = {"num_steps": len(p) + e.steps_cut, "tokens": len(e.ids),
                                    "layout": self.layout, "seconds": elapsed}
            if e.steps_cut:
                info["steps_unscored"] = e.steps_cut
                info["truncated"] = f"{e.steps_cut} last step(s) past max_length={self.max_length}"
            scores[i] = Score(aggregate(p, self.aggregate), steps=p, info=info)
        return [s for s in scores if s is not None]

    def close(self) -> None:
        self.model = None
