"""HF ``generate`` with the options a caller passes and no others: not the sampling settings a
model's ``generation_config.json`` carries."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def plain_generation(model: Any) -> Iterator[None]:
    """While inside, ``model.generate`` takes the library's defaults for every option the call
    leaves out, not the model's own generation config; the end, start and padding tokens are
    kept.

    A chat model's generation config usually carries sampling settings (Qwen2.5-Instruct:
    temperature 0.7, top_p 0.8, top_k 20, repetition_penalty 1.05; Llama 3: temperature 0.6,
    top_p 0.9), and ``generate`` applies each one a call does not pass. A policy trainer
    computes its log-probabilities from the plain softmax at its own temperature, so a
    repetition penalty, min-p or n-gram ban left in its sampling draws the rollouts from
    another distribution than the one it trains; a greedy evaluation, a verifier's own
    solution or a judge's verdict would likewise follow a file nobody set for it. A PEFT model
    is handled through the model it wraps, whose config ``generate`` reads."""
    from transformers import GenerationConfig

    target = model.get_base_model() if hasattr(model, "get_base_model") else model
    original = target.generation_config
    target.generation_config = GenerationConfig(**{
        key: getattr(original, key, None)
        for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")})
    try:
        yield
    finally:
        target.generation_config = original
