"""Is an output right? Stdout against expected text (I/O style), or a returned value against the
expected value (call style).

Modes (option ``compare``):
- ``"exact"``: the text must be identical (I/O); values equal (call).
- ``"whitespace"`` (default): the whitespace-separated tokens must be identical, so trailing
  spaces, blank lines and ``\\r\\n`` do not matter (what most online judges accept).
- ``"float"``: like ``"whitespace"``, but tokens (or returned numbers) that are both numbers
  match when ``math.isclose`` within ``rel_tol``/``abs_tol``. An expected integer (a token
  written as one, or a returned ``int``) is matched exactly: tolerance is for rounding, and
  a count one off in a billion is a wrong answer, not a rounding error.
- ``"apps"``: APPS's and TACO's harness: tokens, and numbers within ``numpy.allclose``'s
  default tolerance (``|a - b| <= 1e-8 + 1e-5 * |expected|``), so ``0.3333333333333333``
  matches ``0.333333333``; an expected integer is still matched exactly, as in ``"float"``.
- ``"livecodebench"``: LiveCodeBench's harness: the stripped lines, as many as expected, each
  the same text or the same list of exact decimals (``2.5`` matches ``2.50``, not ``2.5000001``).

Numbers of any size are decided, never an error: integer tokens are compared as digit strings
(no ``int()``, whose conversion is refused past 4,300 digits), other number tokens as exact
decimals (:class:`decimal.Decimal`, so ``1e400`` is not infinity), and returned values with an
int too large for a float through exact rationals (:class:`fractions.Fraction`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import (MAX_EMAX, MIN_EMIN, Context, Decimal, DecimalException, InvalidOperation,
                     localcontext)
from fractions import Fraction
from typing import Any

from rewardkit.dataio import json_shape

MODES = ("exact", "whitespace", "float", "apps", "livecodebench")
_INTEGER = re.compile(r"[+-]?\d+")
#: Arithmetic on number tokens of any exponent a token can hold: the default context's exponent
#: bound (999,999) would raise ``decimal.Overflow`` on ``1e9999999``.
_WIDE = Context(prec=50, Emax=MAX_EMAX, Emin=MIN_EMIN)
#: ``numpy.allclose``'s defaults, which APPS's and TACO's harnesses compare numbers with.
APPS_RTOL, APPS_ATOL = 1e-5, 1e-8


@dataclass(frozen=True)
class CompareOptions:
    """How outputs are compared.

    Attributes:
        mode: one of :data:`MODES`.
        rel_tol: relative tolerance for ``"float"`` mode.
        abs_tol: absolute tolerance for ``"float"`` mode.
        unwrap_singleton: in call style, also accept a result equal to the only element of an
            expected one-element list (APPS/TACO store many call-style outputs wrapped so).
    """

    mode: str = "whitespace"
    rel_tol: float = 1e-6
    abs_tol: float = 1e-6
    unwrap_singleton: bool = True

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"compare mode must be one of {MODES}, got {self.mode!r}")
        if self.rel_tol < 0 or self.abs_tol < 0:
            raise ValueError("rel_tol and abs_tol must be >= 0")


def _as_number(token: str) -> Decimal | None:
    """The exact value of a number token (what ``float()`` accepts), or None."""
    try:
        float(token)  # the syntax a program may print: 1e5, inf, nan, 1_000...
        return Decimal(token)
    except (ValueError, InvalidOperation):
        return None


def _canonical_integer(token: str) -> str:
    """An integer token without its sign's ``+``, leading zeros and a minus on zero."""
    negative = token.startswith("-")
    digits = token.lstrip("+-").lstrip("0") or "0"
    return "-" + digits if negative and digits != "0" else digits


