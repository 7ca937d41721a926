"""Stage 1: find the final answer(s) stated in a completion, in time linear in its length.

Where the answer is looked for:

* **Reasoning models.** When the completion has a ``</think>``, only the text after the last
  ``</think>`` states the answer; what the model tried while thinking does not count. A
  ``<think>`` that never closes means no answer was stated after it.
* Fenced code blocks (```` ``` ````) are not prose: a ``\\boxed{}`` in a code comment is ignored.

Sources, strongest first (see :data:`config.SOURCES`); the first that finds anything decides.
Every ``\\boxed{}`` counts, so a completion cannot hedge with several boxes, and an explicit
answer statement ("Final answer: ...", ``<answer>``, ``####``) written *after* the last box counts
beside it (a different value there is a hedge too). For the other sources the last occurrence
counts, because reasoning text revises itself ("the answer is 3... no, the answer is 5").

Every scan here is a single pass (``str.find``/``rfind`` or regexes without nested unbounded
repeats over newlines), and the text an answer phrase may take is capped, so a megabyte of
newlines or of unclosed ``<answer>`` tags is read in milliseconds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .config import MathOptions, make_options

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")
_BRACELESS = re.compile(r"[^\s$]+")
# Answer phrases are read by their shape, not from a list: a determiner, at most two qualifiers
# ("the correct answer", "our final answer"; never "the wrong answer"), adverbs on either side of
# the verb ("the answer is therefore 9", "the answer, then, is 9") and a few verbs of stating. A
# bare "Answer:" starts a line or a sentence ("... left. **Answer: 1250**").
_ADVERB = r"(?:[a-z]+ly|therefore|thus|then|hence|so|now|indeed|still|just|again)"
_NEGATIVE_QUALIFIER = r"(?:wrong|incorrect|false|previous|earlier|initial|old|other|not|no|first|proposed)"
_PHRASE = re.compile(
    r"(?:\b(?:the|our|my|your|final)[ \t]{1,4}(?:(?!" + _NEGATIVE_QUALIFIER + r"\b)[a-z]+[ \t]{1,4}){0,2}?"
    r"answer|(?:^|(?<=[.!?][ \t]))[ \t>#*_]*answer[*_]*)"
    r"(?:[ \t]{0,4},?[ \t]{0,4}" + _ADVERB + r",?)?[ \t]*"
    r"(?:is\b|:|=|would[ \t]+be\b|should[ \t]+be\b|must[ \t]+be\b|will[ \t]+be\b|equals\b)"
    r"(?:[ \t]{0,4},?[ \t]{0,4}" + _ADVERB + r"\b,?)?[ \t]*:?[ \t]*"
    r"|^[ \t#*_]*(?:final[ \t]+)?answer[ \t*_:]*$"  # a heading; the answer on the next line
    # "Answer $9$", "the solution is $x \le 5$": the math right after the phrase
    r"|(?:^[ \t>#*_]*answer|\bthe[ \t]+solutions?[ \t]+(?:is|are))[ \t]+(?=\$|\\[(\[])",
    re.IGNORECASE | re.MULTILINE,
)
# "$x \ge 5$ is the solution", "$7$ is our answer": the math right before the phrase.
_PHRASE_AFTER = re.compile(r"(?:\$[^$\n]{1,300}\$|\\\([^\n]{1,300}?\\\))[ \t]+is[ \t]+(?:the|our)[ \t]+"
                           r"(?:final[ \t]+)?(?:answer|solution)\b", re.IGNORECASE)
# A math span at the very start of a phrase's text: inline on one line, display across lines.
_LEADING_MATH = re.compile(r"\$\$(.{1,1000}?)\$\$|\\\[(.{1,1000}?)\\\]|\$((?:[^$\n\\]|\\.){1,1000})\$"
                           r"|\\\(([^\n]{1,1000}?)\\\)", re.DOTALL)
# Words that withdraw what came before: "\boxed{3} ... wait, that is wrong ... \boxed{4}".
_RETRACTION = re.compile(r"\b(?:wait|actually|oops|mistake|error|incorrect|wrong|correction|"
                         r"re-?check|re-?calculate|re-?examine|on second thought|let me redo)\b",
                         re.IGNORECASE)
_CHOICE = re.compile(r"\(([A-J])\)|\b([A-J])\)|\\text(?:bf)?\{\(?([A-J])\)?\}")
_NUMBER = re.compile(r"(?<![A-Za-z_])(?:[-\u2212]?\d[\d,]*(?:\.\d+)?(?:[ \t]*/[ \t]*\d+)?"
                     r"|[-\u2212]?\.\d+)")
# End of a sentence: a period not inside a number, or the start of a new clause.
# A parenthetical in words after the answer ("12 (since 3 x 4 = 12)") and a value disowned after it
# ("7, not 8") end it too.
_SENTENCE_END = re.compile(r"\.(?=[ \t]+[A-Z(]|[ \t]*$)|[ \t]*,?[ \t]+(?:because|since|which|so|as)"
                           r"[ \t]|(?<=\S)[ \t]+\((?=[A-Za-z]{2,}[ \t,:])|[ \t]*,?[ \t]+(?:and[ \t]+)?not[ \t]",
                           re.IGNORECASE)
# A sentence that names several values and picks one ("12 or 13, most likely 12") hedges.
_HEDGED_SENTENCE = re.compile(r"\b(?:or|maybe|perhaps|possibly|probably|likely|either)\b", re.IGNORECASE)
_HOPE = re.compile(r"\.?[ \t]*I hope it is correct\.?[ \t]*$", re.IGNORECASE)
# Inline and display math, for the last-resort ``last_math`` source. Inline math stays on one
# line; display math may span lines. The bodies are bounded, so no scan can run away.
_MATH_SPAN = re.compile(r"(?<!\\)\$\$(.{1,1000}?)(?<!\\)\$\$|\\\[(.{1,1000}?)\\\]"
                        r"|(?<!\\)\$((?:[^$\n\\]|\\[^\n]){1,1000}?)(?<!\\)\$"
                        r"|\\\(([^\n]{1,1000}?)\\\)", re.DOTALL)
# Two words in a row: prose, not an answer ("The volume of $V$ is 120").
_PROSE = re.compile(r"[A-Za-z]{2,}[ \t]+[A-Za-z]{2,}")
_WORDISH = re.compile(r"[A-Za-z]{3,}")
#: The most characters an answer phrase may take (the rest of a line is never an answer).
PHRASE_WINDOW = 2000
#: More boxes than this in one completion is a flood, not an answer (``too_large``).
MAX_BOXES = 64
_BRACES = re.compile(r"\\[{}]|[{}]")


@dataclass(frozen=True)
class Extraction:
    """What a completion states as its answer: the candidates and where they were found."""

    candidates: tuple[str, ...]
    source: str | None
    #: why the completion cannot be read (too many boxes), else None
    problem: str | None = None


def answer_region(text: str) -> str:
    """The part of a completion that can state the final answer: after the last ``</think>``
    (nothing when a ``<think>`` never closes), with fenced code blocks removed."""
    close = text.rfind("</think>")
    if close >= 0:
        text = text[close + len("</think>"):]
    else:
        start = text.find("<think>")
        if start >= 0:
            text = text[:start]
    if "```" not in text:
        return text
    parts, pos = [], 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            parts.append(text[pos:])
            break
        end = text.find("```", start + 3)
        if end < 0:  # an unclosed fence: keep the text, it may still be prose
            parts.append(text[pos:])
            break
        parts.append(text[pos:start])
        pos = end + 3
    return "\n".join(parts)


def box_spans(text: str, limit: int | None = None) -> list[tuple[str, int]]:
    """``(content, end)`` of every ``\\boxed{...}`` / ``\\fbox{...}`` (at most ``limit``, then
    one more to show there were more); one pass over ``text``."""
    out: list[tuple[str, int]] = []
    pos = 0
    n = len(text)
    while limit is None or len(out) <= limit:
        m = _BOX.search(text, pos)
        if m is None:
            return out
        i = m.end()
        if i < n and text[i] == "{":
            depth, end = 0, -1
            for b in _BRACES.finditer(text, i):  # only the braces, escaped ones skipped
                c = b.group(0)
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        end = b.start()
                        break
            if end < 0:
                return out
            out.append((text[i + 1:end], end + 1))
            pos = end + 1
        else:
            m2 = _BRACELESS.match(text, i)
            if m2 and text[m.start() + 1:m.end()].strip() == "boxed":
                out.append((m2.group(0), m2.end()))
                pos = m2.end()
            else:
                pos = i
    return out


def boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` / ``\\fbox{...}``, nested braces balanced; also the
    brace-less ``\\boxed 5`` form. An unclosed box is ignored."""
    return [content for content, _ in box_spans(text)]


