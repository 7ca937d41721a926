"""Stage 1: find the final answer(s) stated in a completion.

Sources are tried strongest first (see :data:`config.SOURCES`); the first that finds anything
decides. Every ``\\boxed{}`` counts, so a completion cannot hedge with several boxes; for the
other sources the last occurrence counts, because reasoning text often revises itself ("the
answer is 3... no, the answer is 5"). Scanning is linear in the text length.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .config import MathOptions

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_GSM8K = re.compile(r"####\s*([^\n]+)")
_PHRASE = re.compile(
    r"(?:\bfinal\s+answer|\bthe\s+answer|^\s*\**answer\**)\s*(?:is\b|:|=)\s*:?\s*\**\s*",
    re.IGNORECASE | re.MULTILINE,
)
_CHOICE = re.compile(r"\(([A-J])\)|\b([A-J])\)|\\text(?:bf)?\{\(?([A-J])\)?\}")
_NUMBER = re.compile(r"[-\u2212]?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?|[-\u2212]?\.\d+")
# End of a sentence: a period not inside a number, or the start of a new clause.
_SENTENCE_END = re.compile(r"\.(?=\s+[A-Z(]|\s*$)|\s*,?\s+(?:because|since|which|so|as)\s",
                           re.IGNORECASE)


@dataclass(frozen=True)
class Extraction:
    """What a completion states as its answer: the candidates and where they were found."""

    candidates: tuple[str, ...]
    source: str | None


def boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` / ``\\fbox{...}``, nested braces balanced; also the
    brace-less ``\\boxed 5`` form. An unclosed box is ignored."""
    out: list[str] = []
    pos = 0
    n = len(text)
    while True:
        m = _BOX.search(text, pos)
        if m is None:
            return out
        i = m.end()
        if i < n and text[i] == "{":
            depth, j = 0, i
            while j < n:
                c = text[j]
                if c == "\\" and j + 1 < n and text[j + 1] in "{}":
                    j += 2
                    continue
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= n:
                return out
            out.append(text[i + 1:j])
            pos = j + 1
        else:
            m2 = re.match(r"[^\s$]+", text[i:])
            if m2 and text[m.start() + 1:m.end()].strip() in ("boxed",):
                out.append(m2.group(0))
                pos = i + m2.end()
            else:
                pos = i


def _unbox(answer: str, limit: int = 64) -> str:
    """``\\boxed{\\boxed{5}}`` → ``5`` (at most ``limit`` levels; deeper is left to the size
    guard)."""
    for _ in range(limit):
        inner = boxed_contents(answer)
        if len(inner) != 1 or not answer.startswith("\\boxed") or not answer.endswith("}"):
            return answer
        if len(inner[0]) < len(answer) - len("\\boxed{}") - 1:
            return answer
        answer = inner[0].strip()
    return answer


def _trim_phrase(answer: str) -> str:
    """The answer part of "the answer is X. Because ..." (a period inside 3.5 is kept)."""
    m = _SENTENCE_END.search(answer)
    if m:
        answer = answer[:m.start()]
    return answer.strip()


def _strip_delimiters(answer: str) -> str:
    answer = answer.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**")):
        if answer.startswith(left) and answer.endswith(right) and len(answer) > len(left) + len(right) - 1:
            answer = answer[len(left):len(answer) - len(right)].strip()
    return answer.rstrip(".").strip()


def extract(text: str, opts: MathOptions, gold_is_choice: bool = False) -> Extraction:
    """The candidate final answers of ``text``, from the strongest source that has any."""
    if opts.boxed:
        boxes = [_unbox(b.strip()) for b in boxed_contents(text)]
        boxes = [b for b in boxes if b]
        if boxes:
            return Extraction(tuple(boxes), "boxed")
    if opts.answer_tag:
        tags = _ANSWER_TAG.findall(text)
        if tags and tags[-1].strip():
            return Extraction((_strip_delimiters(tags[-1]),), "answer_tag")
    if opts.gsm8k:
        marks = _GSM8K.findall(text)
        if marks and marks[-1].strip():
            return Extraction((_strip_delimiters(marks[-1]),), "gsm8k")
    if opts.answer_phrase:
        last = None
        for last in _PHRASE.finditer(text):
            pass
        if last is not None:
            end = text.find("\n", last.end())
            answer = _strip_delimiters(_trim_phrase(text[last.end():end if end >= 0 else None]))
            if answer:
                return Extraction((answer,), "answer_phrase")
    if opts.choice and gold_is_choice:
        letters = _CHOICE.findall(text)
        if letters:
            return Extraction((next(x for x in letters[-1] if x),), "choice")
    if opts.last_number:
        numbers = _NUMBER.findall(text)
        if numbers:
            return Extraction((numbers[-1].rstrip(",").strip(),), "last_number")
    return Extraction((), None)
