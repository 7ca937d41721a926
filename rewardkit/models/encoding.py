"""Prompt + completion → token ids, as reward models read them.

* **Chat template** (when the tokenizer has one): a string prompt becomes one user message and a
  string completion one assistant message; chat messages are used as they are. The rendered
  conversation is tokenised without adding special tokens again (the template has them).
* **Plain format** (no chat template): ``plain_format.format(prompt=..., completion=...)``,
  default ``"{prompt}{completion}"``, followed by the EOS token — the text TRL's RewardTrainer
  trains on for non-conversational data (it appends EOS), so models trained there score the same.

Truncation keeps the end of the completion, where a reward model reads its score: when prompt +
completion pass ``max_length`` tokens, the prompt keeps at most half the budget (its first
tokens) and the completion keeps the rest (its last tokens). What was cut is reported.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from ..types import Text, message_text

PLAIN_FORMAT = "{prompt}{completion}"


@dataclass
class Encoded:
    """Token ids of one prompt + completion, and what truncation removed."""

    ids: list[int]
    prompt_tokens: int | None
    """Tokens of the prompt (None when the text fit ``max_length``: the boundary was not
    needed, so it was not computed)."""
    dropped_prompt: int = 0
    dropped_completion: int = 0

    @property
    def truncated(self) -> bool:
        return bool(self.dropped_prompt or self.dropped_completion)

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tokens": len(self.ids)}
        if self.truncated:
            out["truncated"] = {"prompt_tokens_dropped": self.dropped_prompt,
                                "completion_tokens_dropped": self.dropped_completion,
                                "kept": "start of the prompt, end of the completion"}
        return out


def as_messages(value: Text, role: str) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    return [dict(m) for m in value]


def as_text(value: Text) -> str:
    """A plain-format string: the text itself, or the messages' contents joined by newlines."""
    if isinstance(value, str):
        return value
    return "\n".join(message_text(m.get("content")) for m in value)


def render(tokenizer: Any, prompt: Text, completion: Text, use_chat_template: bool = True,
           plain_format: str = PLAIN_FORMAT, add_eos: bool = True) -> tuple[str, str]:
    """The model's input text split in two: ``(prefix, full)``, where ``prefix`` is the part
    before the completion's content (prompt and, with a template, the assistant header)."""
    full = render_full(tokenizer, prompt, completion, use_chat_template, plain_format, add_eos)
    if _templated(tokenizer, use_chat_template):
        prompt_messages = as_messages(prompt, "user")
        prefix = tokenizer.apply_chat_template(prompt_messages, tokenize=False,
                                               add_generation_prompt=True)
        if not full.startswith(prefix):
            prefix = tokenizer.apply_chat_template(prompt_messages, tokenize=False)
            if not full.startswith(prefix):
                prefix = ""
        return prefix, full
    return plain_format.split("{completion}")[0].format(prompt=as_text(prompt)), full


def render_full(tokenizer: Any, prompt: Text, completion: Text, use_chat_template: bool = True,
                plain_format: str = PLAIN_FORMAT, add_eos: bool = True) -> str:
    """The whole text of :func:`render`, without its prefix (which only truncation needs)."""
    if _templated(tokenizer, use_chat_template):
        messages = as_messages(prompt, "user") + as_messages(completion, "assistant")
        return tokenizer.apply_chat_template(messages, tokenize=False)
    full = plain_format.format(prompt=as_text(prompt), completion=as_text(completion))
    eos = getattr(tokenizer, "eos_token", None)
    if add_eos and eos and not full.endswith(eos):
        full += eos
    return full


def _templated(tokenizer: Any, use_chat_template: bool) -> bool:
    return bool(use_chat_template and getattr(tokenizer, "chat_template", None))


def encode_text(tokenizer: Any, prefix: str, full: str, max_length: int | None,
                plain: bool) -> Encoded:
    """Tokenise ``full`` (with the tokenizer's BOS in plain format) and cut it to
    ``max_length`` keeping the end of the completion. The prompt/completion boundary is the
    longest common prefix of the token ids of ``prefix`` and ``full``."""
    return encode_texts(tokenizer, [full], lambda _: prefix, max_length, plain)[0]


def encode_texts(tokenizer: Any, fulls: Sequence[str], prefix_of: Callable[[int], str],
                 max_length: int | None, plain: bool) -> list[Encoded]:
    """:func:`encode_text` of many texts in one tokenizer call (a fast tokenizer encodes a list
    in one call into its Rust core, instead of paying Python's per-call overhead per sample).
    ``prefix_of(i)`` gives text ``i``'s prefix; it is rendered and tokenised only for the texts
    longer than ``max_length``, where the boundary decides what is kept (the others get
    ``prompt_tokens=None``)."""
    special = plain
    rows = [list(ids) for ids in tokenizer(list(fulls), add_special_tokens=special).input_ids]
    out = []
    for i, ids in enumerate(rows):
        if max_length is None or len(ids) <= max_length:
            out.append(Encoded(ids, None))
            continue
        prefix = prefix_of(i)
        head = list(tokenizer(prefix, add_special_tokens=special).input_ids) if prefix else []
        n_prompt = 0
        for a, b in zip(head, ids):
            if a != b:
                break
            n_prompt += 1
        out.append(truncate(ids, n_prompt, max_length))
    return out


