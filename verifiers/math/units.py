"""Units: which unit an answer is stated in, and whether it is the unit the task asks for.

Cleaning drops a unit after a value (``38 m``, ``36\\pi \\ \\mathrm{cm}^2``) so that the value
can be compared; it keeps the words it dropped. A unit is part of the answer, though: where the
gold or the problem names a unit, an answer in another one is another answer (250 m when
centimetres were asked, 90 hours for "how many minutes", 5 cents for "how many dollars"), the
way a strict grader reads it. Words that are no known unit ("apples", "square units") say
nothing either way.

The vocabulary is small and written here: the unit libraries (pint, astropy) parse quantities,
but what is needed is the few dozen names models and problem setters write, with their plurals
and spellings, mapped to one name each.
"""
from __future__ import annotations

import re

_NAMES: dict[str, tuple[str, ...]] = {
    "mm": ("mm", "millimeter", "millimetre"),
    "cm": ("cm", "centimeter", "centimetre"),
    "m": ("m", "meter", "metre"),
    "km": ("km", "kilometer", "kilometre"),
    "in": ("inch", "inches"),
    "ft": ("ft", "foot", "feet"),
    "yd": ("yd", "yard"),
    "mi": ("mi", "mile"),
    "s": ("s", "sec", "second"),
    "min": ("min", "minute"),
    "h": ("h", "hr", "hour"),
    "day": ("day",),
    "week": ("week",),
    "month": ("month",),
    "year": ("year", "yr"),
    "mg": ("mg", "milligram"),
    "g": ("g", "gram"),
    "kg": ("kg", "kilogram"),
    "lb": ("lb", "lbs", "pound"),
    "oz": ("oz", "ounce"),
    "ml": ("ml", "milliliter", "millilitre"),
    "l": ("l", "liter", "litre"),
    "gal": ("gal", "gallon"),
    "dollar": ("dollar", "usd"),
    "cent": ("cent", "cents"),
    "deg": ("deg", "degree"),
    "rad": ("rad", "radian"),
    "mph": ("mph",),
}
_ALIAS = {alias: name for name, aliases in _NAMES.items() for alias in aliases}
_POWER_WORDS = {"square": 2, "sq": 2, "cubic": 3, "cu": 3}
_POWER = re.compile(r"^(.*?)\s*(?:\^\s*\{?\s*([23])\s*\}?|([\u00b2\u00b3]))$")
_UNIT_WORD = "|".join(sorted((re.escape(a) for a in _ALIAS if len(a) > 1), key=len, reverse=True))
# Where a problem asks for a unit: "in centimeters", "how many minutes", "number of cents",
# "in $\text{cm}^2$", "to the nearest inch".
_ASKED = re.compile(
    r"\b(?:in|how\s+many|number\s+of|in\s+terms\s+of|measured\s+in|to\s+the\s+nearest(?:\s+\w+)?)"
    r"\s+\$?(?:\\(?:text|mathrm|mbox)\s*\{\s*)?((?:square\s+|sq\.?\s+|cubic\s+)?(?:" + _UNIT_WORD
    + r")(?:e?s)?)\b(?:\s*\}?\s*\^\s*\{?\s*[23])?", re.IGNORECASE)


def unit_name(words: str | None) -> str | None:
    """The one name of the unit ``words`` write (``centimeters`` → ``cm``, ``\\mathrm{cm}^2``
    and ``square centimetres`` → ``cm^2``), or None when they are no known unit."""
    if not words:
        return None
    text = re.sub(r"\\(?:text|mathrm|mbox|textrm|textnormal)\s*\{([^{}]*)\}", r"\1", words)
    text = text.strip().strip(".").strip()
    power = 1
    m = _POWER.match(text)
    if m:
        text = m.group(1)
        power = int(m.group(2)) if m.group(2) else (2 if m.group(3) == "\u00b2" else 3)
    parts = text.split()
    if len(parts) == 2 and parts[0].lower().rstrip(".") in _POWER_WORDS:
        power, parts = _POWER_WORDS[parts[0].lower().rstrip(".")], parts[1:]
    if len(parts) != 1:
        return None
    word = parts[0]
    word = word if word in ("L",) else word.lower()
    name = _ALIAS.get(word.lower()) or _ALIAS.get(_singular(word.lower()))
    if name is None:
        return None
    return name if power == 1 else f"{name}^{power}"


def _singular(word: str) -> str:
    for suffix in ("es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 1 and word[:-len(suffix)] in _ALIAS:
            return word[:-len(suffix)]
    return word


def asked_units(prompt: str, gold_unit: str | None) -> frozenset[str]:
    """The units the task asks for: the gold's when it names a known one, else those the problem
    asks for ("in centimeters", "how many minutes")."""
    gold = unit_name(gold_unit)
    if gold is not None:
        return frozenset((gold,))
    if not prompt:
        return frozenset()
    found = (unit_name(m.group(1)) for m in _ASKED.finditer(prompt[:20_000]))
    return frozenset(u for u in found if u is not None)


def unit_mismatch(pred_unit: str | None, gold_unit: str | None, prompt: str) -> str | None:
    """A sentence saying why the answer's unit is not the one asked for, or None when it is (or
    when either side names no known unit)."""
    unit = unit_name(pred_unit)
    if unit is None:
        return None
    asked = asked_units(prompt, gold_unit)
    if not asked or unit in asked:
        return None
    return f"the answer is in {unit}, the task asks for {', '.join(sorted(asked))}"
