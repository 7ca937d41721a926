"""A deterministic set of distinct (gold, completion) pairs mixed like RL math data.

Mostly integers (GSM8K-style ``####`` and boxed), then fractions, decimals, radicals and pi, a few
symbolic expressions and structured answers; half the completions are correct, and correct ones
are often written in a different but equivalent form (``0.5`` for ``\\frac{1}{2}``).
``python benchmarks/math_rl_mix.py [N]`` prints the mix as JSONL.
"""
from __future__ import annotations

import json
import random
import sys
from typing import Any

PROSE = ["Let's compute step by step.", "First we simplify the expression.",
         "We set up the equation and solve it.", "Counting the cases carefully,"]


def _wrap(rng: random.Random, answer: str, gsm8k: bool) -> str:
    lead = rng.choice(PROSE) + " " + " ".join(str(rng.randint(1, 99)) for _ in range(rng.randint(2, 8)))
    if gsm8k:
        return f"{lead}\n#### {answer}"
    return f"{lead} Therefore the answer is $\\boxed{{{answer}}}$."


def _integer(rng: random.Random, k: int, correct: bool) -> tuple[str, str, bool]:
    n = rng.randint(-50, 5000) * 1 + k
    shown = str(n) if correct else str(n + rng.choice((-10, -1, 1, 2, 7, 100)))
    if correct and n >= 1000 and rng.random() < 0.3:
        shown = f"{n:,}"
    return str(n), shown, rng.random() < 0.5


def _fraction(rng: random.Random, k: int, correct: bool) -> tuple[str, str, bool]:
    b = rng.randint(2, 40) + k % 7
    a = rng.randint(1, 3 * b)
    while _gcd(a, b) != 1:
        a += 1
    gold = f"\\frac{{{a}}}{{{b}}}"
    if correct:
        shown = rng.choice([gold, f"{a}/{b}", f"\\dfrac{{{a}}}{{{b}}}"])
    else:
        shown = f"\\frac{{{a + 1}}}{{{b}}}"
    return gold, shown, False


def _decimal(rng: random.Random, k: int, correct: bool) -> tuple[str, str, bool]:
    value = rng.randint(1, 99999) / 100 + k / 1000
    gold = f"{value:.3f}".rstrip("0").rstrip(".")
    shown = gold if correct else f"{value + 0.5:.3f}".rstrip("0").rstrip(".")
    if correct and rng.random() < 0.3:
        shown = gold + "0"
    return gold, shown, rng.random() < 0.3


def _radical(rng: random.Random, k: int, correct: bool) -> tuple[str, str, bool]:
    c, r = rng.randint(2, 9), rng.choice([2, 3, 5, 6, 7, 10, 11, 13])
    d = rng.randint(2, 12) + k % 5
    while _gcd(c, d) != 1:  # answers are stated in lowest terms
        d += 1
    kind = rng.random()
    if kind < 0.4:
        gold = f"\\frac{{{c}\\sqrt{{{r}}}}}{{{d}}}"
        same = f"\\frac{{{c}}}{{{d}}}\\sqrt{{{r}}}"
        wrong = f"\\frac{{{c}\\sqrt{{{r + 1}}}}}{{{d}}}"
    elif kind < 0.7:
        gold = f"{c}\\sqrt{{{r}}}"
        same = f"{c}\\,\\sqrt{{{r}}}"  # \sqrt{c^2 r} leaves a square factor inside: not final
        wrong = f"{c + 1}\\sqrt{{{r}}}"
    else:
        gold = f"\\frac{{{c}\\pi}}{{{d}}}"
        same = f"\\frac{{{c}}}{{{d}}}\\pi"
        wrong = f"\\frac{{{c}\\pi}}{{{d + 1}}}"
    return gold, (rng.choice([gold, same]) if correct else wrong), False


def _symbolic(rng: random.Random, k: int, correct: bool) -> tuple[str, str, bool]:
    a, b = rng.randint(1, 9), rng.randint(1, 9) + k % 11
    kind = rng.random()
    while kind >= 0.5 and kind < 0.8 and (_gcd(a, a + b) != 1 or _gcd(b, a + b) != 1):
        b += 1
    if kind < 0.5:
        gold = f"x^2+{2 * a}x+{a * a}"
        same = f"(x+{a})^2"
        wrong = f"(x-{a})^2"
    elif kind < 0.8:
        gold = f"\\frac{{{a}x+{b}}}{{{a + b}}}"
        same = f"\\frac{{{a}x}}{{{a + b}}}+\\frac{{{b}}}{{{a + b}}}"
        wrong = f"\\frac{{{a}x+{b + 1}}}{{{a + b}}}"
    elif kind < 0.9:
        gold = f"({a}, {b})"
        same = f"\\left({a},{b}\\right)"
        wrong = f"({b + 1}, {a})"
    else:  # functions: these go to the sympy path
        gold = f"{a}\\ln x + \\sin x"
        same = f"\\sin(x) + {a}\\ln(x)"
        wrong = f"{a}\\ln x + \\cos x"
    return gold, (same if correct else wrong), False


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


#: (generator, share of the mix)
MIX = ((_integer, 0.60), (_fraction, 0.13), (_decimal, 0.10), (_radical, 0.12), (_symbolic, 0.05))


def make_mix(n: int = 2400, seed: int = 0) -> list[dict[str, str]]:
    """``n`` distinct pairs (deterministic for a seed), each ``{"gold", "completion",
    "category", "correct"}``."""
    rng = random.Random(seed)
    out, seen = [], set()
    k = 0
    while len(out) < n:
        k += 1
        x = rng.random()
        for make, share in MIX:
            if x < share:
                break
            x -= share
        correct = len(out) % 2 == 0
        gold, shown, gsm8k = make(rng, k, correct)
        completion = _wrap(rng, shown, gsm8k)
        if (gold, completion) in seen:
            continue
        seen.add((gold, completion))
        out.append({"gold": gold, "completion": completion, "category": make.__name__[1:],
                    "correct": correct})
    return out


def make_hard(n: int = 60, seed: int = 1) -> list[dict[str, Any]]:
    """``n`` distinct pairs that only the sympy path can judge (logarithms with a base, powers of
    functions, matrices, inequalities), half correct: the slow end of the mix."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        a, b = rng.randint(2, 30) + k, rng.randint(2, 9)
        kind, correct = k % 4, k % 2 == 0
        if kind == 0:
            gold, same, wrong = f"\\log_{{{b}}} x + {a}", f"{a}+\\log_{b}(x)", f"\\log_{{{b}}} x + {a + 1}"
        elif kind == 1:
            gold, same, wrong = f"{a}\\sin^2 x", f"{a}(\\sin x)^2", f"{a}\\cos^2 x"
        elif kind == 2:
            gold = f"\\begin{{pmatrix}}{a}&{b}\\\\{b}&{a}\\end{{pmatrix}}"
            same = f"\\begin{{bmatrix}}{a}&{b}\\\\{b}&{a}\\end{{bmatrix}}"
            wrong = f"\\begin{{pmatrix}}{b}&{a}\\\\{b}&{a}\\end{{pmatrix}}"
        else:
            gold, same, wrong = f"x \\geq {a}", f"[{a}, \\infty)", f"({a}, \\infty)"
        out.append({"gold": gold, "completion": _wrap(rng, same if correct else wrong, False),
                    "category": "sympy_only", "correct": correct})
    return out


if __name__ == "__main__":
    for row in make_mix(int(sys.argv[1]) if len(sys.argv) > 1 else 2400):
        print(json.dumps(row))
