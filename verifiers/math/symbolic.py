"""Stage 3, the expensive part: read answers with latex2sympy and compare them with sympy.

Runs only inside the worker processes of :mod:`.pool`, where a deadline and a memory limit bound
it. Comparison goes from cheap to expensive: exact/numeric values, then symbolic (the difference
expands to zero, or agrees at generic points when free symbols remain), then structural (sets,
intervals, tuples, matrices, equations, inequalities), element by element.
"""
from __future__ import annotations

import math
import zlib
from collections import OrderedDict
from typing import Any

import sympy
from latex2sympy2_extended.latex2sympy2 import ConversionConfig, latex2sympy
from latex2sympy2_extended.math_normalization import NormalizationConfig
from sympy.matrices import MatrixBase

from .config import MathOptions
from .fastexpr import N_POINTS, SAMPLE_VALUES
from .normal_form import Answer, Gold, is_final_literal, percent_factors
from .verdict_record import verdict

_NORMALIZATION = NormalizationConfig(basic_latex=True, units=False, malformed_operators=True,
                                     nits=False, boxed="none", equations=False)
_CONVERSION = ConversionConfig(interpret_as_mixed_fractions=True,
                               interpret_simple_eq_as_assignment=False,
                               interpret_contains_as_eq=True, lowercase_symbols=False)
_I = sympy.Symbol("i")
_GOLD_CACHE: "OrderedDict[tuple[str, bool], Any]" = OrderedDict()
_GOLD_CACHE_SIZE = 512


def _sample_value(name: str, k: int) -> float:
    """The value of symbol ``name`` at sample point ``k``: the fast path's value for a single
    letter, a fixed generic value derived from the name otherwise."""
    if name in SAMPLE_VALUES:
        return SAMPLE_VALUES[name][k]
    h = zlib.crc32(f"{name}/{k}".encode()) / 2**32
    return (0.3 + 2.4 * h) * (1 if k % 2 == 0 else -1)


class Unparsable(ValueError):
    """latex2sympy could not read the answer."""


def parse(text: str, complex_i: bool) -> Any:
    """A sympy object for a cleaned answer; raises :class:`Unparsable`."""
    try:
        obj = latex2sympy(text, normalization_config=_NORMALIZATION, conversion_config=_CONVERSION)
    except (MemoryError, RecursionError):
        raise
    except Exception as exc:  # noqa: BLE001 - latex2sympy raises bare Exceptions on syntax errors
        raise Unparsable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    if complex_i and isinstance(obj, sympy.Basic) and _I in obj.free_symbols:
        obj = obj.xreplace({_I: sympy.I})
    if isinstance(obj, sympy.MatrixExpr) and not isinstance(obj, MatrixBase):
        try:  # a sum or product of explicit matrices: its value (final_form still sees it)
            obj = obj.as_explicit()
        except Exception:  # noqa: BLE001 - symbolic matrices stay as they are
            pass
    return obj


def parse_gold(gold: Gold, complex_i: bool) -> Any:
    """The gold's sympy object, parsed once per worker (an LRU cache keyed by its text)."""
    key = (gold.norm.text, complex_i)
    if key in _GOLD_CACHE:
        _GOLD_CACHE.move_to_end(key)
        return _GOLD_CACHE[key]
    text = gold.norm.text.replace(",", "") if gold.kind == "value" else gold.norm.text
    try:
        obj: Any = parse(text, complex_i)
    except Unparsable as exc:
        obj = exc
    _GOLD_CACHE[key] = obj
    if len(_GOLD_CACHE) > _GOLD_CACHE_SIZE:
        _GOLD_CACHE.popitem(last=False)
    return obj


def _has_float(e: Any) -> bool:
    return isinstance(e, sympy.Basic) and e.has(sympy.Float)


def _numbers_equal(g: sympy.Expr, p: sympy.Expr, rel_tol: float) -> bool:
    if g.is_Rational and p.is_Rational:
        return bool(g == p)
    approx = _has_float(g) or _has_float(p)
    try:
        gv, pv = complex(sympy.N(g, 30)), complex(sympy.N(p, 30))
    except (TypeError, ValueError):
        return bool(sympy.simplify(g - p) == 0)
    if not all(math.isfinite(x) for x in (gv.real, gv.imag, pv.real, pv.imag)):
        return False
    scale = max(abs(gv), abs(pv))
    tol = rel_tol if approx else 1e-12
    return abs(gv - pv) <= (tol * scale if scale > 1e-12 else 1e-12)


