"""Stage 2a: clean an answer string before it is read as a number, text or an expression.

Only string rewrites live here (delimiters, spacing macros, units, percent and degree marks,
thousands separators); anything that needs a grammar is left to the parsers. Each rewrite is
linear in the answer's length.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_WRAPPERS = re.compile(r"\\(?:textbf|textit|mathrm|mathbf|mathit|textrm|boldsymbol|mbox|text)\s*\{")
_ESCAPED_SPACE = re.compile(r"(?<!\\)\\[, ]")
_WHOLE_WRAPPER = re.compile(r"^\\(?:text|mbox|textbf|mathrm)\s*\{[^{}]*\}$")
_SPACING = re.compile(r"(?<!\\)\\(?:displaystyle|left|right|bigl|bigr|Bigl|Bigr|big|Big|!|;|:|quad|qquad)"
                      r"(?![A-Za-z])")
_THIN_BETWEEN_DIGITS = re.compile(r"(?<=\d)(?:(?<!\\)\\,|\{,\}|\\ |~)(?=\d{3}(?!\d))")
_PERCENT = re.compile(r"\s*(?:\\%|%|\\text\{\s*percent\s*\}|\s+percent\b)\s*$", re.IGNORECASE)
_DEGREE = re.compile(r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|°|\\degree|\^\s*\{\\text\{o\}\})\s*$")
_DOLLAR = re.compile(r"\\\$|^\$(?=\d)|\\text\{\s*\\?\$\s*\}")
# A unit in \text{}, \mbox{}, \mathrm{} or \textrm{}; a lone e or i is a constant, not a unit.
_UNIT_MACRO = r"\\(?:text|mbox|mathrm|textrm)\s*\{\s*(?![ei]\s*\})"
_TRAILING_TEXT_UNIT = re.compile(r"(?<=[\d}\)])\s*" + _UNIT_MACRO + r"[A-Za-z][A-Za-z.\s^0-9/]*\}\s*$")
_TRAILING_WORD_UNIT = re.compile(r"(?<=[\d}\)])\s+[A-Za-z]{2,}(?:[\s\-][A-Za-z]{2,})*\.?\s*$")
_UNIT_POWER = re.compile(r"(?<=[\d}\)])\s*" + _UNIT_MACRO + r"[A-Za-z]+\s*\}\s*\^\s*\{?\d\}?\s*$")
_SPACES = re.compile(r"\s+")
# Unicode mathematical symbols models write in place of their LaTeX commands. Without this, a
# Unicode minus reads as an operation ("−3" failed final_form) and "∞" or "√2" were unparsable.
_UNICODE = str.maketrans({"\u2212": "-", "\u221e": "\\infty ", "\u00d7": "\\times ",
                          "\u22c5": "\\cdot ", "\u00b7": "\\cdot ", "\u00f7": "\\div ",
                          "\u221a": "\\sqrt", "\u2264": "\\le ", "\u2265": "\\ge ",
                          "\u2260": "\\neq ", "\u03c0": "\\pi ", "\u2205": "\\emptyset "})
_VARNOTHING = re.compile(r"\\varnothing(?![A-Za-z])")
_FRAC_VARIANTS = re.compile(r"\\[dt]frac(?![A-Za-z])")
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
    s = _FRAC_VARIANTS.sub(r"\\frac", s)
    s = _THIN_BETWEEN_DIGITS.sub("", s)
    s = _ESCAPED_SPACE.sub(" ", s.replace("{,}", ",")).replace("~", " ")
    if _WHOLE_WRAPPER.match(s):
        s = unwrap_text(s).strip()
    s = _SPACING.sub(" ", s)
    s = _DOLLAR.sub("", s)
    s = s.strip().rstrip(".").strip()
    percent = degree = False
    for _ in range(2):
        if strip_units:
            s = _UNIT_POWER.sub("", s)
            s = _TRAILING_TEXT_UNIT.sub("", s)
            m = _TRAILING_WORD_UNIT.search(s)
            if m and not set(m.group(0).lower().replace("-", " ").split()) & _MATH_WORDS:
                s = s[:m.start()]
        m = _PERCENT.search(s)
        if m:
            percent, s = True, s[:m.start()]
        m = _DEGREE.search(s)
        if m:
            degree, s = True, s[:m.start()]
    s = _SPACES.sub(" ", s).strip()
    return Normalized(s, percent, degree)


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
