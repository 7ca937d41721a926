"""The answer as a value: what the math families need to write a gold in another form (a
fraction as a decimal, a number as a percent) and to make near misses.

Only plain numbers are read here (integers, decimals, ``a/b``, ``\\frac{a}{b}``): a family that
needs a value leaves a symbolic gold (``\\sqrt{2}``, a set, an interval) alone, and one that
only needs a wrong answer writes it symbolically (``-(G)``, ``G + 1``).
"""
from __future__ import annotations

import random
import re
from fractions import Fraction

_FRAC = re.compile(r"^(-?)\\[dt]?frac\{(-?\d+)\}\{(\d+)\}$")
_PLAIN = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)(/\d+)?$")


def as_fraction(answer: str) -> Fraction | None:
    """The exact value of a plain numeric answer, else None."""
    text = answer.strip().replace(" ", "").replace("\\!", "").strip("$")
    text = text.replace("{,}", "").replace(",", "") if re.fullmatch(r"-?\d{1,3}(\{?,\}?\d{3})+",
                                                                    text) else text
    m = _FRAC.match(text)
    if m:
        sign, num, den = m.groups()
        if int(den) == 0:
            return None
        value = Fraction(int(num), int(den))
        return -value if sign else value
    if _PLAIN.match(text):
        try:
            return Fraction(text)
        except (ValueError, ZeroDivisionError):
            return None
    return None


def plain(value: Fraction) -> str:
    """``value`` as an integer, a terminating decimal, or ``a/b``."""
    if value.denominator == 1:
        return str(value.numerator)
    decimal = terminating_decimal(value)
    return decimal if decimal is not None else f"{value.numerator}/{value.denominator}"


def latex(value: Fraction) -> str:
    """``value`` in LaTeX: an integer or ``\\frac{a}{b}`` (sign in front)."""
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def terminating_decimal(value: Fraction, max_digits: int = 12) -> str | None:
    """``value`` as an exact decimal when one exists within ``max_digits`` places."""
    for digits in range(1, max_digits + 1):
        scaled = value * 10 ** digits
        if scaled.denominator == 1:
            text = f"{abs(scaled.numerator):0{digits + 1}d}"
            sign = "-" if value < 0 else ""
            return f"{sign}{text[:-digits]}.{text[-digits:]}"
    return None


def decoys(answer: str, rng: random.Random, count: int = 2) -> list[str]:
    """Wrong answers close to ``answer``: neighbours of a number, else the text changed
    (a sign, a word dropped), so a reward that pays them reads too little."""
    value = as_fraction(answer)
    if value is not None:
        steps = [1, -1, 2, 10, -2]
        rng.shuffle(steps)
        out = [plain(value + s) for s in steps[:count]]
        return out
    words = answer.split()
    if len(words) > 2:
        cut = rng.randrange(len(words))
        return [" ".join(words[:cut] + words[cut + 1:]), " ".join(reversed(words))][:count]
    return [f"-({answer})", f"{answer} + 1"][:count]