def _exprs_equal(g: Any, p: Any, rel_tol: float) -> tuple[bool, str]:
    if not isinstance(g, sympy.Expr) or not isinstance(p, sympy.Expr):
        return bool(g == p), "structural"
    if g == p:
        return True, "exact"
    if not (g.is_finite is not False and p.is_finite is not False):
        return False, "numeric"  # oo against a different value
    fg, fp = g.free_symbols, p.free_symbols
    if not fg and not fp:
        return _numbers_equal(g, p, rel_tol), "numeric"
    diff = g - p
    if sympy.expand(diff) == 0:
        return True, "symbolic"
    symbols = sorted(fg | fp, key=str)
    tol = rel_tol if _has_float(g) or _has_float(p) else 1e-9
    undecided = False
    for k in range(N_POINTS):
        subs = {s: sympy.Float(_sample_value(str(s), k), 20) for s in symbols}
        try:
            gv, pv = complex(sympy.N(g.xreplace(subs), 20)), complex(sympy.N(p.xreplace(subs), 20))
        except (TypeError, ValueError, ZeroDivisionError):
            undecided = True
            continue
        if not all(math.isfinite(x) for x in (gv.real, gv.imag, pv.real, pv.imag)):
            undecided = True
            continue
        scale = max(abs(gv), abs(pv))
        if abs(gv - pv) > (tol * scale if scale > 1e-12 else 1e-12):
            return False, "symbolic"
    if undecided:
        return bool(sympy.simplify(diff) == 0), "symbolic"
    return True, "symbolic"


def _elements(obj: Any) -> list[Any] | None:
    if isinstance(obj, (sympy.FiniteSet, sympy.Tuple)):
        return list(obj.args)
    if isinstance(obj, MatrixBase) and 1 in obj.shape:
        return list(obj)
    return None


def _set_equal(gs: list[Any], ps: list[Any], opts: MathOptions) -> bool:
    """Unordered match: every gold element pairs with a distinct equal prediction element."""
    if len(gs) != len(ps):
        return False
    remaining = list(ps)
    for g in gs:
        for j, p in enumerate(remaining):
            if equivalent(g, p, opts)[0]:
                del remaining[j]
                break
        else:
            return False
    return True


def _as_set(obj: Any) -> Any:
    if isinstance(obj, (sympy.Interval, sympy.Union, sympy.sets.sets.EmptySet)):
        return obj
    if isinstance(obj, (sympy.core.relational.Relational, sympy.And, sympy.Or)) and not isinstance(
            obj, sympy.Eq) and len(obj.free_symbols) == 1:
        return obj.as_set()
    return None


def _sets_equal(g: Any, p: Any, opts: MathOptions) -> bool:
    gi = list(g.args) if isinstance(g, sympy.Union) else [g]
    pi = list(p.args) if isinstance(p, sympy.Union) else [p]
    if len(gi) != len(pi):
        return False
    for a, b in zip(sorted(gi, key=sympy.default_sort_key), sorted(pi, key=sympy.default_sort_key)):
        if type(a) is not type(b):
            return False
        if isinstance(a, sympy.Interval):
            if (a.left_open, a.right_open) != (b.left_open, b.right_open):
                return False
            if not (equivalent(a.start, b.start, opts)[0] and equivalent(a.end, b.end, opts)[0]):
                return False
        elif a != b and not _set_equal(list(a.args), list(b.args), opts):
            return False
    return True


def _equation_value(obj: Any) -> Any:
    """``x = 3`` states 3; ``x \\in \\{1, 2\\}`` states {1, 2}."""
    if isinstance(obj, sympy.Eq) and isinstance(obj.lhs, sympy.Symbol):
        return obj.rhs
    return obj


def equivalent(g: Any, p: Any, opts: MathOptions) -> tuple[bool, str]:
    """Whether prediction ``p`` states the same answer as gold ``g``, and the deciding rule."""
    if isinstance(g, MatrixBase) or isinstance(p, MatrixBase):
        if isinstance(g, MatrixBase) and isinstance(p, MatrixBase):
            if g.shape != p.shape:
                return False, "structural"
            return all(equivalent(a, b, opts)[0] for a, b in zip(g, p)), "structural"
        ge, pe = _elements(g), _elements(p)
        ok = ge is not None and pe is not None and len(ge) == len(pe) and all(
            equivalent(a, b, opts)[0] for a, b in zip(ge, pe))
        return ok, "structural"
    if isinstance(g, sympy.Eq) and isinstance(p, sympy.Eq):
        if g.lhs == p.lhs and isinstance(g.lhs, sympy.Symbol):
            return equivalent(g.rhs, p.rhs, opts)[0], "symbolic"
        dg, dp = g.lhs - g.rhs, p.lhs - p.rhs
        if isinstance(dg, sympy.Expr) and isinstance(dp, sympy.Expr) and dp != 0:
            ratio = sympy.simplify(dg / dp)
            return bool(ratio.free_symbols == set() and ratio != 0 and ratio.is_finite), "symbolic"
        return False, "symbolic"
    if isinstance(g, sympy.Eq) or isinstance(p, sympy.Eq):
        g2, p2 = _equation_value(g), _equation_value(p)
        if g2 is g and p2 is p:
            return False, "symbolic"
        return equivalent(g2, p2, opts)
    gset, pset = _as_set(g), _as_set(p)
    if gset is not None or pset is not None:
        if gset is None or pset is None:
            return False, "structural"
        return _sets_equal(gset, pset, opts), "structural"
    if isinstance(g, sympy.FiniteSet) or isinstance(p, sympy.FiniteSet):
        ge = list(g.args) if isinstance(g, sympy.FiniteSet) else [g]
        pe = list(p.args) if isinstance(p, sympy.FiniteSet) else [p]
        return _set_equal(ge, pe, opts), "structural"
    if isinstance(g, sympy.Tuple) or isinstance(p, sympy.Tuple):
        if not (isinstance(g, sympy.Tuple) and isinstance(p, sympy.Tuple)) or len(g) != len(p):
            return False, "structural"
        return all(equivalent(a, b, opts)[0] for a, b in zip(g.args, p.args)), "structural"
    return _exprs_equal(g, p, opts.rel_tol)


