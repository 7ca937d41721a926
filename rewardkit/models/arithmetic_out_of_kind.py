"""Slices of the arithmetic task that a reward model's base never saw in kind, and mistakes the
reward data never made, each in both forms a reward meets: a worked solution and a bare final
answer ("89+1+7=" → "97", what GSM8K-style RL rewards see).

The held-out slices of :mod:`.arithmetic` are held out problem by problem; the broad base
(``LM_SPECS["broad"]``: first numbers 1–499, addends of 1–2 digits, 2–6 steps, four templates)
learned from their very ranges. The slices here are named by where they stand against that
base:

* **in range** (the base saw problems like these; the mistake may be new):
  ``in_distribution`` (the generator's own one-digit slip), ``units_off_1_3`` (a units digit off
  by 1–3 within its ten), ``carry`` (a carry dropped or added), ``transposed`` (two adjacent
  digits of a result swapped);
* **out of kind** (outside everything the base learned): ``first_500_999``,
  ``first_1000_4999`` (larger first numbers), ``steps_7_8`` (longer chains), ``addends_100_999``
  (3-digit addends), ``spaced`` (``"12 + 7 + 30 ="`` and steps ``"12 + 7 = 19"``).

Why the pairs look like this: every trivial rule must stand at a coin's 0.5 on every slice and
form, or a model that learned the rule would look accurate. So the direction of the mistake
alternates, above and below, drawn before the problem is looked at; a problem whose steps
cannot take it is dropped; and a wrong solution keeps the length of every result (the mistaken
one and those that carry it on), so length never tells either — ``shorter``, ``longer``,
``smaller`` and ``larger`` are exactly 0.5.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Iterator

from .arithmetic import (SPACED_TEMPLATE, TRAIN, Problem, SlipKind, Spec, digit_slip,
                         problem_stream, render_prompt, solve, spaced)

MISTAKES = ("digit", "units_off_1_3", "carry", "transposed")
FORMS = ("bare", "worked")
PATIENCE = 100
"""Problems in a row that may fail to take a drawn digit position before it is drawn again."""


@dataclass(frozen=True)
class OutOfKindSlice:
    """How one slice's problems are drawn and what its mistake is."""

    spec: Spec
    mistake: str = "digit"
    spaced: bool = False
    in_range: bool = False
    """Within what the broad base learned (problems of this range and format)."""
    notes: str = ""


SLICES: dict[str, OutOfKindSlice] = {
    "in_distribution": OutOfKindSlice(TRAIN, in_range=True,
                                      notes="the reward data's range and its one-digit slip"),
    "units_off_1_3": OutOfKindSlice(TRAIN, "units_off_1_3", in_range=True,
                                    notes="a units digit off by 1-3, its ten unchanged"),
    "carry": OutOfKindSlice(TRAIN, "carry", in_range=True,
                            notes="a carry from the units dropped (-10) or one added (+10)"),
    "transposed": OutOfKindSlice(TRAIN, "transposed", in_range=True,
                                 notes="two adjacent digits of a result swapped"),
    "first_500_999": OutOfKindSlice(Spec(start=(500, 999)),
                                    notes="first number 500-999 (the broad base: 1-499)"),
    "first_1000_4999": OutOfKindSlice(Spec(start=(1000, 4999)),
                                      notes="first number 1000-4999 (the broad base: 1-499)"),
    "steps_7_8": OutOfKindSlice(Spec(steps=(7, 8)), notes="7-8 steps (the broad base: 2-6)"),
    "addends_100_999": OutOfKindSlice(Spec(addend_digits=(3,)),
                                      notes="every addend 100-999 (the broad base: 1-2 digits)"),
    "spaced": OutOfKindSlice(Spec(templates=("expr",)), spaced=True,
                             notes="'12 + 7 + 30 =' with steps '12 + 7 = 19' (never seen "
                                   "spaced)"),
}


def prompt_of(pb: Problem, slc: OutOfKindSlice) -> str:
    return render_prompt(pb.ops, SPACED_TEMPLATE) if slc.spaced else pb.prompt


