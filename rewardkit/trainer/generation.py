"""Sampling completions: ``G`` per prompt with HF ``generate`` (batched, KV cache, prompts
left-padded to the longest), and the bookkeeping the loss needs (masks, truncation, texts).

The GPU path, ``generation_backend: vllm``, lives in :mod:`.vllm_generation` and returns the
same :class:`Rollout`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ..runtime.decoding import plain_generation


@dataclass
class GenerationOptions:
    """How to sample. ``top_k = 0`` and ``top_p = 1`` disable those filters."""

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: Sequence[str] = ()


@dataclass
class Rollout:
    """A batch of sampled completions, grouped: rows ``i*G .. i*G+G-1`` share prompt ``i``.

    Attributes:
        prompt_ids: ``[B, P]`` left-padded prompt tokens; ``prompt_mask`` marks real tokens.
        completion_ids: ``[B, T]`` sampled tokens; ``completion_mask`` is 1 up to and including
            the end-of-sequence token (or the stop string), 0 after.
        truncated: ``[B]`` True where the completion hit ``max_new_tokens`` without ending.
        texts: decoded completions (special tokens and stop strings' tail removed).
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    truncated: torch.Tensor
    texts: list[str]

    def __len__(self) -> int:
        return self.completion_ids.shape[0]

    def select(self, index: torch.Tensor, texts: bool = True) -> "Rollout":
        """The rows at ``index`` (a LongTensor), e.g. the groups a filter kept. ``texts=False``
        leaves the texts out, for a forward pass: picking them reads ``index`` back to the
        host, a wait for the device when ``index`` lives there."""
        picked = [self.texts[i] for i in index.tolist()] if texts else []
        return Rollout(self.prompt_ids[index], self.prompt_mask[index], self.completion_ids[index],
                       self.completion_mask[index], self.truncated[index], picked)


def rollout_stats(rollout: Rollout) -> dict[str, float]:
    """Mean completion length and the share cut at ``max_new_tokens``."""
    lengths = rollout.completion_mask.sum(-1).float()
    return {"completion/length": lengths.mean().item(),
            "completion/truncated": rollout.truncated.float().mean().item()}


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int,
             device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack token lists into ``[N, max_len]`` ids and mask, padded on the left."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, seq in enumerate(sequences):
        if seq:
            ids[i, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
            mask[i, width - len(seq):] = 1
    return ids.to(device), mask.to(device)


def completion_mask(completion_ids: torch.Tensor, eos_ids: Sequence[int],
                    stopped: torch.Tensor | None = None,
                    pad_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask up to and including the first end-of-sequence token, and whether each row ended.

    ``stopped`` marks rows that ended on a stop string instead; those are kept up to their last
    non-pad token (``generate`` pads a row once it stops)."""
    is_eos = torch.isin(completion_ids, torch.tensor(list(eos_ids), device=completion_ids.device))
    steps = completion_ids.shape[1]
    positions = torch.arange(steps, device=completion_ids.device).expand_as(completion_ids)
    first_eos = torch.where(is_eos, positions, torch.full_like(positions, steps)).min(dim=1).values
    ended = first_eos < steps
    mask = positions <= first_eos.unsqueeze(1)
    if stopped is not None and pad_id is not None:
        stop_only = stopped & ~ended
        if stop_only.any():
            not_pad = completion_ids != pad_id
            last = torch.where(not_pad, positions, torch.full_like(positions, -1)).max(dim=1).values
            mask = torch.where(stop_only.unsqueeze(1), positions <= last.unsqueeze(1), mask)
        ended = ended | stopped
    return mask.long(), ended


def _cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    cuts = [text.find(s) + len(s) for s in stop if s and s in text]
    if not cuts:
        return text, False
    return text[:min(cuts)], True


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    eos = model.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    if not ids:
        raise ValueError("the model and tokenizer define no end-of-sequence token; set "
                         "generation_config.eos_token_id")
    return sorted(ids)


@torch.no_grad()
def generate(model: Any, tokenizer: Any, prompt_ids: Sequence[Sequence[int]], group_size: int,
             options: GenerationOptions, device: torch.device, synced: bool = False) -> Rollout:
    """Sample ``group_size`` completions for each prompt with HF ``generate``.

    ``synced``: the model is sharded across processes (FSDP), so every process keeps calling
    the forward until all have finished (``generate(synced_gpus=True)``); otherwise a process
    that stopped early would leave the others waiting in a collective."""
    pad_id = tokenizer.pad_token_id
    ids, mask = left_pad(prompt_ids, pad_id, device)
    ids = ids.repeat_interleave(group_size, dim=0)
    mask = mask.repeat_interleave(group_size, dim=0)
    eos_ids = _eos_ids(model, tokenizer)
    kwargs: dict[str, Any] = dict(
        do_sample=True, temperature=options.temperature, top_p=options.top_p,
        top_k=options.top_k or None, max_new_tokens=options.max_new_tokens,
        pad_token_id=pad_id, eos_token_id=eos_ids,
    )
    if options.stop:
        kwargs.update(stop_strings=list(options.stop), tokenizer=tokenizer)
    if synced:
        kwargs["synced_gpus"] = True
    was_training = model.training
    model.eval()
    with plain_generation(model):
        out = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    model.train(was_training)
    completion = out[:, ids.shape[1]:]
    if completion.shape[1] == 0:
        completion = torch.full((ids.shape[0], 1), pad_id, dtype=torch.long, device=device)
    return finish_rollout(ids, mask, completion, tokenizer, eos_ids, options)


def finish_rollout(ids: torch.Tensor, mask: torch.Tensor, completion: torch.Tensor,
                   tokenizer: Any, eos_ids: Sequence[int], options: GenerationOptions) -> Rollout:
    """Masks, truncation flags and texts of sampled completions (``[B, T]``, right-padded with
    the pad token), whichever engine sampled them."""
    device = completion.device
    pad_id = tokenizer.pad_token_id
    stopped = torch.zeros(completion.shape[0], dtype=torch.bool, device=device)
    if options.stop:
        raw = tokenizer.batch_decode(completion, skip_special_tokens=True)
        stopped = torch.tensor([_cut_at_stop(t, options.stop)[1] for t in raw], device=device)
    cmask, ended = completion_mask(completion, eos_ids, stopped, pad_id)
    texts = tokenizer.batch_decode(torch.where(cmask.bool(), completion, pad_id),
                                   skip_special_tokens=True)
    if options.stop:
        texts = [_cut_at_stop(t, options.stop)[0] for t in texts]
    return Rollout(ids, mask, completion, cmask, ~ended, texts)


def concat_rollouts(parts: Sequence[Rollout], pad_id: int) -> Rollout:
    """Join rollouts of different widths (dynamic sampling refills a batch over several rounds):
    prompts re-padded on the left, completions on the right."""
    if len(parts) == 1:
        return parts[0]
    p_width = max(r.prompt_ids.shape[1] for r in parts)
    c_width = max(r.completion_ids.shape[1] for r in parts)

    def pad(t: torch.Tensor, width: int, value: int, left: bool) -> torch.Tensor:
        extra = width - t.shape[1]
        return torch.nn.functional.pad(t, (extra, 0) if left else (0, extra), value=value)

    return Rollout(
        torch.cat([pad(r.prompt_ids, p_width, pad_id, True) for r in parts]),
        torch.cat([pad(r.prompt_mask, p_width, 0, True) for r in parts]),
        torch.cat([pad(r.completion_ids, c_width, pad_id, False) for r in parts]),
        torch.cat([pad(r.completion_mask, c_width, 0, False) for r in parts]),
        torch.cat([r.truncated for r in parts]),
        [t for r in parts for t in r.texts],
    )