def truncate(ids: list[int], n_prompt: int, max_length: int | None) -> Encoded:
    """Keep at most ``max_length`` ids: the prompt's first ids (up to half the budget, or all
    of it when the completion is shorter) and the completion's last ids."""
    if max_length is None or len(ids) <= max_length:
        return Encoded(ids, n_prompt)
    prompt, completion = ids[:n_prompt], ids[n_prompt:]
    keep_c = min(len(completion), max_length - min(len(prompt), max_length // 2))
    keep_p = max_length - keep_c
    kept = prompt[:keep_p] + (completion[len(completion) - keep_c:] if keep_c else [])
    return Encoded(kept, min(keep_p, len(prompt)), len(prompt) - min(keep_p, len(prompt)),
                   len(completion) - keep_c)


def encode_with_completion_start(tokenizer: Any, prefix: str, full: str, plain: bool
                                 ) -> tuple[list[int], list[tuple[int, int]], int]:
    """``full``'s token ids, their character offsets, and the index of the completion's first
    token: the first whose text starts at or after ``prefix`` ends (a token straddling the
    boundary counts with the prompt). Needs a fast tokenizer (offsets). The first token of a
    text is never a completion token: nothing comes before it to predict it from."""
    enc = tokenizer(full, add_special_tokens=plain, return_offsets_mapping=True)
    ids, offsets = list(enc.input_ids), [tuple(o) for o in enc.offset_mapping]
    begin = len(prefix)
    first = next((k for k, (a, b) in enumerate(offsets) if a >= begin and (b > a or k > 0)),
                 len(ids))
    return ids, offsets, max(first, 1)


def token_budget_batches(lengths: Sequence[int], batch_tokens: int,
                         max_batch_size: int | None = None, max_padding: float | None = None,
                         min_rows: int = 8) -> Iterator[list[int]]:
    """Indices grouped into batches whose padded size (longest × count) stays within
    ``batch_tokens``, longest first. Sorting by length keeps padding small: a batch of
    varied lengths padded to its longest wastes compute on pad tokens (the same idea as the
    length-grouped sampling of HF Trainer and vLLM's token budget). A sequence longer than the
    budget forms a batch of its own.

    ``max_padding`` (a fraction) also starts a new batch, once the current one holds
    ``min_rows``, when the next row would be padded by more than that share of the batch's
    width: on a CPU a pad token costs as much as a real one, while a forward pass of a few
    more rows costs little; on a GPU a wider batch is nearly free, so leave it None there."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batch: list[int] = []
    longest = 0
    for i in order:
        n = max(1, lengths[i])
        width = max(longest, n)
        full = max_batch_size is not None and len(batch) >= max_batch_size
        ragged = (max_padding is not None and len(batch) >= min_rows
                  and width - n > max_padding * width)
        if batch and (width * (len(batch) + 1) > batch_tokens or full or ragged):
            yield batch
            batch, width = [], n
        batch.append(i)
        longest = width
    if batch:
        yield batch


def unique_rows(rows: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """``(first, owner)``: the index of the first occurrence of each distinct row, and for
    every row the position in ``first`` of its twin. Scorers run each distinct row once, so
    identical inputs get bit-identical scores whatever the batch layout: a forward pass's
    float rounding depends on the padded width and the batch's other rows, which made
    identical completions "win" a pairwise comparison by noise."""
    seen: dict[tuple[int, ...], int] = {}
    first: list[int] = []
    owner: list[int] = []
    for i, row in enumerate(rows):
        key = tuple(row)
        if key not in seen:
            seen[key] = len(first)
            first.append(i)
        owner.append(seen[key])
    return first, owner


def pad(rows: Sequence[Sequence[int]], pad_id: int, device: Any,
        labels: Sequence[Sequence[int]] | None = None) -> dict[str, Any]:
    """Right-padded ``input_ids`` and ``attention_mask`` (and ``labels`` padded with -100)."""
    import torch

    width = max(len(r) for r in rows)
    # One tensor from nested lists: a copy per row would cost a tensor per sample.
    ids = torch.tensor([[*r, *[pad_id] * (width - len(r))] for r in rows], dtype=torch.long)
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=torch.long)
    out = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
    if labels is not None:
        lab = torch.tensor([[*r, *[-100] * (width - len(r))] for r in labels], dtype=torch.long)
        out["labels"] = lab.to(device)
    return out
