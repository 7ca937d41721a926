"""A bare final answer checked against the model's own worked solutions (``implicit_reward``
with ``verify="generate"``).

A language model of worked solutions checks a worked completion token by token, but a bare
answer ("89+1+7=" → "97") asks it to add every number in one token: a small model cannot, and
its likelihood of a bare answer is near chance as a reward. So the model first writes its own
worked solutions from the prompt (beam search: its ``num_solutions`` most likely ones; one is
greedy decoding), and the completion's answer is put in place of each solution's final answer.
The reward is the log of the probability that the model reaches that answer along the
solutions it found::

    value = beta * log Σ_b π(steps_b, answer | prompt)

the marginal over reasoning paths that self-consistency (Wang et al. 2022) estimates by
sampling and voting, here summed exactly over the found paths. Why a marginal, not a vote or
an exact-match check: it stays a graded reward, and a pair of answers is ranked by which one
the model's likely paths lead to more surely — a wrong answer that no likely path reaches
scores far below the right one even when the model's single best path slipped elsewhere.

The model's final answer is the last match of ``answer_pattern`` in its solution (GSM8K's
convention: the last number). A solution that does not end within ``max_new_tokens`` is no
solution and is left out; a prompt whose solutions all fail to end or to hold an answer gets an
error Score that says which.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..runtime.decoding import plain_generation
from . import encoding

VERIFY_MODES = ("likelihood", "generate")
ANSWER_PATTERN = r"-?\d+(?:\.\d+)?"
"""A number: what a bare final answer is by default."""


@dataclass(frozen=True)
class OwnSolutions:
    """What the model wrote for one prompt: its finished solutions, best first, and how many
    beams did not end within the token budget."""

    texts: list[str]
    unfinished: int


def is_bare_answer(completion: Any, pattern: re.Pattern[str]) -> bool:
    """A completion that is nothing but a final answer (the whole stripped text matches)."""
    return isinstance(completion, str) and pattern.fullmatch(completion.strip()) is not None


def with_answer(solution: str, answer: str, pattern: re.Pattern[str]) -> str | None:
    """``solution`` with its final answer (the last match of ``pattern``) replaced by
    ``answer``; None when it holds no answer."""
    last = None
    for last in pattern.finditer(solution):
        pass
    if last is None:
        return None
    return solution[:last.start()] + answer + solution[last.end():]


def generate(model: Any, tokenizer: Any, prefixes: Sequence[str], plain: bool,
             num_solutions: int, max_new_tokens: int, batch_tokens: int,
             max_batch_size: int | None, device: Any) -> list[OwnSolutions]:
    """Each prefix's ``num_solutions`` most likely continuations (beam search; greedy for
    one), batched under ``batch_tokens`` (a prompt costs its beams × (its tokens +
    ``max_new_tokens``)), left-padded as a decoder-only model generates."""
    import torch

    rows = [list(ids) for ids in tokenizer(list(prefixes), add_special_tokens=plain).input_ids]
    eos = end_ids(model, tokenizer)
    out = [OwnSolutions([], 0) for _ in rows]
    costs = [num_solutions * (len(r) + max_new_tokens) for r in rows]
    for idx in encoding.token_budget_batches(costs, batch_tokens, max_batch_size):
        width = max(len(rows[i]) for i in idx)
        pad = tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(rows[i])) + rows[i] for i in idx],
                           dtype=torch.long, device=device)
        mask = torch.tensor([[0] * (width - len(rows[i])) + [1] * len(rows[i]) for i in idx],
                            dtype=torch.long, device=device)
        with torch.inference_mode(), plain_generation(model):
            got = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                 num_beams=num_solutions, num_return_sequences=num_solutions,
                                 max_new_tokens=max_new_tokens, pad_token_id=pad,
                                 eos_token_id=sorted(eos))
        new = got[:, width:].tolist()
        for j, i in enumerate(idx):
            texts, unfinished = [], 0
            for seq in new[j * num_solutions:(j + 1) * num_solutions]:
                end = next((k for k, t in enumerate(seq) if t in eos), None)
                if end is None:
                    unfinished += 1
                    continue
                texts.append(tokenizer.decode(seq[:end], skip_special_tokens=True))
            out[i] = OwnSolutions(texts, unfinished)
    return out


def end_ids(model: Any, tokenizer: Any) -> set[int]:
    """The tokens that end a generation: the model's generation config's and the tokenizer's
    end-of-sequence tokens."""
    ends: set[int] = set()
    for source in (getattr(getattr(model, "generation_config", None), "eos_token_id", None),
                   tokenizer.eos_token_id):
        if isinstance(source, int):
            ends.add(source)
        elif source:
            ends.update(int(t) for t in source)
    if not ends:
        raise ValueError("the model and its tokenizer name no end-of-sequence token, so a "
                         "generated solution cannot be told to have ended; set the "
                         "tokenizer's eos_token")
    return ends
