"""Stage 2a: clean an answer string before it is read as a number, text or an expression.

Only string rewrites live here (delimiters, spacing macros, units, percent and degree marks,
thousands separators); anything that needs a grammar is left to the parsers. Each rewrite is
linear in the answer's length.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace

from . import fastexpr

_WRAPPERS = re.compile(r"\\(?:textbf|textit|textnormal|mathrm|mathbf|mathit|textrm|boldsymbol|mbox|text)"
                       r"\s*\{")
_ESCAPED_SPACE = re.compile(r"(?<!\\)\\[, ]")
_WHOLE_WRAPPER = re.compile(r"^\\(?:text|mbox|textbf|textnormal|mathrm)\s*\{[^{}]*\}$")
_SPACING = re.compile(r"(?<!\\)\\(?:displaystyle|left|right|bigl|bigr|Bigl|Bigr|big|Big|!|;|:|quad|qquad)"
                      r"(?![A-Za-z])")
# Spacing commands with an argument (\hspace{1mm}, \hspace*{2pt}, \kern3pt, \phantom{0}) change
# the layout, never the value.
_SPACING_ARG = re.compile(r"\\(?:hspace|vspace|hskip|kern|mkern|mskip|phantom|hphantom|vphantom)\*?\s*"
                          r"(?:\{[^{}]{0,40}\}|-?[\d.]+\s*(?:pt|mm|cm|em|ex|mu|in)\b)")
_DOLLAR_BEFORE_PERCENT = re.compile(r"\$\s*(?=(?:\\?%|percent|pct)\s*$)")
# One value of a function in a relation: "0 < f(x) < 1" bounds the values of f, like "0 < y < 1".
_FUNCTION_APPLIED = re.compile(r"(?<![A-Za-z\\])[A-Za-z]\(\s*[A-Za-z]\s*\)")
_RELATION = re.compile(r"<|>|\\[lg]eq?(?![A-Za-z])|\\[lg]t(?![A-Za-z])")
_BRACED_COMMA = re.compile(r"(?<=\d)\s*\{\s*,\s*\}\s*(?=\d)|\{\s*,\s*\}")
_THIN_BETWEEN_DIGITS = re.compile(r"(?<=\d)(?:(?<!\\)\\,|\{,\}|\\ |~)(?=\d{3}(?!\d))")
# "12,\!000" and "12{,}\!000": a thousands comma followed by a negative thin space.
_COMMA_THIN = re.compile(r"(?<=\d)(?:,|\{,\})\s*\\!\s*(?=\d{3}(?!\d))")
_PERCENT = re.compile(r"\s*(?:\\%|%|\\text\{\s*percent\s*\}|(?<=[\d\s}])(?:percent(?:age)?|pct)\b)\s*$",
                      re.IGNORECASE)
_DEGREE = re.compile(r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|°|\\degree|\^\s*\{\\text\{o\}\})\s*$")
_DOLLAR = re.compile(r"\\\$|^\$(?=\d)|(?<=\d)\$$|\\text\{\s*\\?\$\s*\}|[\u20ac\u00a3\u00a5]")
# A unit in \text{}, \mbox{}, \mathrm{} or \textrm{}; a lone e or i is a constant, not a unit.
_UNIT_MACRO = r"\\(?:text|mbox|mathrm|textrm|textnormal|textbf|textit)\s*\{\s*(?![ei]\s*\})"
# A trailing unit follows a value (a digit, a closing bracket or a constant such as \pi); its
# words never include a number or a hedge ("3 \text{ apples or 4}" is not 3 apples).
_TRAILING_TEXT_UNIT = re.compile(r"(?<=[\d}\)a-z])\s*" + _UNIT_MACRO
                                 + r"([A-Za-z][A-Za-z.\s^0-9/]*)\}\s*$")
_TRAILING_WORD_UNIT = re.compile(r"(?<=[\d}\)])\s+[A-Za-z]{2,}(?:[\s\-][A-Za-z]{2,})*\.?\s*$")
_UNIT_POWER = re.compile(r"(?<=[\d}\)a-z])\s*" + _UNIT_MACRO + r"[A-Za-z]+\s*\}\s*\^\s*\{?\d\}?\s*$")
# A one-letter SI unit after a number and a space ("38 m", "5 g"); a letter glued to the number,
# or any other letter, is a variable (``3x``, ``3 x``).
_TRAILING_LETTER_UNIT = re.compile(r"(?<=\d)\s+[mgshL]\.?\s*$")
_HEDGE_WORDS = {"or", "and", "maybe", "perhaps", "possibly", "probably", "either", "not", "nor",
                "about", "approximately", "roughly", "unless", "else", "otherwise", "one", "two",
                "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve", "twenty", "hundred", "thousand", "million", "zero"}
_OVERLINE = re.compile(r"^(-?)(\d*)\.(\d*)\\overline\{(\d{1,12})\}$")
_BASE_SUBSCRIPT = re.compile(r"(?<=[0-9A-Za-z])_\{(\d{1,2})\}")
_NAME_COMMANDS = re.compile(r"\\(?:frac|dfrac|tfrac|angle|overline|triangle|mathrm|text|operatorname|"
                            r"left|right|cdot|prime|vec|hat|bar|measuredangle)(?![A-Za-z])")
_CONSTANT_COMMANDS = re.compile(r"\\[A-Za-z]+")
_SUBSCRIPT = re.compile(r"_\{[^{}]*\}|_[A-Za-z0-9]")
_NAMED_MAGNITUDE = re.compile(r"^\s*(?:\\left)?(?:\||\\lvert|\\vert)\s*(?:\\overline\{[A-Z]{1,3}\}|[A-Z]{1,3})"
                              r"\s*(?:\\right)?(?:\||\\rvert|\\vert)\s*$")
_SPACES = re.compile(r"\s+")
# Invisible characters (zero-width space and joiners, word joiner, soft hyphen, byte-order mark)
# are no part of what a reader sees: "1\u20600" is 10.
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\u00ad\ufeff"), None)


def _vulgar_fractions() -> dict[int, str]:
    """``\u00bd`` → ``\\frac{1}{2}`` for every vulgar fraction Unicode decomposes as
    ``<fraction> a \u2044 b`` (``4\u00bd`` then reads as the mixed number 4\\frac{1}{2})."""
    table = {}
    for c in (0xbc, 0xbd, 0xbe, *range(0x2150, 0x215f)):
        parts = unicodedata.decomposition(chr(c)).split()
        num, den = parts[1:parts.index("2044")], parts[parts.index("2044") + 1:]
        table[c] = "\\frac{%s}{%s}" % ("".join(chr(int(h, 16)) for h in num),
                                         "".join(chr(int(h, 16)) for h in den))
    return table


# Unicode mathematical symbols models write in place of their LaTeX commands. Without this, a
# Unicode minus reads as an operation ("−3" failed final_form) and "∞" or "√2" were unparsable.
_UNICODE = str.maketrans({**_INVISIBLE, **_vulgar_fractions(), "\u2212": "-", "\u221e": "\\infty ", "\u00d7": "\\times ",
                          "\u22c5": "\\cdot ", "\u00b7": "\\cdot ", "\u00f7": "\\div ",
                          "\u221a": "\\sqrt", "\u2264": "\\le ", "\u2265": "\\ge ",
                          "\u2260": "\\neq ", "\u03c0": "\\pi ", "\u2205": "\\emptyset "})
_VARNOTHING = re.compile(r"\\varnothing(?![A-Za-z])")
# \textcolor{red}{7} and \color{red} 7: a colour is formatting, the value is what it colours.
_COLOR = re.compile(r"\\(?:textcolor|color)\s*\{[A-Za-z0-9!., ]{0,40}\}")
_FRAC_VARIANTS = re.compile(r"\\[dtc]frac(?![A-Za-z])")
_INNER_DOLLAR = re.compile(r"(?<![\\\d])\$(?!\d)")
_MATH_WORDS = {"pi", "sqrt", "frac", "infty", "inf", "sin", "cos", "tan", "log", "ln", "exp",
               "or", "and", "cdot", "times", "le", "ge", "leq", "geq", "neq", "in", "cup", "cap",
               "emptyset", "varnothing", "pm", "mp", "sec", "csc", "cot", "arcsin", "arccos",
               "arctan", "theta", "alpha", "beta", "gamma", "mod", "pmod", "binom"}
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_TEXT_CHARS = re.compile(r"^[A-Za-z][A-Za-z\s'\-]*$")
_CHOICE = re.compile(r"^\(?([A-J])\)?$")
_CHOICE_PRED = re.compile(r"^\(?([A-Ja-j])\)(?:\s|$|[.:,])|^([A-Ja-j])(?:$|[.:,)]|\s)")


@dataclass(frozen=True)
class Normalized:
    """An answer string after cleaning, with the marks that change its meaning."""

    text: str
    percent: bool = False
    degree: bool = False
    #: the name an answer ``name = value`` assigned (``x`` of ``x = 3``), else None
    name: str | None = None
    #: the text before ``name = value`` was read as its value
    written: str | None = None
    #: the names of a tuple stated by name (``k = 3, n = 5`` → ``("k", "n")``), else ()
    names: tuple[str, ...] = ()
    #: an equation chain whose members have different values (``x = 4 = 5``)
    chain_conflict: bool = False
    #: an equation whose sides are all the same (``5 = 5``): it states no answer
    tautology: bool = False
    #: the unit dropped after the value (``cm`` of ``5 \\text{ cm}``), else None
    unit: str | None = None


def unwrap_text(s: str) -> str:
    """``\\text{abc}`` (and bold/roman variants) → ``abc``, keeping nested braces balanced."""
    out = s
    for _ in range(8):  # wrappers nest rarely; a bound keeps this linear
        m = _WRAPPERS.search(out)
        if m is None:
            break
        depth, j = 1, m.end()
        while j < len(out) and depth:
            if out[j] == "{":
                depth += 1
            elif out[j] == "}":
                depth -= 1
            j += 1
        if depth:
            break
        out = out[:m.start()] + out[m.end():j - 1] + out[j:]
    return out


def clean(answer: str, strip_units: bool = True) -> Normalized:
    """Remove formatting that never changes the value; record percent and degree marks."""
    s = _VARNOTHING.sub(r"\\emptyset", answer.translate(_UNICODE)).strip()
    while len(s) >= 2 and s[0] == "$" and s[-1] == "$":
        s = s[1:-1].strip()
    if s.startswith("\\(") and s.endswith("\\)") or s.startswith("\\[") and s.endswith("\\]"):
        s = s[2:-2].strip()
    s = _COLOR.sub("", _FRAC_VARIANTS.sub(r"\\frac", s))
    if "$" in s:  # math switched off and on inside an answer ("12 $ and $13")
        s = _INNER_DOLLAR.sub(" ", s)
    if s.startswith("{") and s.endswith("}") and _balanced_group(s):
        s = s[1:-1].strip()  # a LaTeX group around the whole answer: {1,3}
    s = _SPACING_ARG.sub(" ", _BRACED_COMMA.sub("{,}", s))
    s = _COMMA_THIN.sub(",", s)
    s = _THIN_BETWEEN_DIGITS.sub("", s)
    s = _ESCAPED_SPACE.sub(" ", s.replace("{,}", ",")).replace("~", " ")
    if _WHOLE_WRAPPER.match(s):
        s = unwrap_text(s).strip()
    s = _SPACING.sub(" ", s)
    s = _DOLLAR.sub("", s)
    s = s.strip()
    s = s if s.endswith(("...", "\\dots", "\\ldots")) else s.rstrip(".").strip()  # "1, 2, ..." is kept
    s = _DOLLAR_BEFORE_PERCENT.sub(" ", s)  # "$28$ %": the percent sign outside the math
    s = _function_value(s)
    percent = degree = False
    unit = None
    for _ in range(2):
        m = _PERCENT.search(s)
        if m:
            percent, s = True, s[:m.start()]
        if strip_units:
            s, unit = _drop_unit(s, unit)
        m = _DEGREE.search(s)
        if m:
            degree, s = True, s[:m.start()]
    s = _SPACES.sub(" ", s).strip()
    s = _set_of_reals(_number_word(s))
    s = _BASE_SUBSCRIPT.sub(r"_\1", s)
    s = repeating_decimal(s)
    stated, names = stated_value(s)
    name = None
    if stated != s:
        lhs = split_top(s, "=")[0].strip()
        name = canonical_string(lhs) if len(split_list(s)) == 1 and _is_name(lhs) else None
    conflict, tautology = _chain_flags(s) if "=" in s else (False, False)
    return Normalized(stated, percent, degree, name, s, names, conflict, tautology, unit)


def _drop_unit(s: str, unit: str | None) -> tuple[str, str | None]:
    """``s`` without a trailing unit, and the unit's words (kept: another unit than the one
    asked for is another answer, see :mod:`.units`)."""
    for pattern in (_UNIT_POWER, _TRAILING_TEXT_UNIT, _TRAILING_WORD_UNIT, _TRAILING_LETTER_UNIT):
        m = pattern.search(s)
        if m is None or not s[:m.start()].strip():
            continue
        words = m.group(1) if pattern is _TRAILING_TEXT_UNIT else m.group(0)
        if pattern in (_UNIT_POWER, _TRAILING_LETTER_UNIT) or _is_unit(words):
            s, unit = s[:m.start()], unit or words.strip()
    return s, unit


_NUMBER_WORDS = {w: k for k, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({w: 10 * k for k, w in enumerate(
    "thirty forty fifty sixty seventy eighty ninety".split(), start=3)})
_SPELLED = re.compile(r"^\\(?:text|textbf|textit|mathrm|mbox)\s*\{\s*([A-Za-z]+)(?:[\s-]([A-Za-z]+))?"
                      r"\s*\}$|^([A-Za-z]+)(?:-([A-Za-z]+))?$")


def _number_word(s: str) -> str:
    """A whole answer spelled as a number (``\\text{seven}``, "twenty-one") is that number."""
    m = _SPELLED.match(s)
    if not m:
        return s
    first, second = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    tens, ones = _NUMBER_WORDS.get(first.lower()), _NUMBER_WORDS.get((second or "").lower(), 0)
    if tens is None or (second and (tens < 20 or tens % 10 or not 0 < ones < 10)):
        return s
    return str(tens + ones)


_REALS = re.compile(r"^(?:[A-Za-z]\s*\\in\s*)?(?:\\mathbb\s*\{?\s*R\s*\}?|\\R|\u211d|\\text\{\s*"
                    r"(?:all\s+)?real\s+numbers\s*\}|(?:all\s+)?real\s+numbers|all\s+reals)$",
                    re.IGNORECASE)


def _set_of_reals(s: str) -> str:
    """The real numbers, however written (``\\mathbb{R}``, "all real numbers", ``x \\in
    \\mathbb{R}``), as the interval ``(-\\infty, \\infty)``."""
    return "(-\\infty, \\infty)" if _REALS.match(s) else s


def align_names(pred: Normalized, gold: Normalized) -> Normalized:
    """A tuple stated by name in the gold's order: ``n = 5, k = 3`` against ``k = 3, n = 5``
    is ``(3, 5)``. The asked quantities are matched by name, whatever order they come in."""
    if not pred.names or set(pred.names) != set(gold.names) or pred.names == gold.names:
        return pred
    values = dict(zip(pred.names, split_top(pred.text[1:-1], ",")))
    text = "(" + ", ".join(values[n].strip() for n in gold.names) + ")"
    return replace(pred, text=text, names=gold.names)


def _chain_flags(s: str) -> tuple[bool, bool]:
    """Whether an equation (chain) asserts values that differ (``x = 4 = 5``: the members
    disagree), and whether all its sides are the same (``5 = 5``: a tautology, no answer)."""
    if len(split_list(s)) != 1 or re.search(r"[<>!]=|\\[lgn]eq?(?![A-Za-z])|==", s):
        return False, False
    sides = [canonical_string(x) for x in split_top(s, "=")]
    if len(sides) < 2 or not all(sides):
        return False, False
    if len(set(sides)) == 1:
        return False, True
    values = [v for v in (fastexpr.read(x) for x in sides if _value_free(x)) if v is not None]
    conflict = any(not fastexpr.equal(values[0], v, 1e-9)[0] for v in values[1:])
    return conflict, False


def _function_value(s: str) -> str:
    """``0 < f(x) < 1`` → ``0 < y < 1``: a relation on the values of one function application
    (and nothing else variable) describes a set of values, as the interval ``(0, 1)`` does."""
    if not _RELATION.search(s) or "(" not in s:
        return s
    found = set(_FUNCTION_APPLIED.findall(s))
    if len(found) != 1:
        return s
    rest = _CONSTANT_COMMANDS.sub(" ", _FUNCTION_APPLIED.sub(" ", s))
    if re.search(r"[A-Za-z]", rest):
        return s
    return _FUNCTION_APPLIED.sub("y", s)


def _balanced_group(s: str) -> bool:
    """Whether the ``{`` at the start of ``s`` closes at its very end."""
    depth = 0
    for k, c in enumerate(s):
        depth += c == "{"
        depth -= c == "}"
        if depth == 0 and k < len(s) - 1:
            return False
    return depth == 0


def _is_unit(words: str) -> bool:
    """Whether trailing words can be a unit: no number, no hedge, no mathematics."""
    if any(c.isdigit() for c in words.replace("^2", "").replace("^3", "")):
        return False
    found = set(re.split(r"[\s\-./^]+", words.lower())) - {""}
    return not found & (_MATH_WORDS | _HEDGE_WORDS)


def repeating_decimal(s: str) -> str:
    """``0.\\overline{3}`` → ``\\frac{1}{3}``: a repeating decimal is a standard notation of a
    rational value, read exactly."""
    m = _OVERLINE.match(s)
    if not m:
        return s
    sign, whole, fixed, period = m.groups()
    from fractions import Fraction

    base = Fraction(int(whole or "0")) + (Fraction(int(fixed), 10 ** len(fixed)) if fixed else 0)
    value = base + Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(fixed))
    if sign:
        value = -value
    if value.denominator == 1:
        return str(value.numerator)
    return f"{'-' if value < 0 else ''}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


_LIST_SEP = re.compile(r"\s*(?:,|;|\\text\{\s*(?:or|and)\s*\}|\bor\b|\band\b)\s*")


def split_list(text: str) -> list[str]:
    """Top-level parts of "3, 5, or 7" (commas, semicolons, "or", "and" outside brackets)."""
    parts, depth, start = [], 0, 0
    i = 0
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            m = _LIST_SEP.match(text, i)
            if m and m.group(0).strip() and (c in ",;\\" or text[i].isspace()):
                parts.append(text[start:i])
                start = i = m.end()
                continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def split_top(s: str, sep: str) -> list[str]:
    """``s`` split at any character of ``sep`` outside brackets (one pass)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c in sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return parts


def _is_name(s: str) -> bool:
    """A name being assigned: letters (``x``, ``AB``, ``V_1:V_2``, ``\\frac{NO}{BO}``,
    ``(p,q)``, ``f(3)``), never a number or an expression of numbers alone."""
    if "|" in s or "\\lvert" in s:
        # |x| = 5 is x = 5 or x = -5: two values, not the value of a name; but |AB| (capitals
        # alone: a segment's length, a set's size, a determinant) names one quantity
        return bool(_NAMED_MAGNITUDE.match(s))
    bare = _SUBSCRIPT.sub("", _NAME_COMMANDS.sub("", s))
    bare = re.sub(r"(?<=[A-Za-z])\([^()]*\)", "", bare)  # f(3) names a value of f
    if not re.search(r"[A-Za-z]", bare):
        return False
    return not re.search(r"\d", bare)


def _value_free(s: str) -> bool:
    """No variables (commands such as ``\\sqrt`` and ``\\pi``, and ``e``/``i``, are fine)."""
    return not re.search(r"[A-DF-HJ-Za-df-hj-z]", _CONSTANT_COMMANDS.sub("", s))


def stated_value(s: str) -> tuple[str, tuple[str, ...]]:
    """The value an answer of the form ``name = value`` states, and the names of a tuple stated
    by name.

    ``x = 3`` → ``3``; ``(p,q)=(3,2)`` → ``(3,2)``; ``\\frac{NO}{BO}=\\frac{1}{\\sqrt6}`` → the
    right side; an equation chain ``x = 5+5+1 = 11`` → ``11`` (its last value).

    **Several answers** follow one rule, the same for golds and predictions: values of one unknown
    (``x=1, x=2``, ``p = -1 and p = \\frac{15}{8}``) are its *solutions*, an unordered list
    ``1, 2``; values of different unknowns (``x=3, y=-1``, ``k = 3 and n = 5``) are the *asked
    quantities*, the tuple ``(3, -1)`` in the order written (their ``names`` let a comparison put
    them in the gold's order); a named tuple with several values (``(x, y) = (5, 8) and (8, 5)``)
    is the list of its solutions. An equation whose right side has variables (``y = 2x+1``,
    ``2x+3y=6``) is left as it is: it is the answer.
    """
    if ("=" not in s and not _APPROX.search(s)) or len(s) > 1000 or re.search(
            r"[<>!]=|\\[lgn]eq?(?![A-Za-z])|==", s):
        return s, ()
    parts = split_list(s)
    if len(parts) > 1:
        values = [_one_value(p) for p in parts]
        if values[0] is not None and all(v is None and _value_free(p) for v, p in
                                         zip(values[1:], parts[1:])):
            return ", ".join([values[0]] + parts[1:]), ()  # x = 2, 3
        if all(v is not None for v in values):
            names = [canonical_string(split_top(p, "=")[0]) for p in parts]
            if len(set(names)) == 1:  # x=1, x=2: the solutions of one unknown, in any order
                return ", ".join(values), ()  # type: ignore[arg-type]
            k = len(set(names))
            if len(names) >= 2 * k and names == names[:k] * (len(names) // k) and all(
                    _is_name(n) for n in names[:k]):
                # p=5, q=2; p=7, q=2: the solutions (5, 2) and (7, 2), in any order
                return ", ".join("(" + ", ".join(values[j:j + k]) + ")"  # type: ignore[arg-type]
                                 for j in range(0, len(values), k)), ()
            if len(set(names)) == len(names) and all(_is_name(n) for n in names):
                return "(" + ", ".join(values) + ")", tuple(names)  # type: ignore[arg-type]
            return "(" + ", ".join(values) + ")", ()  # type: ignore[arg-type]
        return s, ()
    return _one_value(s) or s, ()


# The left side of a function's definition: f(x), g(x, y), P_1(t).
_DEFINED_FUNCTION = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*\(\s*([A-Za-z](?:\s*,\s*[A-Za-z])*)\s*\)$")
_APPROX = re.compile(r"\\approx(?![A-Za-z])|\u2248")


def _one_value(s: str) -> str | None:
    # "x = 1/3 \approx 0.33": the exact value comes before the approximation
    approx = _APPROX.split(s)
    if len(approx) > 1:
        head = approx[0].strip()
        if "=" in head:
            return _one_value(head)
        if _is_name(head) and _value_free(approx[-1]):
            return approx[-1].strip()
        return None
    sides = [x.strip() for x in split_top(s, "=")]
    if len(sides) < 2 or not all(sides):
        return None
    last = sides[-1]
    definition = _DEFINED_FUNCTION.match(sides[0])
    if len(sides) == 2 and definition and set(re.findall(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])",
                                                         _CONSTANT_COMMANDS.sub(" ", last))) <= set(
            re.findall(r"[A-Za-z]", definition.group(1))):
        return last  # f(x) = 2x + 1 defines f by the expression 2x + 1
    if not _value_free(last):
        return None
    # a name, an arithmetic chain, or a chain of three or more sides ending on a value
    if _is_name(sides[0]) or all(_value_free(x) for x in sides[:-1]) or len(sides) > 2:
        return last
    return None


