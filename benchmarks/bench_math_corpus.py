"""A differential corpus against Math-Verify: every gold in every answer style, and wrong answers
near it, scored by both; agreement reported by style.

Golds come from the project's sets (``data/math_equivalence.jsonl``, ``data/math_realistic.jsonl``)
and from Math-Verify's own suite (``data/math_verify_suite.jsonl``). Each gold is rendered as a
right answer in the styles models write (a box, an answer phrase, ``####``, Minerva's sentence,
``<think>`` then the answer, a unit, LaTeX spacing and font commands, Unicode symbols) and as
wrong answers near it (a digit slip, the other sign, a scale of 100, another unit than the one
asked for, the value left unsimplified). The label of each pair follows from how it was made, not
from either grader. Every disagreement is a fix or a documented policy (``docs/math.md``).

Run: ``python benchmarks/bench_math_corpus.py [--golds 150] [--show 5]``.
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import rewardkit  # noqa: E402
from rewardkit import Sample  # noqa: E402
from rewardkit.verifiers.math import fastexpr  # noqa: E402

_UNICODE = (("\\pi", "\u03c0"), ("\\sqrt", "\u221a"), ("\\infty", "\u221e"), ("\\cdot", "\u00b7"),
            ("\\le ", "\u2264 "), ("\\ge ", "\u2265 "))
_DIGIT_RUN = re.compile(r"\d+")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


def load(name: str) -> list[dict]:
    return [json.loads(x) for x in (ROOT / "data" / name).read_text().splitlines() if x.strip()]


def golds(limit: int, seed: int = 7) -> list[str]:
    """Distinct short golds of the three sets (bare answers only), a fixed sample of ``limit``."""
    found: list[str] = []
    for name in ("math_equivalence.jsonl", "math_realistic.jsonl", "math_verify_suite.jsonl"):
        for row in load(name):
            gold = str(row["gold"]).strip()
            if (0 < len(gold) <= 40 and "\n" not in gold and "\\boxed" not in gold
                    and "####" not in gold and "$" not in gold and not re.fullmatch(r"\(?[A-E]\)?", gold)
                    and gold not in found):
                found.append(gold)
    rng = random.Random(seed)
    rng.shuffle(found)
    return found[:limit]


def _value(gold: str) -> fastexpr.Value | None:
    v = fastexpr.read(gold)
    return v if v is not None and not v.variables else None


def right_answers(gold: str) -> list[tuple[str, str, str]]:
    """``(style, prompt, completion)`` of the same answer written as models write it."""
    out = [
        ("boxed", "", f"We simplify step by step, so the answer is $\\boxed{{{gold}}}$."),
        ("phrase", "", f"Putting it together, the final answer is ${gold}$."),
        ("minerva", "", f"Final Answer: The final answer is ${gold}$. I hope it is correct."),
        ("think", "", f"<think>\nLet me try: maybe 17? No.\n</think>\n\nThe answer is $\\boxed{{{gold}}}$."),
        ("latex_spacing", "", f"Hence $\\boxed{{\\displaystyle \\, {gold} \\,}}$."),
    ]
    if _NUMBER.match(gold):
        out.append(("gsm8k", "", f"She has {gold} left.\n#### {gold}"))
        out.append(("units", "", f"The length is $\\boxed{{{gold} \\text{{ cm}}}}$."))
        out.append(("font", "", f"The answer is $\\boxed{{\\mathbf{{{gold}}}}}$."))
    uni = gold
    for latex, char in _UNICODE:
        uni = uni.replace(latex, char)
    if uni != gold and "{" not in uni:
        out.append(("unicode", "", f"The answer is {uni}."))
    return out


def _digit_slip(gold: str) -> str | None:
    m = None
    for m in _DIGIT_RUN.finditer(gold):
        pass
    if m is None:
        return None
    digits = m.group(0)
    slipped = digits[:-1] + str((int(digits[-1]) + 1) % 10)
    return gold[:m.start()] + slipped + gold[m.end():]


def wrong_answers(gold: str) -> list[tuple[str, str, str]]:
    """``(style, prompt, completion)`` of answers near the gold that are not it."""
    out = []
    slip = _digit_slip(gold)
    value = _value(gold)
    if slip is not None:
        other = _value(slip)
        if value is None or other is None or other.points[0] != value.points[0]:
            out.append(("wrong_digit", "", f"So the answer is $\\boxed{{{slip}}}$."))
    if value is not None and value.exact is not None and value.exact != 0:
        flipped = gold[1:] if gold.startswith("-") else f"-{gold}" if _NUMBER.match(gold) else None
        if flipped:
            out.append(("wrong_sign", "", f"So the answer is $\\boxed{{{flipped}}}$."))
        scaled = value.exact * 100
        shown = str(scaled.numerator) if scaled.denominator == 1 else f"\\frac{{{scaled.numerator}}}{{{scaled.denominator}}}"
        out.append(("wrong_scale", "", f"So the answer is $\\boxed{{{shown}}}$."))
        if _NUMBER.match(gold):
            out.append(("wrong_scale", "", f"So the answer is $\\boxed{{{gold}\\%}}$."))
            out.append(("wrong_unit", "Give the length in meters.",
                        f"The length is $\\boxed{{{gold} \\text{{ cm}}}}$."))
        if value.exact.denominator == 1 and abs(value.exact) < 10**6:
            n = int(value.exact)
            out.append(("unsimplified", "", f"So the answer is $\\boxed{{{n - 1} + 1}}$."))
            out.append(("unsimplified", "", f"So the answer is $\\boxed{{\\frac{{{2 * n}}}{{2}}}}$."))
    return out


def corpus(limit: int) -> list[dict]:
    rows = []
    for gold in golds(limit):
        for style, prompt, completion in right_answers(gold):
            rows.append({"gold": gold, "prompt": prompt, "completion": completion, "style": style,
                         "expected": 1})
        for style, prompt, completion in wrong_answers(gold):
            rows.append({"gold": gold, "prompt": prompt, "completion": completion, "style": style,
                         "expected": 0})
    return rows


def math_verify_judge():
    from math_verify import parse, verify

    # Math-Verify logs every timeout (with the whole input) as a warning; the counts are what
    # matter here.
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    def judge(gold: str, completion: str) -> float:
        try:
            bare = not any(m in gold for m in ("$", "\\boxed", "\\[", "\\(", "\n"))
            g = parse("$" + gold + "$") if bare else parse(gold)
            return float(verify(g, parse(completion)))
        except Exception:  # noqa: BLE001 - a failure counts as 0, as Math-Verify's own default
            return 0.0

    return judge


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--golds", type=int, default=150, help="golds sampled from the three sets")
    ap.add_argument("--show", type=int, default=4, help="disagreements shown per style")
    args = ap.parse_args()
    rows = corpus(args.golds)
    mv = math_verify_judge()
    mv_scores = [mv(r["gold"], r["completion"]) for r in rows]
    with rewardkit.load("math") as v:
        rk_scores = [s.value for s in v.score([Sample(r["prompt"], r["completion"], r["gold"])
                                              for r in rows])]
    by_style: dict[str, list[int]] = defaultdict(list)
    for k, r in enumerate(rows):
        by_style[r["style"]].append(k)
    print(f"{len(rows)} pairs from {args.golds} golds; agreement with the label of each pair")
    print(f"{'style':15s} {'pairs':>5s} {'Math-Verify':>12s} {'rewardkit':>10s} {'graders agree':>14s}")
    examples: dict[str, list] = defaultdict(list)
    totals = Counter()
    for style, idx in sorted(by_style.items()):
        mv_ok = sum(mv_scores[k] == rows[k]["expected"] for k in idx)
        rk_ok = sum(rk_scores[k] == rows[k]["expected"] for k in idx)
        both = sum(mv_scores[k] == rk_scores[k] for k in idx)
        totals.update(n=len(idx), mv=mv_ok, rk=rk_ok, both=both)
        print(f"{style:15s} {len(idx):5d} {mv_ok / len(idx):12.1%} {rk_ok / len(idx):10.1%} "
              f"{both / len(idx):14.1%}")
        for k in idx:
            if rk_scores[k] != rows[k]["expected"] and len(examples[style]) < args.show:
                examples[style].append((rows[k]["gold"], rows[k]["completion"][-70:],
                                        mv_scores[k], rk_scores[k]))
    n = totals["n"]
    print(f"{'all':15s} {n:5d} {totals['mv'] / n:12.1%} {totals['rk'] / n:10.1%} "
          f"{totals['both'] / n:14.1%}")
    for style, found in examples.items():
        print(f"\nrewardkit differs from the label ({style}):")
        for gold, completion, m, r in found:
            print(f"  gold {gold!r}: ...{completion!r}  Math-Verify {m:.0f}, rewardkit {r:.0f}")


if __name__ == "__main__":
    main()
