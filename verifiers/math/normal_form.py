"""Stage 2: the normal form of a gold and of each predicted answer, read once per sample.

A gold (:class:`Gold`) is read once per batch: its final answer (a bare answer, or the marker
of a GSM8K/MATH/Minerva solution), its cleaned text (:mod:`.cleaning`) and, when it is inside
the fast grammar (:mod:`.fastexpr`), its value, its items (lists, tuples, sets, intervals of
values) or its matrix. A predicted answer (:class:`Answer`) is cleaned once: its size problem,
its canonical text and what its equations state. Stage 3 (:mod:`.compare`, :mod:`.symbolic`)
compares these forms; nothing there cleans a string again.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from . import fastexpr
from .cleaning import (Normalized, align_names, as_choice, as_text_answer, canonical_string, clean,
                       split_list, split_top)
from .config import MathOptions
from .extract import box_spans, last_phrase, strip_delimiters, value_of_sentence
from .guards import size_problem

_THOUSANDS = re.compile(r"^-?(?!0,)\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
ASSIGNMENT = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(?=\S)")
_MIXED = re.compile(r"^-?\d+\s*\\frac\{(\d+)\}\{(\d+)\}$")


@dataclass(frozen=True)
class Gold:
    """A reference answer read once per batch.

    ``kind`` is ``choice`` (a letter), ``text`` (words), ``value`` (inside the fast grammar) or
    ``structured`` (anything else: lists, sets, intervals, equations, matrices; sympy reads it).
    """

    raw: str
    norm: Normalized
    canonical: str
    kind: str
    choice: str | None = None
    text: str | None = None
    value: fastexpr.Value | None = None
    problem: str | None = None
    items: tuple[str, tuple[fastexpr.Value, ...]] | None = None

    @property
    def is_list(self) -> bool:
        """A gold of several answers ("2, 3", ``k = 3, n = 5``, a tuple or set of values), which a
        prediction may give one box each."""
        if len(split_list(self.norm.text)) > 1 or len(self.norm.names) > 1:
            return True
        return self.items is not None and self.items[0] in ("()", "set") and len(self.items[1]) > 1

    @property
    def shown(self) -> str:
        if self.kind == "choice":
            return self.choice or ""
        if self.kind == "text":
            return self.text or ""
        if self.value is not None and self.value.exact is not None:
            return fraction_str(self.value.exact) + ("%" if self.norm.percent else "")
        return self.canonical


def fraction_str(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def scalar_text(text: str) -> str:
    return text.replace(",", "") if _THOUSANDS.match(text) else text


# A comma between digits that cannot group thousands: "0,111", "1000,99", "3,5".
_DECIMAL_COMMA = re.compile(r"^([-+]?)(0|\d+(?=,(?:\d{1,2}|\d{4,})$)),(\d+)$")
# A gold written with a decimal comma: two decimals ("1,22") or a zero whole part ("0,111").
_GOLD_DECIMAL_COMMA = re.compile(r"^[-+]?(?:\d+,\d{2}|0,\d+)$")


def decimal_comma(text: str) -> str:
    """``3,5`` → ``3.5`` when the comma cannot be a thousands separator. Read so only where the
    context says decimal: a gold written that way, or a prediction against a decimal gold; a
    comma elsewhere separates thousands or list items."""
    m = _DECIMAL_COMMA.match(text)
    return f"{m.group(1)}{m.group(2)}.{m.group(3)}" if m else text


_PLAIN_MIXED = re.compile(r"^([-+]?)(\d{1,3}(?: \d{3})+|\d+) (\d+)/(\d+)$")
_LATEX_MIXED = re.compile(r"^([-+]?)(\d+)\s*\\frac\s*\{(\d+)\}\s*\{(\d+)\}$")


def mixed_number(text: str) -> fastexpr.Value | None | bool:
    """A mixed number, ``4 4/9`` or ``4\\frac{4}{9}`` (= 40/9; its sign applies to the whole),
    as a final value; False when it is written like one but is not (``4 4/0``, ``11 7/6``: no
    proper fraction), None when the text is not shaped like one."""
    m = _PLAIN_MIXED.match(text) or _LATEX_MIXED.match(text)
    if m is None:
        return None
    sign, whole, num, den = m.group(1), int(m.group(2).replace(" ", "")), int(m.group(3)), int(
        m.group(4))
    if den == 0 or num >= den:
        return False
    value = Fraction(whole) + Fraction(num, den)
    value = -value if sign == "-" else value
    return fastexpr.Value(value, (complex(value),) * fastexpr.N_POINTS, literal=True)


class UnreadableGold(ValueError):
    """A reference from which no final answer can be read (a worked solution without a marker)."""


# math delimiters ($, \( \), \[ \]) around each box count as separators too
_MATH_DELIMITER = r"\\[()\[\]]"
_DELIMS = rf"(?:[\s$,;.]|{_MATH_DELIMITER})*"
_GOLD_SEPARATORS = re.compile(rf"^{_DELIMS}(?:\\text\{{\s*(?:and|or)\s*\}}|and|or)?{_DELIMS}$")
# "$\boxed{1}$ papers and $\boxed{2}$ bins": a few words naming each part, within one sentence.
_GOLD_LABELS = re.compile(r"^(?!.*\b(?:or|not|wait|actually|rather|so|then|thus|hence|therefore|is|was)\b)"
                          rf"(?:[\s$,;]|{_MATH_DELIMITER})*[A-Za-z]+(?:[ \t]+[A-Za-z]+){{0,3}}"
                          rf"(?:[\s$,;]|{_MATH_DELIMITER})*$", re.IGNORECASE)
_PROSE_WORDS = 12
_PERCENT_AFTER = re.compile(r"[ \t$]{0,4}(?:\\%|%|percent\b)", re.IGNORECASE)


def gold_answer_text(reference: str) -> str:
    """The final answer of a reference: itself when it is an answer; the value after the last
    ``####`` of a GSM8K solution; the last ``\\boxed{}`` of a MATH solution; several boxes
    separated only by commas or "and" are one list answer (``\\boxed{2}, \\boxed{3}``).
    Raises :class:`UnreadableGold` for a worked solution with neither marker."""
    raw = reference.strip()
    mark = raw.rfind("####")
    if mark >= 0:
        answer = strip_delimiters(raw[mark + 4:].strip().split("\n", 1)[0])
        if not answer:
            raise UnreadableGold("the reference has a GSM8K '####' marker with nothing after it")
        return answer
    found = box_spans(raw)
    if found:
        contents = [b.strip() for b, _ in found]
        if len(found) > 1:
            # the text between consecutive boxes: only separators means one list answer
            starts = [raw.rfind("\\", 0, end - len(b) - 1) for b, end in found]
            between = [raw[found[k][1]:starts[k + 1]] for k in range(len(found) - 1)]
            if all(_GOLD_SEPARATORS.match(x) for x in between):
                return ", ".join(contents)
            if all(_GOLD_SEPARATORS.match(x) or _GOLD_LABELS.match(x) for x in between):
                return "(" + ", ".join(contents) + ")"  # quantities named in order
        # "$\boxed{20}$ percent": the percent sign written after the box belongs to the answer
        if _PERCENT_AFTER.match(raw, found[-1][1]):
            return contents[-1] + "\\%"
        return contents[-1]
    if "\n" in raw.strip() or len(raw.split()) > _PROSE_WORDS:
        phrase = last_phrase(raw)  # a Minerva-style "Final Answer: The final answer is 28%."
        answer = value_of_sentence(strip_delimiters(phrase[0])) if phrase else ""
        if answer and len(answer.split()) <= _PROSE_WORDS:
            return answer
        raise UnreadableGold(
            "the reference looks like a worked solution with no final answer marker (end it with "
            "'#### <answer>' or '\\boxed{<answer>}', or pass the answer alone)")
    return raw


def read_gold(reference: Any, opts: MathOptions) -> Gold:
    """Read a gold answer (a string or a number): an answer, or a GSM8K/MATH solution whose final
    answer is read with :func:`gold_answer_text`."""
    raw = gold_answer_text(str(reference))
    problem = size_problem(raw, opts.max_answer_chars, opts.max_depth, opts.max_digits)
    norm = clean(raw, opts.strip_units)
    canon = canonical_string(norm.text)
    if problem:
        return Gold(raw, norm, canon, "structured", problem=problem)
    if opts.choice and (letter := as_choice(norm.text)) and letter.isupper():
        return Gold(raw, norm, canon, "choice", choice=letter)
    if (text := as_text_answer(norm.text)) is not None:
        return Gold(raw, norm, canon, "text", text=text)
    scalar = norm.text
    scalar = decimal_comma(scalar) if _GOLD_DECIMAL_COMMA.match(scalar) else scalar_text(scalar)
    mixed = mixed_number(scalar)
    value = mixed or fastexpr.read(scalar, opts.complex_i)
    if value is not None and value is not False:
        return Gold(raw, norm, canon, "value", value=value)
    return Gold(raw, norm, canon, "structured", items=read_items(norm.text, opts))


#: A problem that asks for a percent: there a plain number is a number of percent.
PERCENT_QUESTION = re.compile(r"\bpercent|\bpercentage\b|\\?%", re.IGNORECASE)


def percent_factors(gold_percent: bool, pred_percent: bool, percent_question: bool
                    ) -> tuple[Fraction, ...]:
    """The factors the predicted number is multiplied by before it is compared with the gold's.

    A percent sign means what it says, on both sides: ``25\\%`` is 0.25. Against a gold marked
    ``%`` (a percent question), a plain answer may be that number of percent or its fraction
    (``25`` or ``0.25`` for ``25\\%``). An answer marked ``%`` against a plain gold is the
    fraction (``25\\%`` for 0.25), or, when the problem asks for a percent, the number of percent
    (``28\\%`` for the gold 28 of "What percent ...?") -- never both, so one answer never matches
    two golds a factor of 100 apart.
    """
    if gold_percent == pred_percent:
        return (Fraction(1),)
    if pred_percent:
        return (Fraction(1),) if percent_question else (Fraction(1, 100),)
    return (Fraction(1), Fraction(100))


def scaled(v: fastexpr.Value, factor: Fraction) -> fastexpr.Value:
    """``v`` times ``factor``."""
    if factor == 1:
        return v
    return fastexpr.Value(v.exact * factor if v.exact is not None else None,
                          tuple(p * float(factor) for p in v.points), v.literal, v.nonfinal,
                          v.decimal, v.variables)


_BRACKETS = (("\\{", "\\}", "set"), ("(", ")", None), ("[", "]", None), ("(", "]", None),
             ("[", ")", None))


#: One element of a list or set: a value, or a tuple of values (a point, a pair of solutions).
Item = Any
_PLUS_MINUS = re.compile(r"\\pm(?![A-Za-z])")


def _read_element(part: str, opts: MathOptions) -> Item | None:
    """A value in the fast grammar, or a parenthesised tuple of them (``(5, 8)``)."""
    value = fastexpr.read(part, opts.complex_i)
    if value is not None:
        return value
    part = part.strip()
    if part.startswith("(") and part.endswith(")") and _balanced(part[1:-1]):
        inner = [fastexpr.read(x.strip(), opts.complex_i) for x in split_top(part[1:-1], ",")]
        if len(inner) > 1 and all(v is not None for v in inner):
            return tuple(inner)
    return None


def _expand_plus_minus(parts: list[str]) -> list[str] | None:
    """``1 \\pm \\sqrt2`` states two values, ``1 + \\sqrt2`` and ``1 - \\sqrt2`` (one sign per
    part; None for more)."""
    out = []
    for part in parts:
        found = _PLUS_MINUS.findall(part)
        if len(found) > 1:
            return None
        out += [_PLUS_MINUS.sub("+", part), _PLUS_MINUS.sub("-", part)] if found else [part]
    return out


def read_items(text: str, opts: MathOptions) -> tuple[str, tuple[Item, ...]] | None:
    """A bracketed or bare list whose elements are all inside the fast grammar (values, or tuples
    of values such as the solutions ``(5, 8), (8, 5)``), ``\\pm`` read as its two values: its
    shape (``set``, ``list`` or the bracket pair of a tuple/interval) and its elements."""
    text = text.strip()
    shape = "list"
    for left, right, name in _BRACKETS:
        if text.startswith(left) and text.endswith(right) and len(text) > len(left) + len(right):
            inner = text[len(left):-len(right)]
            if _balanced(inner):
                text, shape = inner, name or left + right
                break
    parts = split_list(text) if shape == "list" else [p.strip() for p in split_top(text, ",")]
    if shape in ("list", "set") and "\\pm" in text:
        parts = _expand_plus_minus(parts) or []
    if not parts or shape == "list" and len(parts) < 2:
        return None
    values = []
    for part in parts:
        v = _read_element(part, opts) if shape in ("list", "set") else fastexpr.read(
            part, opts.complex_i)
        if v is None:
            return None
        values.append(v)
    unordered = shape in ("set", "list")
    if unordered and len({canonical_string(p) for p in parts}) != len(parts):
        return None  # repeats: sets collapse them, the sympy path decides
    return shape, tuple(values)


_INFINITY = re.compile(r"^([-+]?)\\infty$")
_RELATION_OP = re.compile(r"\\leq?(?![A-Za-z])|\\geq?(?![A-Za-z])|\\lt(?![A-Za-z])|\\gt(?![A-Za-z])"
                          r"|\\neq?(?![A-Za-z])|!=|<=|>=|<|>")
_NOT_EQUAL = ("\\ne", "\\neq", "!=")
_IN = re.compile(r"^[A-Za-z]\s*\\in\s*")
# A union: "\cup", or relations joined by "or" (``x < -1 \text{ or } x > 2``).
_CUP = re.compile(r"\\cup(?![A-Za-z])|\\text\s*\{\s*or\s*\}|\bor\b|\\lor(?![A-Za-z])|\\vee(?![A-Za-z])")
_INTERVAL = re.compile(r"^([\[(])(.+)([\])])$", re.DOTALL)
#: Marks of an answer that describes a set of numbers (an interval, a union, a relation).
SET_MARKS = re.compile(r"\\infty|\\cup(?![A-Za-z])|\\in(?![A-Za-z])|<|>|\\[lgn]eq?(?![A-Za-z])|!="
                       r"|\\[lg]t(?![A-Za-z])")

#: An interval: (low end, low end closed, high end, high end closed); an end is a real value in
#: the fast grammar, or ``-inf``/``inf``.
Interval = tuple


def _end(text: str, opts: MathOptions) -> fastexpr.Value | float | None:
    m = _INFINITY.match(text.strip())
    if m:
        return -math.inf if m.group(1) == "-" else math.inf
    v = fastexpr.read(text.strip(), opts.complex_i)
    if v is None or v.variables or abs(v.points[0].imag) > 1e-12:
        return None
    return v


def _variable_side(side: str) -> bool:
    """Whether one side of a relation is its variable (a single letter)."""
    return bool(re.fullmatch(r"[A-Za-z]", side))


def _relation_intervals(text: str, opts: MathOptions) -> list[Interval] | None:
    """``x \\ge 2`` → ``[2, inf)``; ``0 < y < 1`` → ``(0, 1)``; ``5 \\geq x`` → ``(-inf, 5]``."""
    ops = [m.group(0) for m in _RELATION_OP.finditer(text)]
    sides = [x.strip() for x in _RELATION_OP.split(text)]
    if not 1 <= len(ops) <= 2 or len(sides) != len(ops) + 1:
        return None
    if any(op in _NOT_EQUAL for op in ops):
        # x \\neq 5: every number but one, (-\\infty, 5) \\cup (5, \\infty)
        bound = _end(sides[1] if _variable_side(sides[0]) else sides[0], opts)
        if len(ops) != 1 or _variable_side(sides[0]) == _variable_side(sides[1]) or bound is None:
            return None
        return [(-math.inf, False, bound, False), (bound, False, math.inf, False)]
    less = [op.startswith(("<", "\\l")) for op in ops]
    closed = [op in ("<=", ">=", "\\le", "\\leq", "\\ge", "\\geq") for op in ops]
    variable = [_variable_side(x) for x in sides]
    if len(ops) == 2:
        if not variable[1] or variable[0] or variable[2] or less[0] != less[1]:
            return None
        a, b = _end(sides[0], opts), _end(sides[2], opts)
        if a is None or b is None:
            return None
        return [(a, closed[0], b, closed[1])] if less[0] else [(b, closed[1], a, closed[0])]
    if variable[0] == variable[1]:
        return None
    bound = _end(sides[1] if variable[0] else sides[0], opts)
    if bound is None:
        return None
    upper = less[0] == variable[0]  # x < a, or a > x: a bounds from above
    return [(-math.inf, False, bound, closed[0])] if upper else [(bound, closed[0], math.inf, False)]


def read_intervals(text: str, opts: MathOptions) -> list[Interval] | None:
    """A set of numbers written as an interval, a union of intervals (``(-\\infty, 1) \\cup
    (2, 5]``), ``x \\in`` one of those, or a relation on one variable, with ends inside the fast
    grammar; None otherwise (the sympy path reads it)."""
    text = _IN.sub("", text.strip())
    out: list[Interval] = []
    parts = _CUP.split(text)
    if len({v for p in parts for v in re.findall(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])", p)}) > 1:
        return None  # relations on several variables are no set of numbers
    for part in parts:
        if _RELATION_OP.search(part):
            found = _relation_intervals(part.strip(), opts)
            if found is None:
                return None
            out.extend(found)
            continue
        m = _INTERVAL.match(part.strip())
        ends = split_top(m.group(2), ",") if m else []
        if len(ends) != 2:
            return None
        lo, hi = _end(ends[0], opts), _end(ends[1], opts)
        if lo is None or hi is None:
            return None
        out.append((lo, m.group(1) == "[", hi, m.group(3) == "]"))
    return out


def read_equation(text: str, opts: MathOptions) -> tuple[fastexpr.Value, fastexpr.Value] | None:
    """Both sides of one equation with variables (``y = 2x + 1``, ``2x - y + 1 = 0``) inside the
    fast grammar, else None."""
    if text.count("=") != 1 or _RELATION_OP.search(text):
        return None
    left, right = (fastexpr.read(x.strip(), opts.complex_i) for x in text.split("="))
    if left is None or right is None or not (left.variables | right.variables):
        return None
    return left, right


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += c in "([{"
        depth -= c in ")]}"
        if depth < 0:
            return False
    return depth == 0



BASE_NUMBER = re.compile(r"^[0-9A-Fa-f]+_\{?\d{1,2}\}?$")
_MATRIX = re.compile(r"^\\begin\{([pbvB]?matrix)\}(.*)\\end\{\1\}$", re.DOTALL)


def read_matrix(text: str, opts: MathOptions) -> list[list[fastexpr.Value]] | None:
    """The entries of a ``pmatrix``/``bmatrix`` whose entries are all in the fast grammar."""
    m = _MATRIX.match(text.strip())
    if not m or "\\begin" in m.group(2):
        return None
    rows = []
    for line in m.group(2).split("\\\\"):
        if not line.strip():
            continue
        row = []
        for cell in line.split("&"):
            v = fastexpr.read(cell.strip(), opts.complex_i)
            if v is None:
                return None
            row.append(v)
        rows.append(row)
    return rows or None


def is_final_literal(text: str, opts: MathOptions) -> bool:
    """Whether ``text`` writes a rational value as a number (integer, decimal, fraction in lowest
    terms, scientific notation), possibly as ``x = ...``: the final form of a rational answer."""
    text = ASSIGNMENT.sub("", scalar_text(text), count=1)
    mixed = _MIXED.match(text)
    if mixed:  # 3\frac{1}{2}: a proper fraction in lowest terms after a whole number
        num, den = int(mixed.group(1)), int(mixed.group(2))
        return 0 < num < den and Fraction(num, den).denominator == den
    value = fastexpr.read(text, opts.complex_i)
    return value is not None and value.literal and not value.nonfinal


@dataclass(frozen=True)
class Answer:
    """One predicted answer in normal form: cleaned once, with its size problem (None when it
    is small enough to read) and its canonical text. Picklable, so a worker compares the very
    same form."""

    raw: str
    norm: Normalized
    canonical: str
    problem: str | None = None


def read_answer(candidate: str, gold: Gold, opts: MathOptions) -> Answer:
    """The normal form of one candidate answer (named quantities put in the gold's order)."""
    problem = size_problem(candidate, opts.max_answer_chars, opts.max_depth, opts.max_digits)
    if problem:
        return Answer(candidate, Normalized(candidate), candidate, problem)
    norm = align_names(clean(candidate, opts.strip_units), gold.norm)
    return Answer(candidate, norm, canonical_string(norm.text))


def read_answers(candidates: tuple[str, ...] | list[str], gold: Gold, opts: MathOptions
                 ) -> list[Answer]:
    """The distinct answers among a completion's candidates (identical after cleaning counts
    once), in order."""
    seen: set[str] = set()
    out = []
    for c in candidates:
        answer = read_answer(c, gold, opts)
        key = answer.canonical if answer.problem is None else c
        if key not in seen:
            seen.add(key)
            out.append(answer)
    return out
