"""Stage 2b: a small reader for the answers most RL samples carry, so they never reach sympy.

Parsing LaTeX with latex2sympy and comparing with sympy costs milliseconds; most answers are an
integer, a decimal, a fraction, or a short closed form such as ``\\frac{\\sqrt{3}}{2}``, ``3\\pi``
or ``2x+1``. This module reads exactly that grammar (numbers, ``+ - * / ^``, ``\\cdot``,
``\\times``, ``\\frac``, ``\\sqrt``, ``\\pi``, ``e``, ``i``, ``\\sin \\cos \\tan \\ln \\exp``,
single-letter variables, brackets, implicit products) in microseconds and gives up (returns None) on anything else, which then goes
to the sympy path. It is written here rather than taken from a library because its value is in
refusing everything outside a grammar small enough to be evaluated safely and exactly.

Each expression is evaluated exactly (a Fraction) when it is rational, and numerically at a few
fixed points otherwise; free variables make the numeric check a polynomial-identity style test
(Schwartz 1980, Zippel 1979): two different expressions agreeing at several generic points is
vanishingly unlikely. It also records whether the expression is in *final form* (see
:class:`~.config.MathOptions`).
"""
from __future__ import annotations

import cmath
import math
import random
import re
import string
from dataclasses import dataclass, field
from fractions import Fraction

_TOKEN = re.compile(
    r"\s*(?:(?P<sci>(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+)|(?P<num>\d+\.\d*|\.\d+|\d+)|(?P<cmd>\\[A-Za-z]+)|(?P<var>[A-Za-z])|(?P<op>[-+*/^(){}\[\]]))"
)
#: Number of sample points at which expressions with variables are compared.
N_POINTS = 4


def _sample_table() -> dict[str, tuple[float, ...]]:
    """Generic values for each letter at each point, drawn independently per letter (so that no
    ratio of two variables is constant across points), positive at point 0 and negative at
    point 1 (so that ``\\sqrt{x^2}`` differs from ``x``)."""
    rng = random.Random(20240607)
    table = {}
    for letter in string.ascii_letters:
        values = [rng.uniform(0.3, 2.7), -rng.uniform(0.3, 2.7)]
        values += [rng.choice((-1, 1)) * rng.uniform(0.3, 2.7) for _ in range(N_POINTS - 2)]
        table[letter] = tuple(values)
    return table


#: ``SAMPLE_VALUES[letter][k]``: the value of variable ``letter`` at sample point ``k``.
SAMPLE_VALUES = _sample_table()
_POINTS = range(N_POINTS)


#: Functions read by the fast path, with their principal complex branch (as sympy uses).
_FUNCTIONS = {"\\sin": cmath.sin, "\\cos": cmath.cos, "\\tan": cmath.tan, "\\ln": cmath.log,
              "\\exp": cmath.exp}


class GiveUp(Exception):
    """The answer is outside the fast grammar; the sympy path will read it."""


@dataclass
class Value:
    """An evaluated expression.

    Attributes:
        exact: the exact value when rational and variable-free, else None.
        points: complex values at the sample points (one per point).
        literal: a bare number (integer, decimal, a fraction of integers, signed).
        nonfinal: somewhere an operation combines literals that a grader would evaluate.
        decimal: a decimal literal occurs (an approximation, compared with tolerance).
        variables: free variable names.
        integer_literal: a bare integer (``12``, ``-3``).
        scientific: a power of ten, ``10^{k}``: ``3 \\times 10^{5}`` is a final form.
    """

    exact: Fraction | None
    points: tuple[complex, ...]
    literal: bool = False
    nonfinal: bool = False
    decimal: bool = False
    variables: frozenset[str] = field(default_factory=frozenset)
    integer_literal: bool = False
    scientific: bool = False


def _const(x: complex | Fraction, literal: bool = False, decimal: bool = False,
           integer_literal: bool = False) -> Value:
    exact = x if isinstance(x, Fraction) else None
    c = complex(x)
    return Value(exact, (c,) * len(_POINTS), literal, False, decimal, frozenset(), integer_literal)


def _merge(a: Value, b: Value, exact: Fraction | None, points: tuple[complex, ...],
           nonfinal: bool = False, literal: bool = False) -> Value:
    return Value(exact, points, literal, a.nonfinal or b.nonfinal or nonfinal,
                 a.decimal or b.decimal, a.variables | b.variables)


