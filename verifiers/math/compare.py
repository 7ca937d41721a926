"""Stage 3, the cheap part: compare a predicted answer with the gold, both in normal form,
without sympy.

Numbers, closed forms, polynomials, lists, tuples, sets, intervals and matrices of those, ratios,
choices and text are compared here in microseconds; :func:`compare` returns None for anything it
cannot tell, which then goes to :mod:`.symbolic` in a worker process. Whether an answer is final
(:class:`~.config.MathOptions` ``final_form``) is reported with the comparison, since it depends
on which form matched.
"""
from __future__ import annotations

import math
import re
from typing import Any

from . import fastexpr
from .cleaning import (Normalized, as_text_answer, canonical_string, choice_of_prediction,
                       split_list)
from .config import MathOptions
from .normal_form import (ASSIGNMENT, BASE_NUMBER, SET_MARKS, Answer, Gold, decimal_comma,
                          fraction_str, mixed_number, percent_factors, read_equation,
                          read_intervals, read_items, read_matrix, scalar_text, scaled)
from .verdict_record import verdict

def _item_equal(g: Any, p: Any, rel_tol: float) -> bool:
    """Two elements of a list: values, or tuples of values compared in order."""
    if isinstance(g, tuple) or isinstance(p, tuple):
        return (isinstance(g, tuple) and isinstance(p, tuple) and len(g) == len(p)
                and all(fastexpr.equal(a, b, rel_tol)[0] for a, b in zip(g, p)))
    return fastexpr.equal(g, p, rel_tol)[0]


def _item_nonfinal(item: Any) -> bool:
    return any(v.nonfinal for v in item) if isinstance(item, tuple) else item.nonfinal


_INFINITY = re.compile(r"^([-+]?)\\infty$")
_PLUS_MINUS = re.compile(r"\\pm(?![A-Za-z])")
_BY_ZERO = re.compile(r"/\s*0(?![\d.])|\\frac\s*\{[^{}]*\}\s*\{\s*0\s*\}")
_LETTER_EQUALS = re.compile(r"^([A-Za-z])\s*=(?!=)")


def _defined_by(text: str, opts: MathOptions) -> fastexpr.Value | None:
    """The right side of ``y = 2x + 1`` (a letter defined by an expression without it)."""
    m = _LETTER_EQUALS.match(text.strip())
    if m is None or "=" in text.strip()[m.end():]:
        return None
    value = fastexpr.read(text.strip()[m.end():], opts.complex_i)
    if value is None or m.group(1) in value.variables or not value.variables:
        return None
    return value


_PAREN_LETTER = re.compile(r"(?<![\w\\])\(([A-J])\)")  # "(B)", not the "(A)" of "f(A)"


def _compare_items(gold: Gold, norm: Normalized, opts: MathOptions) -> dict[str, Any] | None:
    """Lists, sets, tuples and intervals of plain values, compared without sympy: in order for
    tuples and intervals (same brackets), as a matching for sets and bare lists."""
    assert gold.items is not None
    pred = read_items(norm.text, opts)
    if pred is None:
        return None
    if len(pred[1]) != len(gold.items[1]):
        return verdict(False, "structural", canonical_string(norm.text), gold.canonical)
    shape, gvals = gold.items
    # a bare list states the same values as a tuple ("4, 5" and "(4, 5)"): in the gold's order
    # when the gold is a tuple, in any order when the gold is a bare list
    if pred[0] != shape and {pred[0], shape} not in ({"list", "()"}, {"list", "set"}):
        if len(pred[1]) == 2 and "list" not in (pred[0], shape) and "set" not in (pred[0], shape):
            # intervals or points with other brackets: [1, 5] is not (1, 5)
            return verdict(False, "structural", canonical_string(norm.text), gold.canonical)
        return None
    pvals = list(pred[1])
    shown = canonical_string(norm.text)
    if shape in ("set", "list"):
        for g in gvals:
            for j, p in enumerate(pvals):
                if _item_equal(g, p, opts.rel_tol):
                    del pvals[j]
                    break
            else:
                return verdict(False, "structural", shown, gold.canonical)
    elif not all(_item_equal(g, p, opts.rel_tol) for g, p in zip(gvals, pvals)):
        return verdict(False, "structural", shown, gold.canonical)
    if opts.final_form and any(_item_nonfinal(p) for p in pred[1]) and not any(
            _item_nonfinal(g) for g in gvals):
        return verdict(False, "final_form", shown, gold.canonical,
                       detail="the prediction is an expression left to evaluate")
    return verdict(True, "structural", shown, gold.canonical)