def _decimals_close(x: Decimal, y: Decimal, options: CompareOptions) -> bool:
    """``math.isclose`` on exact decimals (``numpy.allclose``'s rule, relative to the expected
    ``y``, in ``"apps"`` mode): no overflow at any size."""
    if x.is_nan() or y.is_nan():
        return x.is_nan() and y.is_nan()
    if x.is_infinite() or y.is_infinite() or x == y:
        return x == y
    try:
        with localcontext(_WIDE):
            if options.mode == "apps":
                return abs(x - y) <= Decimal(APPS_ATOL) + Decimal(APPS_RTOL) * abs(y)
            return abs(x - y) <= max(Decimal(options.rel_tol) * max(abs(x), abs(y)),
                                     Decimal(options.abs_tol))
    except DecimalException:  # past even the widest exponents: not within any tolerance
        return False


def _tokens_close(a: str, b: str, options: CompareOptions) -> bool:
    """``a`` (printed) against ``b`` (expected)."""
    if a == b:
        return True
    if _INTEGER.fullmatch(b):
        if _INTEGER.fullmatch(a):
            return _canonical_integer(a) == _canonical_integer(b)
        x = _as_number(a)
        return x is not None and x.is_finite() and x == Decimal(b)
    x, y = _as_number(a), _as_number(b)
    if x is None or y is None:
        return False
    return _decimals_close(x, y, options)


def _decimal_line(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(token) for token in line.split()]
    except (InvalidOperation, ValueError):
        return None


def _lines_match_as_decimals(actual: str, expected: str) -> bool:
    """LiveCodeBench's rule: the stripped lines, as many as expected, each equal as text or as a
    list of exact decimals."""
    got = [line.strip() for line in actual.strip().split("\n")]
    want = [line.strip() for line in expected.strip().split("\n")]
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        if a != b:
            x, y = _decimal_line(a), _decimal_line(b)
            if x is None or y is None or x != y:
                return False
    return True


def text_matches(actual: str, expected: str, options: CompareOptions) -> bool:
    """Whether a program's stdout matches the expected stdout under ``options.mode``."""
    if options.mode == "exact":
        return actual == expected
    if options.mode == "livecodebench":
        return _lines_match_as_decimals(actual, expected)
    got, want = actual.split(), expected.split()
    if options.mode == "whitespace":
        return got == want
    return len(got) == len(want) and all(_tokens_close(a, b, options) for a, b in zip(got, want))


def _values_close(a: Any, b: Any, options: CompareOptions) -> bool:
    """``a`` (returned) against ``b`` (expected)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(b, int):  # an expected integer: exact (2.0 still equals 2)
            return a == b
        if isinstance(a, float) or isinstance(b, float):
            return _numbers_close(a, b, options)
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_values_close(x, y, options) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_values_close(a[k], b[k], options) for k in a)
    return a == b


def _numbers_close(a: int | float, b: int | float, options: CompareOptions) -> bool:
    """``math.isclose``, also for an int too large for a float (exact rationals then)."""
    a_nan, b_nan = (isinstance(v, float) and math.isnan(v) for v in (a, b))
    if a_nan or b_nan:
        return a_nan and b_nan
    try:
        return math.isclose(a, b, rel_tol=options.rel_tol, abs_tol=options.abs_tol)
    except OverflowError:
        pass
    if any(isinstance(v, float) and math.isinf(v) for v in (a, b)):
        return a == b
    x, y = Fraction(a), Fraction(b)
    return abs(x - y) <= max(Fraction(options.rel_tol) * max(abs(x), abs(y)),
                             Fraction(options.abs_tol))


def value_matches(actual: Any, expected: Any, options: CompareOptions) -> bool:
    """Whether a returned value (plain data decoded on the trusted side) equals the expected one."""
    got, want = json_shape(actual), json_shape(expected)  # JSON-borne: no tuples
    candidates = [want]
    if options.unwrap_singleton and isinstance(want, list) and len(want) == 1:
        candidates.append(want[0])
    for target in candidates:
        if options.mode == "float":
            if _values_close(got, target, options):
                return True
        elif got == target:
            return True
    return False