def _unbox(answer: str, limit: int = 64) -> str:
    """``\\boxed{\\boxed{5}}`` → ``5`` (at most ``limit`` levels; deeper is left to the size
    guard)."""
    for _ in range(limit):
        if not answer.startswith("\\boxed") or not answer.endswith("}"):
            return answer
        inner = boxed_contents(answer)
        if len(inner) != 1 or len(inner[0]) < len(answer) - len("\\boxed{}") - 1:
            return answer
        answer = inner[0].strip()
    return answer


def _trim_phrase(answer: str) -> str:
    """The answer part of "the answer is X. Because ..." (a period inside 3.5 is kept)."""
    answer = _HOPE.sub("", answer)
    m = _SENTENCE_END.search(answer)
    if m:
        answer = answer[:m.start()]
    return answer.strip()


def strip_delimiters(answer: str) -> str:
    """Drop math delimiters, Markdown emphasis and a final period around an answer."""
    answer = answer.strip()
    for _ in range(3):
        before = answer
        answer = answer.strip("*_ \t").strip()
        for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"),
                            ('\\"', '\\"'), ('"', '"')):
            if answer.startswith(left) and answer.endswith(right) and len(answer) >= len(left) + len(right):
                answer = answer[len(left):len(answer) - len(right)].strip()
        answer = strip_punctuation(answer)
        if answer == before:
            break
    return answer