_COLON = re.compile(r"(?<![\\:]):(?!=)")


def _compare_colon(gold: Gold, norm: Normalized, canon: str, opts: MathOptions) -> dict[str, Any]:
    """Ratios and clock times (``11:21``, ``9:00``) compare part by part, exactly: ``10:00`` is
    never ``9:00``, and a ratio is not a division left to the grader."""
    gparts = [p.strip() for p in _COLON.split(gold.norm.text)]
    pparts = [p.strip() for p in _COLON.split(norm.text)]
    if len(gparts) != len(pparts):
        return verdict(False, "structural", canon, gold.canonical)
    for g, p in zip(gparts, pparts):
        gv, pv = fastexpr.read(g, opts.complex_i), fastexpr.read(p, opts.complex_i)
        if gv is None or pv is None:
            if canonical_string(g) != canonical_string(p):
                return verdict(False, "structural", canon, gold.canonical)
        elif not fastexpr.equal(gv, pv, opts.rel_tol)[0]:
            return verdict(False, "structural", canon, gold.canonical)
    return verdict(True, "structural", canon, gold.canonical)


def _compare_matrix(gold: Gold, gm: list[list[fastexpr.Value]], norm: Normalized, canon: str,
                  opts: MathOptions) -> dict[str, Any] | None:
    pm = read_matrix(norm.text, opts)
    if pm is None:
        return None  # a tuple for a vector, a product of matrices: the sympy path
    if [len(r) for r in pm] != [len(r) for r in gm]:
        return verdict(False, "structural", canon, gold.canonical)
    for grow, prow in zip(gm, pm):
        for g, p in zip(grow, prow):
            if not fastexpr.equal(g, p, opts.rel_tol)[0]:
                return verdict(False, "structural", canon, gold.canonical)
    if opts.final_form and any(p.nonfinal for r in pm for p in r) and not any(
            g.nonfinal for r in gm for g in r):
        return verdict(False, "final_form", canon, gold.canonical,
                       detail="the prediction is an expression left to evaluate")
    return verdict(True, "structural", canon, gold.canonical)


def _same_end(a: fastexpr.Value | float, b: fastexpr.Value | float, rel_tol: float) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and a == b
    return fastexpr.equal(a, b, rel_tol)[0]


def _compare_sets(gold: Gold, norm: Normalized, canon: str, opts: MathOptions
                  ) -> dict[str, Any] | None:
    """Intervals, unions and one-variable relations as sets of numbers: ``x \\ge 2`` equals
    ``[2, \\infty)``, ``0 < f(x) < 1`` equals ``(0, 1)``; ends and their brackets must agree."""
    g, p = read_intervals(gold.norm.text, opts), read_intervals(norm.text, opts)
    if g is None or p is None:
        return None
    if len(g) != len(p):
        return verdict(False, "structural", canon, gold.canonical)
    for a, b in zip(sorted(g, key=_low), sorted(p, key=_low)):
        for k in (0, 2):
            if not _same_end(a[k], b[k], opts.rel_tol):
                return verdict(False, "structural", canon, gold.canonical)
            # an infinite end is open however it is written
            if a[k + 1] != b[k + 1] and not isinstance(a[k], float):
                return verdict(False, "structural", canon, gold.canonical)
    ends = [e for i in p for e in (i[0], i[2]) if not isinstance(e, float)]
    gold_ends = [e for i in g for e in (i[0], i[2]) if not isinstance(e, float)]
    if opts.final_form and any(e.nonfinal for e in ends) and not any(e.nonfinal for e in gold_ends):
        return verdict(False, "final_form", canon, gold.canonical,
                       detail="the prediction is an expression left to evaluate")
    return verdict(True, "structural", canon, gold.canonical)