def _check(points: tuple[complex, ...]) -> tuple[complex, ...]:
    for p in points:
        if not (math.isfinite(p.real) and math.isfinite(p.imag)):
            raise GiveUp("not finite")
    return points


class _Reader:
    def __init__(self, text: str, complex_i: bool) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise GiveUp(f"unexpected {text[pos:pos + 5]!r}")
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        for a, b, c in zip(self.tokens, self.tokens[1:], self.tokens[2:]):
            if a[0] == b[0] == c[0] == "var":
                raise GiveUp("a word")  # three letters in a row: a unit, a name, or text
        self.i = 0
        self.complex_i = complex_i

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise GiveUp(f"expected {value!r}")
        self.i += 1
        return tok

    def parse(self) -> Value:
        v = self.expr()
        if self.peek() is not None:
            raise GiveUp("trailing input")
        return v

    def expr(self) -> Value:
        v = self.unary()
        while (tok := self.peek()) is not None and tok[1] in "+-" and tok[0] == "op":
            self.take()
            w = self.unary()
            sign = 1 if tok[1] == "+" else -1
            exact = v.exact + sign * w.exact if v.exact is not None and w.exact is not None else None
            points = _check(tuple(a + sign * b for a, b in zip(v.points, w.points)))
            v = _merge(v, w, exact, points, nonfinal=v.literal and w.literal)
        return v

    def unary(self) -> Value:
        tok = self.peek()
        if tok is not None and tok[0] == "op" and tok[1] in "+-":
            self.take()
            # a sign applied to a bracket or to another sign (-(-12), --12, +(3)) is an
            # operation left to the grader, not the way a number is written
            nxt = self.peek()
            applied = nxt is not None and nxt[0] == "op" and nxt[1] in "(+-"
            v = self.unary()
            nonfinal = v.nonfinal or (applied and v.exact is not None)
            if tok[1] == "+":
                if applied and v.exact is not None:
                    v = Value(v.exact, v.points, v.literal, True, v.decimal, v.variables,
                              v.integer_literal, v.scientific)
                return v
            return Value(-v.exact if v.exact is not None else None, tuple(0j - p for p in v.points),
                         v.literal, nonfinal, v.decimal, v.variables, v.integer_literal,
                         v.scientific)
        return self.term()

    def _starts_atom(self) -> bool:
        tok = self.peek()
        if tok is None:
            return False
        kind, text = tok
        return kind in ("num", "sci", "var") or (kind == "op" and text in "({") or (
            kind == "cmd" and text in ("\\frac", "\\sqrt", "\\pi", *_FUNCTIONS))

    def term(self) -> Value:
        v = self.power()
        while True:
            tok = self.peek()
            if tok is None:
                return v
            if tok[1] in ("*", "\\cdot", "\\times"):
                self.take()
                w = self.power()
                v = self._mul(v, w, explicit=True)
            elif tok[1] in ("/", "\\div"):
                self.take()
                w = self.power()
                v = self._div(v, w)
            elif self._starts_atom():
                if v.literal and self.peek() == ("cmd", "\\frac"):
                    raise GiveUp("mixed number")  # 2\frac{1}{2}: read as 2 + 1/2 by sympy path
                if v.integer_literal and self.peek()[0] == "num":
                    raise GiveUp("two numbers side by side")
                w = self.power()
                v = self._mul(v, w, explicit=False)
            else:
                return v

    @staticmethod
    def _mul(v: Value, w: Value, explicit: bool) -> Value:
        exact = v.exact * w.exact if v.exact is not None and w.exact is not None else None
        points = _check(tuple(a * b for a, b in zip(v.points, w.points)))
        scientific = w.scientific
        nonfinal = v.literal and w.literal
        out = _merge(v, w, exact, points, nonfinal=nonfinal and not scientific)
        if scientific and v.literal:
            out.literal = True
        return out

    @staticmethod
    def _div(v: Value, w: Value) -> Value:
        if w.exact == 0 or any(p == 0 for p in w.points):
            raise GiveUp("division by zero")
        exact = v.exact / w.exact if v.exact is not None and w.exact is not None else None
        points = _check(tuple(a / b for a, b in zip(v.points, w.points)))
        if v.literal and w.literal:
            fraction = (v.integer_literal and w.integer_literal and exact is not None
                        and exact.denominator == abs(w.exact) and exact.denominator != 1)
            out = _merge(v, w, exact, points, nonfinal=not fraction, literal=True)
            return out
        return _merge(v, w, exact, points)

    def group(self) -> Value:
        """A ``{...}`` argument, or a single digit/letter (``\\frac12``)."""
        tok = self.peek()
        if tok == ("op", "{"):
            self.take()
            v = self.expr()
            self.take("}")
            return v
        if tok is not None and tok[0] == "num" and tok[1].isdigit():
            self.take()
            digit, rest = tok[1][0], tok[1][1:]
            if rest:  # "\frac12" reads 1 then 2: push the remaining digits back
                self.tokens.insert(self.i, ("num", rest))
            return _const(Fraction(int(digit)), literal=True, integer_literal=True)
        if tok is not None and tok[0] in ("var", "cmd"):
            return self.atom()
        raise GiveUp("missing argument")

    def power(self) -> Value:
        base = self.atom()
        if self.peek() != ("op", "^"):
            return base
        self.take()
        tok = self.peek()
        if tok is not None and tok[0] == "num" and tok[1].isdigit() and len(tok[1]) > 1:
            exponent = self.group()  # x^23 means x^2 * 3 in LaTeX: take one digit
        elif tok is not None and tok[0] == "op" and tok[1] == "(":
            exponent = self.atom()
        else:
            exponent = self.group()
        return self._pow(base, exponent)

    def _pow(self, base: Value, exponent: Value) -> Value:
        e = exponent.exact
        exact = None
        if base.exact is not None and e is not None and e.denominator == 1 and abs(e) <= 4096:
            if base.exact == 0 and e < 0:
                raise GiveUp("zero to a negative power")
            exact = base.exact ** int(e)
        try:
            points = _check(tuple(
                (a ** b) if not (isinstance(b, complex) and b.imag == 0 and b.real == int(b.real)
                                 and abs(b.real) <= 4096) else a ** int(b.real)
                for a, b in zip(base.points, exponent.points)))
        except (OverflowError, ZeroDivisionError) as exc:
            raise GiveUp(str(exc)) from exc
        scientific = base.integer_literal and base.exact == 10 and exponent.literal and (
            e is not None and e.denominator == 1)
        out = _merge(base, exponent, exact, points,
                     nonfinal=base.literal and exponent.literal and exact is not None
                     and not scientific)
        out.scientific = scientific
        if scientific:  # 10^{6}: the standard way to write a power of ten, a final form
            out.literal = True
        return out

    def atom(self) -> Value:
        kind, text = self.take()
        if kind == "sci":
            return _const(Fraction(text), literal=True, decimal=True)
        if kind == "num":
            if "." in text:
                return _const(Fraction(text), literal=True, decimal=True)
            return _const(Fraction(int(text)), literal=True, integer_literal=True)
        if kind == "var":
            if text == "e":
                v = _const(math.e)
                return v
            if text == "i" and self.complex_i:
                return _const(1j)
            pts = tuple(complex(x) for x in SAMPLE_VALUES[text])
            return Value(None, pts, variables=frozenset((text,)))
        if kind == "op" and text in "({":
            v = self.expr()
            self.take(")" if text == "(" else "}")
            if text == "(" and self.peek() == ("op", "!"):
                raise GiveUp("factorial")
            return v
        if kind == "cmd":
            if text == "\\pi":
                return _const(math.pi)
            if text in _FUNCTIONS:
                return self._function(text)
            if text == "\\frac":
                num = self.group()
                den = self.group()
                return self._div(num, den)
            if text == "\\sqrt":
                degree = Fraction(2)
                if self.peek() == ("op", "["):
                    self.take()
                    d = self.expr()
                    self.take("]")
                    if d.exact is None or d.exact.denominator != 1 or d.exact < 2:
                        raise GiveUp("root degree")
                    degree = d.exact
                arg = self.group()
                return self._root(arg, int(degree))
        raise GiveUp(f"unsupported {text!r}")

    def _function(self, name: str) -> Value:
        """``\\sin(...)``, ``\\ln{...}``, ``\\sin x`` or ``\\ln 2`` (one letter or number, then
        nothing but another function: ``\\sin x \\cos x``), and ``\\sin^2 x``, the square of
        ``\\sin x``; anything else (``\\sin 2x``, ``\\sin x^2``) is left to the sympy path."""
        power = None
        if self.peek() == ("op", "^") and name != "\\exp":
            self.take()
            power = self.group()
            if power.exact is None or power.exact.denominator != 1 or not 1 <= power.exact <= 9:
                raise GiveUp("function power")
        tok = self.peek()
        if tok in (("op", "("), ("op", "{")):
            arg = self.atom()
        elif tok is not None and (tok[0] == "var" or tok[0] == "num" and tok[1].isdigit()):
            arg = self.atom()  # \\sin x, \\ln 2
            nxt = self.peek()
            if nxt is not None and (nxt[0] in ("var", "num", "sci") or nxt[1] in ("(", "{", "^")):
                raise GiveUp("ambiguous function argument")
        else:
            raise GiveUp("function argument")
        try:
            points = _check(tuple(_FUNCTIONS[name](p) ** (int(power.exact) if power else 1)
                                  for p in arg.points))
        except (ValueError, OverflowError, ZeroDivisionError) as exc:
            raise GiveUp(str(exc)) from exc
        return Value(None, points, False, arg.nonfinal, arg.decimal, arg.variables)

    @staticmethod
    def _root(arg: Value, n: int) -> Value:
        exact = None
        nonfinal = False
        if arg.exact is not None and arg.exact >= 0:
            num = _int_root(arg.exact.numerator, n)
            den = _int_root(arg.exact.denominator, n)
            if num is not None and den is not None:
                exact = Fraction(num, den)
                nonfinal = arg.literal or arg.exact in (0, 1)
        points = _check(tuple(cmath.exp(cmath.log(p) / n) if p != 0 else 0j for p in arg.points))
        if exact is None and n == 2:  # principal square root of a negative real is i*sqrt(|x|)
            points = _check(tuple(cmath.sqrt(p) for p in arg.points))
        return Value(exact, points, False, arg.nonfinal or nonfinal, arg.decimal, arg.variables)