def as_text_answer(s: str) -> str | None:
    """The words of a text answer (``\\text{Monday}``, "the even numbers"), lower-cased and
    without articles; None when ``s`` looks like mathematics."""
    plain = unwrap_text(s).strip().rstrip(".").strip()
    if not _TEXT_CHARS.match(plain):
        return None
    words = plain.lower().replace("-", " ").split()
    if not any(len(w) >= 2 for w in words) or set(words) & _MATH_WORDS:
        return None
    words = _ARTICLES.sub(" ", " ".join(words)).split()
    return " ".join(words) if words else None


def as_choice(s: str) -> str | None:
    """The letter of a multiple-choice gold (``B``, ``(B)``, ``\\text{(B)}``), else None."""
    m = _CHOICE.match(unwrap_text(s).strip())
    return m.group(1) if m else None


def choice_of_prediction(s: str) -> str | None:
    """The letter a prediction picks (``B``, ``(b)``, ``(B) 12``, ``\\textbf{(B)}``), else None."""
    m = _CHOICE_PRED.match(unwrap_text(s).strip())
    if not m:
        return None
    return (m.group(1) or m.group(2)).upper()


def canonical_string(s: str) -> str:
    """A spacing-insensitive form for the cheapest comparison (string equality)."""
    return _SPACES.sub("", unwrap_text(s)).replace("\\left", "").replace("\\right", "")
