"""Cheap checks that run before any parsing, so that no input can make sympy hang or eat memory.

They look at the string only (linear time) and answer ``too_large`` for: long answers, deep
nesting (3,000 parentheses, 500 nested ``\\frac``), and numbers whose size can be estimated to be
huge before anything is evaluated (``9^{9^{9^9}}``, ``100000!``, ``10^{10^{6}}``). The worker's
deadline and memory limit remain the backstop for anything these miss.
"""
from __future__ import annotations

import math
import re

_OPEN = "([{"
_CLOSE = ")]}"
_FACTORIAL = re.compile(r"(\d+)\s*\)?\s*!")
_INT = re.compile(r"\d+")
_GROUP_FACTORIAL = re.compile(r"[)}]\s*!")


def nesting_depth(s: str) -> int:
    """Deepest nesting of ``()[]{}`` in ``s`` (500 nested ``\\frac`` nest 500 braces deep)."""
    depth = best = 0
    for c in s:
        if c in _OPEN:
            depth += 1
            if depth > best:
                best = depth
        elif c in _CLOSE:
            depth = max(0, depth - 1)
    return best


def _bracketed_before(s: str, close: int) -> str:
    """The text inside the bracket group that ends at ``s[close]`` (``(10^{8})`` in ``(10^{8})!``)."""
    depth = 0
    for j in range(close, -1, -1):
        if s[j] in ")}":
            depth += 1
        elif s[j] in "({":
            depth -= 1
            if depth == 0:
                return s[j + 1:close]
    return ""


def _group(s: str, i: int) -> tuple[str, int]:
    """The exponent starting at ``s[i]``: a ``{...}`` group or a single token; and its end."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i < len(s) and s[i] == "{":
        depth, j = 0, i
        while j < len(s):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
                if depth == 0:
                    return s[i + 1:j], j + 1
            j += 1
        return s[i + 1:], len(s)
    m = re.compile(r"\d+(?:\.\d+)?|[A-Za-z]|\\[A-Za-z]+").match(s, i)
    if m:
        return m.group(0), m.end()
    return "", i


def _log10(expr: str, budget: list[int]) -> float | None:
    """log10 of a numeric power tower ``a^{b^{c}}``; None if it is not one (or too deep)."""
    budget[0] -= 1
    if budget[0] < 0:
        return None
    expr = expr.strip().strip("()")
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s*(?:\^|\*\*)", expr)
    if not m:
        m_num = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*", expr)
        if m_num:
            value = float(m_num.group(1))
            return math.log10(value) if value > 0 else 0.0
        return None
    base = float(m.group(1))
    exponent, _ = _group(expr, m.end())
    lg_exp = _log10(exponent, budget)
    if lg_exp is None or base <= 1:
        return None if lg_exp is None else 0.0
    if lg_exp > 300:
        return math.inf
    return (10 ** lg_exp) * math.log10(base)


def estimated_digits(s: str) -> float:
    """Largest number of digits any power, factorial or literal in ``s`` would have."""
    worst = 0.0
    for m in _INT.finditer(s):
        worst = max(worst, len(m.group(0)))
    for m in _FACTORIAL.finditer(s):
        n = int(m.group(1)[:12])
        if n > 2:
            worst = max(worst, math.lgamma(n + 1) / math.log(10))
    for m in _GROUP_FACTORIAL.finditer(s):
        lg = _log10(_bracketed_before(s, m.start()), [64])
        if lg is not None:
            worst = max(worst, math.inf if lg > 15 else (10 ** lg) * max(lg, 1.0))
    for m in re.finditer(r"\d+(?:\.\d+)?\s*(?:\^|\*\*)", s):
        lg = _log10(s[m.start():], [64])
        if lg is not None:
            worst = max(worst, lg)
    return worst


def size_problem(s: str, max_chars: int, max_depth: int, max_digits: int) -> str | None:
    """Why ``s`` is too large to parse safely, or None when it is fine."""
    if len(s) > max_chars:
        return f"answer has {len(s)} characters (max_answer_chars={max_chars})"
    depth = nesting_depth(s)
    if depth > max_depth:
        return f"nesting depth {depth} (max_depth={max_depth})"
    digits = estimated_digits(s)
    if digits > max_digits:
        shown = "astronomically many" if math.isinf(digits) else f"about {digits:.3g}"
        return f"a number would have {shown} digits (max_digits={max_digits})"
    return None
