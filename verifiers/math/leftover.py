"""Work left undone: an answer that a trivial rewrite would still shorten is not in final form.

``final_form`` already refuses arithmetic on plain numbers (``3+4``, ``\\sqrt{16}``). This module
finds the simplifications a grader would still ask for in an answer with radicals or variables,
each a rewrite any student would do without thinking:

* a fraction whose numerator and denominator share a factor: ``\\frac{(x-4)(x+4)}{x+4}``,
  ``\\frac{6\\sqrt3}{3}``, ``\\frac{2x}{4}``;
* a square root of an integer with a square factor: ``3\\sqrt{8}``, ``\\sqrt{12}``;
* like terms not combined: ``x^2+3x+3x+9``, ``2\\sqrt3+3\\sqrt3``, ``x+3+4``;
* a sum with a product of a bracketed sum left in it, when the gold is written without brackets:
  ``x(x-5)+6`` for ``x^2-5x+6``.

It reads the written answer (its canonical text), not its value: "simplest form" is about how the
answer is written. It is applied only when the gold itself passes the same checks, so a gold
written as ``\\sqrt{8}`` accepts ``\\sqrt{8}``.
"""
from __future__ import annotations

import math
import re

from .cleaning import split_top

_SQRT = re.compile(r"\\sqrt(?:\{(\d+)\}|(\d))")
_FRAC = re.compile(r"\\frac(?=\{)")
_COEFFICIENT = re.compile(r"^\d+(?:\.\d+)?")
_FACTOR = re.compile(r"\\sqrt(?:\{[^{}]*\}|\d)|\\[A-Za-z]+|[A-Za-z](?:\^(?:\{[^{}]*\}|\w))?")


def _group(text: str, start: int) -> tuple[str, int] | None:
    """The content of the balanced ``{...}`` or ``(...)`` at ``start``, and the index after it."""
    if start >= len(text) or text[start] not in "{(":
        return None
    opening = text[start]
    closing = "}" if opening == "{" else ")"
    depth = 0
    for k in range(start, len(text)):
        if text[k] == opening:
            depth += 1
        elif text[k] == closing:
            depth -= 1
            if depth == 0:
                return text[start + 1:k], k + 1
    return None


def _terms(text: str) -> list[str]:
    """Top-level terms of a sum (signs dropped), or ``[text]`` when it is no sum."""
    return [t for t in split_top(text, "+-") if t]


def _factors(text: str) -> tuple[int, set[str]]:
    """The integer coefficient and the other factors of a product (a sum is one factor)."""
    if len(_terms(text)) > 1:
        return 1, {text}
    m = _COEFFICIENT.match(text)
    coefficient = int(m.group(0)) if m and "." not in m.group(0) else 1
    rest = text[m.end():] if m else text
    found: set[str] = set()
    k = 0
    while k < len(rest):
        group = _group(rest, k)
        if group is not None:
            found.add(group[0])
            k = group[1]
            continue
        f = _FACTOR.match(rest, k)
        if f is None:
            k += 1
            continue
        token = f.group(0)
        found.add(token.split("^")[0] if not token.startswith("\\") else token)
        k = f.end()
    return coefficient, found - {"\\cdot", "\\times"}


def _shared_factor(text: str) -> bool:
    for m in _FRAC.finditer(text):
        num = _group(text, m.end())
        den = _group(text, num[1]) if num else None
        if num is None or den is None:
            continue
        (cn, fn), (cd, fd) = _factors(num[0]), _factors(den[0])
        if fn & fd or math.gcd(cn, cd) > 1:
            return True
    return False


def _square_in_radical(text: str) -> bool:
    for m in _SQRT.finditer(text):
        n = int(m.group(1) or m.group(2))
        if 0 < n < 10**12 and any(n % (k * k) == 0 for k in range(2, min(math.isqrt(n), 10**4) + 1)):
            return True
    return False


def _like_terms(text: str) -> bool:
    terms = _terms(text)
    if len(terms) < 2:
        return False
    keys = [_COEFFICIENT.sub("", t).removeprefix("\\cdot").removeprefix("\\times") for t in terms]
    return len(set(keys)) < len(keys)


_PRODUCT_OF_SUM = re.compile(r"(?:(?<![\\A-Za-z])[A-Za-z]|\d|\))\(")


def _partly_expanded(text: str) -> bool:
    """A sum of which one term multiplies a bracketed sum: ``x(x-5)+6``."""
    terms = _terms(text)
    if len(terms) < 2:
        return False
    for term in terms:
        for m in _PRODUCT_OF_SUM.finditer(term):
            inner = _group(term, m.end() - 1)
            if inner is not None and len(_terms(inner[0])) > 1:
                return True
    return False


def leftover_work(text: str, gold: str) -> str | None:
    """Which simplification the answer ``text`` still leaves to do, or None. ``gold`` is the
    gold's canonical text: nothing is asked of an answer that the gold does not do itself."""
    if text == gold or not any(c in text for c in "\\+-("):
        return None  # the gold's own form, or a plain number or name: nothing left to do
    checks = (
        (_shared_factor, "a fraction whose numerator and denominator share a factor"),
        (_square_in_radical, "a square root with a square factor left inside"),
        (_like_terms, "like terms left uncombined"),
    )
    for check, what in checks:
        if check(text) and not check(gold):
            return what
    if "(" not in gold and _partly_expanded(text):
        return "a product left unexpanded in a sum"
    return None
