"""Text as rewards should see it: a completion without the chat template's end tokens.

Trainers decode rollouts with ``skip_special_tokens=False`` more often than not (TRL's vLLM path,
verl's ``decode`` of the response ids, OpenRLHF's queries), so completions arrive as
``"#### 48<|im_end|>"`` or ``"The answer is 48</s>"``. Every text reward would otherwise have to
know every model family's end-of-turn token, and one that forgot would read ``48<|im_end|>`` as
unparsable and pay 0.0 for a right answer. :func:`strip_end_tokens` removes them once, at the
spine (``Sample.completion_text``), so math, code, exact_match, regex and function rewards all
see the same clean text.

Only *trailing* tokens are removed: text before an end token mid-completion is left as written
(a token in the middle is the policy's own text, not the template's). The scan walks back from
the end and looks at a bounded window per token, so it is linear in the number of tokens removed
and never scans the whole completion.
"""
from __future__ import annotations

import re

END_TOKENS: tuple[str, ...] = (
    "<|im_end|>",              # ChatML: Qwen, Yi, OpenHermes, SmolLM
    "<|endoftext|>",           # GPT-2/NeoX/Qwen base, Phi
    "<|eot_id|>",              # Llama 3
    "<|eom_id|>",              # Llama 3 tool-call end
    "<|end_of_text|>",         # Llama 3 base
    "<|end|>",                 # Phi-3
    "<|return|>",              # gpt-oss (harmony)
    "<|end_of_turn|>",
    "<end_of_turn>",           # Gemma 2/3
    "<turn|>",                 # Gemma 4 (asymmetric bars)
    "<eos>",                   # Gemma
    "</s>",                    # Llama 2, Mistral, T5
    "<|end▁of▁sentence|>",     # DeepSeek (ASCII bars)
    "<｜end▁of▁sentence｜>",   # DeepSeek-V3/R1 (full-width bars, as its tokenizer writes them)
    "<｜end_of_sentence｜>",
    "[EOS]",
    "<pad>",
    "<|pad|>",
    "[PAD]",
)
"""End-of-turn, end-of-text and padding tokens of common chat templates, removed from the end of
completions. Anything else of the special-token shape ``<|name|>`` / ``<｜name｜>`` is removed
too (see :data:`_SPECIAL_SHAPE`)."""

_SPECIAL_SHAPE = re.compile(r"<[|｜][A-Za-z0-9_▁\-.:]{1,40}[|｜]>")
"""The shape of a tokenizer's special token (``<|im_start|>``, ``<|assistant|>``,
``<｜Assistant｜>``): nothing a model writes as ordinary text, so safe to drop from the end."""

_WINDOW = 48  # longer than any special token above


def strip_end_tokens(text: str) -> str:
    """``text`` without trailing chat-template special tokens (and the whitespace around them).

    >>> strip_end_tokens("#### 48<|im_end|>")
    '#### 48'
    >>> strip_end_tokens("The answer is 48.</s></s>")
    'The answer is 48.'

    Text without such a token is returned unchanged (trailing whitespace included), so a reward
    that cares about exact trailing whitespace (``regex`` with ``strip=False``) sees what it saw.
    """
    end = len(text)
    stripped_any = False
    while True:
        e = end
        while e > 0 and text[e - 1].isspace():
            e -= 1
        token_len = _token_at_end(text, e)
        if not token_len:
            break
        end = e - token_len
        stripped_any = True
    if not stripped_any:
        return text
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return text[:end]


def _token_at_end(text: str, end: int) -> int:
    """Length of the special token ending at ``end``, or 0."""
    if end == 0 or text[end - 1] != ">" and not text.endswith(("[EOS]", "[PAD]"), 0, end):
        return 0
    for token in END_TOKENS:
        if text.endswith(token, 0, end):
            return len(token)
    start = text.rfind("<", max(0, end - _WINDOW), end)
    if start >= 0 and _SPECIAL_SHAPE.fullmatch(text, start, end):
        return end - start
    return 0