def _is_rational(obj: Any) -> bool:
    target = _equation_value(obj)
    return isinstance(target, sympy.Basic) and bool(target.is_Rational)


def _is_list(obj: Any) -> bool:
    return isinstance(obj, (sympy.FiniteSet, sympy.Tuple)) and len(obj.args) > 1


def _nonfinal_nodes(obj: Any) -> bool:
    """Whether ``obj`` holds an operation on numbers that evaluates to a rational (``3+4``,
    ``123 \\cdot 456``, ``2^{10}``, ``\\sqrt{16}``, ``10!``): a value left to the grader.
    A sign, a power of ten (scientific notation) and a radical that stays irrational are final."""
    items = list(obj) if isinstance(obj, MatrixBase) else [obj]
    for item in items:
        if not isinstance(item, sympy.Basic):
            continue
        for node in sympy.preorder_traversal(item):
            if node.is_Atom or not node.args or node.free_symbols:
                continue
            if not all(a.is_Number for a in node.args):
                continue
            if isinstance(node, sympy.Mul) and len(node.args) == 2 and -1 in node.args:
                continue
            if isinstance(node, sympy.Pow) and node.args[0] == 10 and node.args[1].is_Integer:
                continue
            try:
                value = node.func(*node.args)
            except Exception:  # noqa: BLE001 - an undefined operation is not a final value either
                return True
            if getattr(value, "is_Rational", False) or getattr(value, "is_Float", False):
                return True
    return False


def compare_symbolic(gold: Gold, answer: Answer, opts: MathOptions, percent_question: bool = False
                     ) -> dict[str, Any]:
    """Compare one answer with the gold with sympy (inside a worker)."""
    g = parse_gold(gold, opts.complex_i)
    norm, canon = answer.norm, answer.canonical
    if isinstance(g, Unparsable):
        return verdict(False, None, canon, gold.canonical, "unparsable",
                       detail=f"the gold answer could not be read: {g}")
    try:
        p = parse(norm.text, opts.complex_i)
    except Unparsable as exc:
        return verdict(False, None, canon, str(g), "unparsable", detail=str(exc)[:200])
    shown = str(p)
    if _is_list(p) and not _is_list(g) and not isinstance(g, (sympy.Interval, sympy.Union,
                                                                  MatrixBase)):
        if len(set(p.args)) > 1:
            return verdict(False, "structural", shown, str(g), "conflicting",
                           detail="a list of answers where the gold is a single value")
    if isinstance(p, sympy.FiniteSet) and len(p.args) > 1 and not isinstance(g, sympy.FiniteSet) \
            and not _is_list(g):
        return verdict(False, "structural", shown, str(g), "conflicting")
    variants = [p]
    if norm.percent != gold.norm.percent and isinstance(p, sympy.Expr):
        variants = [p * sympy.Rational(f.numerator, f.denominator) for f in percent_factors(
            gold.norm.percent, norm.percent, percent_question)]
    if norm.degree and not gold.norm.degree and isinstance(g, sympy.Basic) and g.has(sympy.pi) \
            and isinstance(p, sympy.Expr):
        variants.append(p * sympy.pi / 180)
    rule = "symbolic"
    for q in variants:
        same, rule = equivalent(g, q, opts)
        if same:
            if opts.final_form and not _nonfinal_nodes(g) and (
                    _nonfinal_nodes(p) or (_is_rational(g) and not is_final_literal(norm.text,
                                                                                   opts))):
                return verdict(False, "final_form", shown, str(g),
                               detail="the prediction is an expression left to evaluate")
            return verdict(True, rule, shown, str(g))
    return verdict(False, rule, shown, str(g))