def _low(interval: tuple) -> float:
    end = interval[0]
    return end if isinstance(end, float) else end.points[0].real


def _compare_equations(gold: Gold, norm: Normalized, canon: str, opts: MathOptions
                       ) -> dict[str, Any] | None:
    """Two equations with variables are the same when one is the other times a nonzero
    constant (``y = 2x + 1`` and ``2x - y + 1 = 0``), checked at the generic sample points."""
    g, p = read_equation(gold.norm.text, opts), read_equation(norm.text, opts)
    if g is None or p is None:
        return None
    dg = [a - b for a, b in zip(g[0].points, g[1].points)]
    dp = [a - b for a, b in zip(p[0].points, p[1].points)]
    if any(abs(x) < 1e-9 for x in dg + dp):
        return None  # a sample point on the curve: the sympy path decides
    ratios = [a / b for a, b in zip(dg, dp)]
    same = all(fastexpr.close(r, ratios[0], 1e-9) for r in ratios[1:])
    if same and opts.final_form and (p[0].nonfinal or p[1].nonfinal) and not (
            g[0].nonfinal or g[1].nonfinal):
        return verdict(False, "final_form", canon, gold.canonical,
                       detail="the prediction is an expression left to evaluate")
    return verdict(same, "symbolic", canon, gold.canonical)


def _choices_named(text: str) -> set[str]:
    """Every letter a multiple-choice answer names: parenthesised letters anywhere ("(A) or
    (B)") and the letter of each part of a list ("A, B", "A or B"). More than one is a hedge."""
    letters = {m.upper() for m in _PAREN_LETTER.findall(text)}
    for part in split_list(text):
        letter = choice_of_prediction(part)
        if letter:
            letters.add(letter)
    return letters


