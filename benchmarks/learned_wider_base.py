"""What reading the out-of-kind slices would take: the broad base (data/learned/broad/lm_base,
first numbers 1–499, addends of 1–2 digits, 2–6 steps) trained further, the same way it was
built, on right worked solutions of a wider range. Points of the curve of accuracy against the
range a base saw (docs/learned.md):

* ``--range wide``: first numbers 1–4999, addends of 1–3 digits, 2–8 steps, the same four
  templates, never spaced, so the out-of-kind slices of data/learned/rm_out_of_kind.jsonl but
  ``spaced`` fall inside what it saw (it forgets the small sums it knew);
* ``--range whole``: the whole range at once, :data:`WHOLE`: half the broad base's own range,
  a sixth each the ranges of ``first_500_999``, ``steps_7_8`` and ``addends_100_999``;
  ``first_1000_4999`` and ``spaced`` kept out on purpose;
* ``--range all``: :data:`ALL`, the whole range with the two kinds ``whole`` keeps out added
  (first numbers 1000–4999 and the spaced format, a sixth each): the curve's point for them
  inside a mixture (start it from a whole-range base with ``--from``);
* ``--range addends``: only the range of ``addends_100_999`` (:data:`ADDENDS`), a probe of
  whether a model of this size learns to add 3-digit numbers at all when every step is one
  (start it from a whole-range base with ``--from``; it is not a base to keep: it forgets the
  rest).

    python benchmarks/learned_wider_base.py --out runs/lm_wide [--steps 500] [--problems 64000]
    python benchmarks/learned_wider_base.py --out runs/lm_whole --range whole --replay-rows 10000
    python benchmarks/learned_wider_base.py --out runs/lm_addends --range addends \
        --from runs/lm_whole/lm_base
    python benchmarks/learned_wider_base.py --out runs/lm_all --range all \
        --from runs/lm_whole/lm_base --steps 1000 --problems 128000 --replay-rows 10000
    python benchmarks/learned_out_of_kind.py --model "NAME"=runs/lm_wide/lm_base

``--replay-rows N`` also writes ``lm_replay.jsonl``, the first N problems it learned from, for
``train rm``'s ``replay_data``. No problem of any file in data/learned is among those it learns
from.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its siblings, when loaded by path
from learned_other_errors import shipped_problems  # noqa: E402
from learned_training import DATA  # noqa: E402

from rewardkit.models import arithmetic  # noqa: E402
from rewardkit.testing.arithmetic import write_jsonl  # noqa: E402

TEMPLATES = arithmetic.TRAIN_TEMPLATES + arithmetic.HELD_OUT_TEMPLATES
WIDE = arithmetic.Spec(start=(1, 4999), addend_digits=(1, 2, 3), steps=(2, 8),
                       templates=TEMPLATES,
                       notes="first number 1-4999, addends of 1-3 digits, 2-8 steps")
ADDENDS = arithmetic.Spec(start=(1, 999), addend_digits=(3,), steps=(2, 6), templates=TEMPLATES,
                          notes="every addend 100-999")
"""Every addend 100-999, first number 1-999, 2-6 steps: the range of ``addends_100_999``."""
WHOLE: tuple[tuple[arithmetic.Spec, float], ...] = (
    (arithmetic.LM_SPECS["broad"], 1 / 2),
    (arithmetic.Spec(start=(500, 999), steps=(2, 6), templates=TEMPLATES,
                     notes="first number 500-999"), 1 / 6),
    (arithmetic.Spec(start=(1, 999), steps=(7, 8), templates=TEMPLATES, notes="7-8 steps"),
     1 / 6),
    (ADDENDS, 1 / 6),
)
"""The whole range at once: half of it the broad base's own range, so training on the rest
does not overwrite it, and a sixth each the ranges of three out-of-kind slices. Kept out on
purpose, so the figures still show a kind it never saw: a first number of 1000 or more
(``first_1000_4999``; running sums past 1000 are in it, from 3-digit addends and long chains)
and the spaced format."""


FIRST_1000_4999 = arithmetic.Spec(start=(1000, 4999), steps=(2, 6), templates=TEMPLATES,
                                  notes="first number 1000-4999")
SPACED = dataclasses.replace(arithmetic.LM_SPECS["broad"], templates=(arithmetic.SPACED_TEMPLATE,),
                             notes="the broad range, spaced")
ALL: tuple[tuple[arithmetic.Spec, float], ...] = (
    *((spec, share * 2 / 3) for spec, share in WHOLE),
    (FIRST_1000_4999, 1 / 6),
    (SPACED, 1 / 6),
)
""":data:`WHOLE` in two thirds of the problems, and the ranges of ``first_1000_4999`` and
``spaced`` a sixth each: nothing of the out-of-kind slices is kept out of it."""


def training_problems(kind: str, n: int, seed: int) -> list[arithmetic.Problem]:
    """The problems ``--range kind`` learns from, none in a shipped file."""
    if kind == "wide":
        return arithmetic.make_problems(n, WIDE, seed + 70, shipped_problems())
    if kind == "addends":
        return arithmetic.make_problems(n, ADDENDS, seed + 80, shipped_problems())
    if kind == "all":
        return arithmetic.mixed_problems(n, ALL, seed + 90, shipped_problems())
    return arithmetic.mixed_problems(n, WHOLE, seed + 70, shipped_problems())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--range", choices=("wide", "whole", "all", "addends"), default="wide",
                        help="wide: first numbers 1-4999, 1-3 digit addends, 2-8 steps; whole: "
                             "the broad range mixed with the wider ones, 1000-4999 and spaced kept "
                             "out; all: whole with those two added; "
                             "addends: every addend 100-999 (a probe, see above)")
    parser.add_argument("--from", dest="start", type=Path, default=DATA / "broad" / "lm_base",
                        help="the model trained further (default the broad base)")
    parser.add_argument("--steps", type=int, default=500, help="training steps of 128")
    parser.add_argument("--problems", type=int, default=64000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replay-rows", type=int, default=0,
                        help="also write lm_replay.jsonl: the first N problems it learned from")
    args = parser.parse_args()
    sys.path.insert(0, str(DATA))
    from build import build_lm_base, replay_rows  # data/learned/build.py: the base's training

    problems = training_problems(args.range, args.problems, args.seed)
    if args.replay_rows:
        write_jsonl(replay_rows(problems[:args.replay_rows]), args.out / "lm_replay.jsonl")
    start = "the broad base" if args.start == DATA / "broad" / "lm_base" else str(args.start)
    build_lm_base(args.out / "lm_base", args.start, problems, args.steps, args.seed,
                  f"{args.range}, from {start}")
    print(f"wrote {args.out / 'lm_base'}")


if __name__ == "__main__":
    main()