def mistaken(kind: str, up: bool, position: int, total: int, addend: int,
             rng: random.Random) -> int | None:
    """The wrong result of ``total + addend`` for a mistake of ``kind`` in direction ``up``,
    or None when this step cannot take it."""
    right = total + addend
    if kind == "digit":
        return digit_slip(right, SlipKind(up, position), rng)
    if kind == "units_off_1_3":
        units = right % 10
        moves = [d for d in (1, 2, 3) if 0 <= units + (d if up else -d) <= 9]
        return right + (1 if up else -1) * rng.choice(moves) if moves else None
    if kind == "carry":  # added where the units do not carry, dropped where they do
        carries = total % 10 + addend % 10 >= 10
        return right + 10 if up and not carries else right - 10 if carries and not up else None
    digits = str(right)  # transposed: adjacent digits that differ, swapped the drawn way
    pairs = [i for i in range(len(digits) - 1)
             if (digits[i] < digits[i + 1]) == up and digits[i] != digits[i + 1]
             and not (i == 0 and digits[i + 1] == "0")]
    if not pairs:
        return None
    i = rng.choice(pairs)
    return int(digits[:i] + digits[i + 1] + digits[i] + digits[i + 2:])


def mistake(ops: list[int], kind: str, up: bool, position: int, rng: random.Random
            ) -> tuple[list[str], dict[str, Any]] | None:
    """A wrong solution: the mistake at a step drawn uniformly among those that can take it
    and keep every result's length; None when no step can."""
    order = list(range(len(ops) - 1))
    rng.shuffle(order)
    right_steps = solve(ops)
    for at in order:
        total = sum(ops[:at + 1])
        wrong = mistaken(kind, up, position, total, ops[at + 1], rng)
        if wrong is None or wrong < 0:
            continue
        steps = solve(ops, at, wrong - (total + ops[at + 1]))
        if [len(s) for s in steps] == [len(s) for s in right_steps]:
            return steps, {"slip_step": at, "mistake": kind,
                           "direction": "above" if up else "below"}
    return None


def _mistaken_problems(slc: OutOfKindSlice, seed: int, exclude: set[str], n: int
                       ) -> Iterator[tuple[Problem, list[str], dict[str, Any]]]:
    """``n`` problems with their wrong solutions, directions alternating (the first drawn),
    the digit position (for ``digit``) drawn uniformly; both drawn before the problem. A
    position that :data:`PATIENCE` problems in a row cannot take in that direction (the
    leading 1 of a sum just past a thousand cannot go down) is drawn again; the direction is
    kept, so the two stay exactly balanced."""
    rng = random.Random(seed)
    up = rng.random() < 0.5
    kept = missed = 0
    position = rng.choice(slc.spec.slip_positions())
    for pb in problem_stream(slc.spec, seed, exclude):
        got = mistake(pb.ops, slc.mistake, up, position, rng)
        if got is None:
            missed += 1
            if missed >= PATIENCE:
                position, missed = rng.choice(slc.spec.slip_positions()), 0
            continue
        yield pb, *got
        kept += 1
        if kept >= n:
            return
        up, position, missed = not up, rng.choice(slc.spec.slip_positions()), 0


def _text(steps: list[str], slc: OutOfKindSlice) -> str:
    return "\n".join(spaced(s) if slc.spaced else s for s in steps)


def preference_rows(name: str, n: int, seed: int, exclude: set[str]) -> list[dict[str, Any]]:
    """``n`` pairs of slice ``name`` in each form, ``subset`` ``"NAME/bare"`` or
    ``"NAME/worked"`` (so ``eval rm`` reports each form of each slice); the two forms draw
    different problems."""
    slc = SLICES[name]
    rows = []
    for form, offset in zip(FORMS, (0, 1)):
        for pb, wrong, meta in _mistaken_problems(slc, seed + offset, exclude, n):
            right = solve(pb.ops)
            chosen, rejected = ((right[-1].split("=")[-1], wrong[-1].split("=")[-1])
                                if form == "bare" else (_text(right, slc), _text(wrong, slc)))
            rows.append({"prompt": prompt_of(pb, slc), "chosen": chosen, "rejected": rejected,
                         "subset": f"{name}/{form}", "form": form, "in_range": slc.in_range,
                         **meta})
    return rows


def stepwise_rows(name: str, n: int, seed: int, exclude: set[str]) -> list[dict[str, Any]]:
    """``n`` worked solutions of slice ``name`` with step labels (TRL's stepwise format and
    ProcessBench's ``label``), half with their mistake, half right, from the same problems."""
    slc = SLICES[name]
    rng = random.Random(seed + 2)
    rows = []
    for pb, wrong, meta in _mistaken_problems(slc, seed, exclude, n):
        is_wrong = rng.random() < 0.5
        steps, at = (wrong, meta["slip_step"]) if is_wrong else (solve(pb.ops), -1)
        rows.append({"prompt": prompt_of(pb, slc),
                     "completions": [spaced(s) if slc.spaced else s for s in steps],
                     "labels": [at == -1 or i < at for i in range(len(steps))], "label": at,
                     "subset": name, "in_range": slc.in_range})
    return rows