def strip_punctuation(answer: str) -> str:
    """Sentence punctuation after an answer (``42.``, ``\\frac13,``), never an ellipsis."""
    answer = answer.rstrip()
    if answer.endswith(("...", "\\dots", "\\ldots", "\\cdots")):
        return answer
    if answer[-1:] in (".", ",", ";") and answer[-2:-1] != "\\":  # "\," is a space
        answer = answer[:-1].rstrip()
    return answer


def value_of_sentence(answer: str) -> str:
    """A "Final Answer:" written as a sentence ("The largest $n$ is 34.") states the value it
    ends on: its last math span, or its last number, whichever ends later."""
    if not _PROSE.search(answer) or _HEDGED_SENTENCE.search(answer):
        return answer
    best = ""
    best_end = -1
    for span in _MATH_SPAN.finditer(answer):
        best_end, best = span.end(), next(g for g in span.groups() if g is not None)
    for num in _NUMBER.finditer(answer):
        if num.end() > best_end:
            best_end, best = num.end(), num.group(0)
    return strip_delimiters(best) if best else answer


def _last_tag(text: str) -> str | None:
    """Content of the last ``<answer>...</answer>`` (case-insensitive), found with rfind."""
    low = text.lower()
    end = low.rfind("</answer>")
    if end < 0:
        return None
    start = low.rfind("<answer>", 0, end)
    if start < 0:
        return None
    return text[start + len("<answer>"):end]


def _last_gsm8k(text: str) -> str | None:
    mark = text.rfind("####")
    if mark < 0:
        return None
    rest = text[mark + 4:mark + 4 + PHRASE_WINDOW].lstrip(" \t#")
    return rest.split("\n", 1)[0]


def last_phrase(text: str) -> tuple[str, int] | None:
    low = text.lower()
    if "answer" not in low and "solution" not in low:
        return None
    last = None
    for last in _PHRASE.finditer(text):
        pass
    after = None
    if "$" in text or "\\(" in text:
        for after in _PHRASE_AFTER.finditer(text):
            pass
    if after is not None and (last is None or after.start() > last.start()):
        span = _LEADING_MATH.match(after.group(0))
        return (next(g for g in span.groups() if g is not None) if span else ""), after.start()
    if last is None:
        return None
    window = text[last.end():last.end() + PHRASE_WINDOW]
    span = _LEADING_MATH.match(window)
    if span and not _trim_phrase(window[span.end():].split("\n", 1)[0]).strip(" \t.,;"):
        # "Answer \[ 9 \]": the whole span (a display one across lines) when it ends the line
        return next(g for g in span.groups() if g is not None).strip(), last.start()
    line = window.split("\n", 1)[0]
    if not line.strip() and "\n" in window:  # "Final Answer:\n42": the answer on the next line
        line = window.lstrip().split("\n", 1)[0]
    return _trim_phrase(line), last.start()


def _one_line_statement(text: str) -> str | None:
    """A completion of one line whose only mathematics is one span at its end ("The identity
    matrix is $I$.", "We find that $x < 3$.") states that span."""
    bare = text.strip()
    if not bare or "\n" in bare or len(bare) > 300:
        return None
    spans = list(_MATH_SPAN.finditer(bare))
    if len(spans) != 1 or bare[spans[0].end():].strip(" \t.") or _NUMBER.search(
            bare[:spans[0].start()]):
        return None
    return next(g for g in spans[0].groups() if g is not None).strip()


def _statement_after(text: str, start: int, opts: MathOptions) -> str | None:
    """An explicit answer statement (tag, ``####``, phrase) in ``text[start:]``, if any."""
    tail = text[start:]
    if opts.answer_tag and (tag := _last_tag(tail)) is not None and tag.strip():
        return strip_delimiters(tag)
    if opts.gsm8k and (mark := _last_gsm8k(tail)) is not None and mark.strip():
        return strip_delimiters(mark)
    if opts.answer_phrase and (found := last_phrase(tail)) is not None:
        answer = value_of_sentence(strip_delimiters(found[0]))
        if answer:
            return answer
    return None


