"""Generate rollouts.jsonl: GRPO-style rollouts (4 completions per prompt) for the demo.

Word problems with integer, fraction and decimal answers; completions in the shapes models
produce (boxed, GSM8K ``####``, "the answer is"), right and wrong, plus hedges and answer-less
ones. The gold is stored as verl does, under ``reward_model.ground_truth``.
Run: python data/demo/make_rollouts.py > data/demo/rollouts.jsonl
"""
import json
import random
from fractions import Fraction

rng = random.Random(7)
NAMES = ["Ava", "Ben", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana"]
ITEMS = ["apples", "marbles", "stickers", "books", "coins", "pencils"]


def problem(i):
    kind = i % 4
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c = rng.randint(3, 40), rng.randint(2, 12), rng.randint(2, 9)
    if kind == 0:
        return f"{name} has {a} {item} and buys {b} bags of {c}. How many {item} now?", str(a + b * c)
    if kind == 1:
        return (f"{name} shares {a} {item} equally among {b} friends. How many does each get? "
                "Give an exact fraction."), str(Fraction(a, b))
    if kind == 2:
        return f"A {item} costs ${a}.{c}0. What do {b} cost in dollars?", f"{b * (a + c / 10):.2f}"
    return f"What is {a} squared minus {b}?", str(a * a - b)


def latex(gold):
    if "/" in gold:
        n, d = gold.split("/")
        return rf"\frac{{{n}}}{{{d}}}"
    return gold


def wrong(gold):
    if "/" in gold:
        n, d = gold.split("/")
        return f"{d}/{n}"
    if "." in gold:
        return f"{float(gold) + 1:.2f}"
    return str(int(gold) + rng.choice([-2, -1, 1, 10]))


def completion(gold, style):
    work = "Let me work through it step by step. "
    if style == "boxed":
        return work + rf"So the answer is $\boxed{{{latex(gold)}}}$."
    if style == "gsm8k":
        return work + f"That gives {gold}.\n#### {gold}"
    if style == "answer_is":
        return work + f"The final answer is {gold}."
    if style == "wrong":
        return work + rf"So the answer is $\boxed{{{latex(wrong(gold))}}}$."
    if style == "hedge":
        return work + rf"It is either $\boxed{{{latex(gold)}}}$ or $\boxed{{{latex(wrong(gold))}}}$."
    return work + "I am not sure how to finish this."


for i in range(60):
    question, gold = problem(i)
    styles = rng.sample(["boxed", "boxed", "gsm8k", "answer_is", "wrong", "wrong", "hedge", "none"], 4)
    for j, style in enumerate(styles):
        print(json.dumps({"id": f"{i}-{j}", "prompt": question, "completion": completion(gold, style),
                          "data_source": "demo/arithmetic", "style": style,
                          "reward_model": {"ground_truth": gold}}))