def compare(gold: Gold, answer: Answer, opts: MathOptions, percent_question: bool = False
            ) -> dict[str, Any] | None:
    """Compare one answer with the gold without sympy, or None when only the sympy path can
    tell. ``percent_question``: the problem asks for a percent (see
    :func:`~.normal_form.percent_factors`)."""
    if answer.problem:
        return verdict(False, None, None, gold.shown, "too_large", detail=answer.problem)
    norm, canon = answer.norm, answer.canonical
    if gold.kind == "choice":
        norm = Normalized(norm.written or norm.text)
        letters = _choices_named(norm.text)
        if len(letters) > 1:
            return verdict(False, "structural", canon, gold.shown, "conflicting",
                           detail=f"several choices named: {', '.join(sorted(letters))}")
        letter = choice_of_prediction(norm.text)
        return verdict(letter == gold.choice, "exact", letter or canon, gold.shown)
    if canon == gold.canonical and norm.percent == gold.norm.percent and canon:
        return verdict(True, "exact", canon, gold.canonical)
    if _COLON.search(gold.norm.text) or _COLON.search(norm.text):
        return _compare_colon(gold, norm, canon, opts)
    if gold.kind == "text":
        text = as_text_answer(norm.text)
        return verdict(text == gold.text, "exact", text or canon, gold.shown)
    if BASE_NUMBER.match(gold.canonical) or BASE_NUMBER.match(canon):
        # a numeral in another base (1304_5) is compared as written: digits and base
        return verdict(False, "exact", canon, gold.canonical)
    if SET_MARKS.search(gold.norm.text) or SET_MARKS.search(norm.text):
        result = _compare_sets(gold, norm, canon, opts)
        if result is not None:
            return result
    if gold.kind == "structured" and "=" in gold.norm.text and "=" in norm.text:
        result = _compare_equations(gold, norm, canon, opts)
        if result is not None:
            return result
    if gold.kind == "structured" and "=" not in norm.text and (
            defined := _defined_by(gold.norm.text, opts)) is not None:
        value = fastexpr.read(scalar_text(norm.text), opts.complex_i)
        if value is not None:  # y = 2x + 1 against 2x + 1: the expression that defines y
            same = fastexpr.equal(defined, value, opts.rel_tol)[0]
            if same and opts.final_form and value.nonfinal and not defined.nonfinal:
                return verdict(False, "final_form", canon, gold.canonical,
                               detail="the prediction is an expression left to evaluate")
            return verdict(same, "symbolic", canon, gold.canonical)
    if _INFINITY.match(gold.norm.text.strip()):
        sign = _INFINITY.match(norm.text.strip())
        if sign is not None:
            negative = _INFINITY.match(gold.norm.text.strip()).group(1) == "-"
            return verdict((sign.group(1) == "-") == negative, "exact", canon, gold.canonical)
        if fastexpr.read(scalar_text(norm.text), opts.complex_i) is not None:
            return verdict(False, "numeric", canon, gold.canonical)  # a finite answer
    if gold.items is not None:
        result = _compare_items(gold, norm, opts)
        if result is None and gold.items[0] in ("list", "set") and fastexpr.read(
                scalar_text(norm.text), opts.complex_i) is not None:
            # one value where the gold has several: not the answer (no hedge to look at)
            return verdict(False, "structural", canon, gold.canonical)
        return result
    if gold.kind == "structured" and (gm := read_matrix(gold.norm.text, opts)) is not None:
        return _compare_matrix(gold, gm, norm, canon, opts)
    if gold.kind != "value" or gold.value is None:
        return None
    if as_text_answer(norm.text) is not None:
        return verdict(False, "exact", as_text_answer(norm.text), gold.shown)
    text = scalar_text(norm.text)
    if gold.value.decimal and gold.value.exact is not None and gold.value.exact.denominator > 1:
        text = decimal_comma(text)  # against 3.5, "3,5" is a decimal comma
    parts = split_list(text)
    if len(parts) > 1:
        if len({canonical_string(p) for p in parts}) > 1:
            return verdict(False, "structural", canon, gold.shown, "conflicting",
                           detail="a list of answers where the gold is a single value")
        text = parts[0]
    text = ASSIGNMENT.sub("", text, count=1)  # "x = 3" states the value 3
    mixed = mixed_number(text)
    if mixed is False:
        return verdict(False, "numeric", canonical_string(text), gold.shown,
                       detail="a mixed number without a proper fraction")
    if _INFINITY.match(text) or _BY_ZERO.search(text):
        # an infinite or undefined answer against a finite gold
        return verdict(False, "numeric", canonical_string(text), gold.shown)
    if "\\pm" in text and (both := read_items(text, opts)) is not None and len(both[1]) == 2:
        if _item_equal(both[1][0], both[1][1], opts.rel_tol):
            text = _PLUS_MINUS.sub("+", text)  # \pm 0 is one value
        else:
            return verdict(False, "structural", canon, gold.shown, "conflicting",
                           detail="a \\pm states two values where the gold is one")
    value = mixed or fastexpr.read(text, opts.complex_i)
    if value is None:
        return None
    if norm.degree and not gold.norm.degree and "\\pi" in gold.norm.text:
        value = fastexpr.Value(None, tuple(p * math.pi / 180 for p in value.points), False,
                               value.nonfinal, value.decimal, value.variables)  # in radians
    shown = (fraction_str(value.exact) if value.exact is not None else canonical_string(text))
    shown += "%" if norm.percent else ""
    rule = "numeric"
    for factor in percent_factors(gold.norm.percent, norm.percent, percent_question):
        same, rule = fastexpr.equal(gold.value, scaled(value, factor), opts.rel_tol)
        if same:
            # a rational gold wants a number; a decimal gold that rounds an irrational value
            # (4.1231056 for \\sqrt{17}) is answered exactly by the closed form
            rational_gold = gold.value.exact is not None and gold.value.literal and not (
                gold.value.decimal and value.exact is None)
            final = not value.nonfinal and (value.literal or not rational_gold)
            if opts.final_form and not final and not gold.value.nonfinal:
                return verdict(False, "final_form", shown, gold.shown,
                               detail="the prediction is an expression left to evaluate")
            return verdict(True, rule, shown, gold.shown)
    return verdict(False, rule, shown, gold.shown)