def _choice_letters(text: str) -> list[str]:
    if ")" not in text and "\\text" not in text:
        return []
    return [next(x for x in m if x) for m in _CHOICE.findall(text)]


def _is_option_list(letters: list[str]) -> bool:
    """Whether the last letters mentioned are the options themselves, listed in order
    ("(A) 1 (B) 2 (C) 3 (D) 4"): a restatement, not a choice."""
    k = len(letters)
    for run in range(k, 2, -1):
        tail = letters[k - run:]
        if tail == [chr(ord("A") + j) for j in range(run)]:
            return True
    return False


def _fallback(text: str, opts: MathOptions) -> Extraction:
    """``last_number`` / ``last_math``: whichever occurs last in the text."""
    best: tuple[int, str, str] | None = None
    if getattr(opts, "last_math", False):
        bare = strip_delimiters(text.strip())
        # the whole completion is one short line of mathematics: a bare answer
        if bare and len(bare) <= 200 and "\n" not in bare and not _WORDISH.search(
                re.sub(r"\\[A-Za-z]+", " ", bare)) and not re.search(r"(?<!\\)\$|\\[\[(]", bare):
            return Extraction((bare,), "last_math")
    if opts.last_number:
        num = None
        for num in _NUMBER.finditer(text):
            pass
        if num is not None:
            best = (num.end(), num.group(0).rstrip(",").strip(), "last_number")
    if getattr(opts, "last_math", False):
        span = None
        tail_start = max(0, len(text) - 2 * PHRASE_WINDOW)  # the answer ends the text
        for span in _MATH_SPAN.finditer(text, tail_start):
            pass
        if span is not None:
            body = next(g for g in span.groups() if g is not None).strip()
            inner = boxed_contents(body)
            body = _unbox(inner[-1].strip()) if inner else body
            if body and (best is None or span.end() >= best[0]):
                best = (span.end(), body, "last_math")
    if best is None:
        return Extraction((), None)
    return Extraction((strip_punctuation(best[1]),), best[2])


def extract(text: str, opts: MathOptions, gold_is_choice: bool = False) -> Extraction:
    """The candidate final answers of ``text``, from the strongest source that has any."""
    text = answer_region(text)
    if opts.boxed:
        found = box_spans(text, MAX_BOXES)
        if len(found) > MAX_BOXES:
            return Extraction((), None, f"more than {MAX_BOXES} boxed answers")
        # a retraction between two boxes withdraws the earlier ones (a self-correction)
        for k in range(len(found) - 1, 0, -1):
            start = text.rfind("\\", 0, found[k][1] - len(found[k][0]) - 1)
            if _RETRACTION.search(text, found[k - 1][1], max(start, found[k - 1][1])):
                found = found[k:]
                break
        boxes = [strip_punctuation(_unbox(b.strip())) if len(b) <= opts.max_answer_chars
                 else b.strip() for b, _ in found]
        boxes = [b for b in boxes if b]
        if boxes:
            later = _statement_after(text, found[-1][1], opts)
            if later and later not in boxes:
                boxes.append(later)
            return Extraction(tuple(boxes), "boxed")
    if opts.answer_tag:
        tag = _last_tag(text)
        if tag is not None and tag.strip():
            inner = boxed_contents(tag)
            return Extraction((_unbox(inner[-1].strip()) if inner else strip_delimiters(tag),),
                              "answer_tag")
    if opts.gsm8k:
        mark = _last_gsm8k(text)
        if mark is not None and strip_delimiters(mark):
            return Extraction((strip_delimiters(mark),), "gsm8k")
    if opts.answer_phrase:
        found_phrase = last_phrase(text)
        if found_phrase is not None:
            answer = value_of_sentence(strip_delimiters(found_phrase[0]))
            if answer:
                return Extraction((answer,), "answer_phrase")
    if opts.answer_phrase and (stated := _one_line_statement(text)):
        return Extraction((strip_punctuation(stated),), "answer_phrase")
    if opts.choice and gold_is_choice:
        letters = _choice_letters(text)
        if letters and not _is_option_list(letters):
            return Extraction((letters[-1],), "choice")
    return _fallback(text, opts)


def extract_answer(text: str, preset: str = "default", **options: object) -> str | None:
    """The final answer ``text`` states, as the ``math`` reward reads it, or None.

    The public entry point for other rewards (format checks, shaping) that need the answer
    without judging it. With several distinct boxes the last one is returned.
    """
    found = extract(text, make_options(preset, **options))
    return found.candidates[-1] if found.candidates else None