def _int_root(x: int, n: int) -> int | None:
    if x < 0 or x.bit_length() > 4096:
        return None
    r = round(x ** (1.0 / n)) if x.bit_length() < 1000 else None
    if r is None:
        return None
    for c in (r - 1, r, r + 1):
        if c >= 0 and c ** n == x:
            return c
    return None


def read(text: str, complex_i: bool = True) -> Value | None:
    """The value of ``text`` when it is inside the fast grammar, else None."""
    if not text or len(text) > 200:
        return None
    try:
        return _Reader(text, complex_i).parse()
    except (GiveUp, RecursionError, ValueError, ZeroDivisionError, OverflowError):
        return None


def _finite_decimal(x: Fraction) -> bool:
    d = x.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def close(a: complex, b: complex, tol: float) -> bool:
    scale = max(abs(a), abs(b))
    return abs(a - b) <= tol * scale if scale > 1e-12 else abs(a - b) <= 1e-12


def equal(gold: Value, pred: Value, rel_tol: float) -> tuple[bool, str]:
    """Whether two values are equal, and the rule that decided (numeric or symbolic).

    Exact values compare exactly; a decimal is compared with ``rel_tol`` only against a value it
    cannot represent (``0.333333`` vs ``1/3``, ``1.41421`` vs ``\\sqrt 2``); other closed forms
    and expressions with variables compare at the sample points with a tight tolerance.
    """
    if gold.variables or pred.variables:
        tol = rel_tol if gold.decimal or pred.decimal else 1e-9
        return all(close(a, b, tol) for a, b in zip(gold.points, pred.points)), "symbolic"
    if gold.exact is not None and pred.exact is not None:
        if gold.exact == pred.exact:
            return True, "numeric"
        approx = (pred.decimal and not _finite_decimal(gold.exact)) or (
            gold.decimal and not _finite_decimal(pred.exact))
        return approx and close(complex(gold.exact), complex(pred.exact), rel_tol), "numeric"
    tol = rel_tol if gold.decimal or pred.decimal else 1e-12
    return close(gold.points[0], pred.points[0], tol), "numeric"
