"""What reading the out-of-kind slices would take: the broad base (data/learned/broad/lm_base,
first numbers 1–499, addends of 1–2 digits, 2–6 steps) trained further, the same way it was
built, on right worked solutions of a wider range (first numbers 1–4999, addends of 1–3 digits,
2–8 steps, the same four templates, never spaced), so the out-of-kind slices of
data/learned/rm_out_of_kind.jsonl but ``spaced`` fall inside what it saw. One more point of the
curve of accuracy against the range a base saw (docs/learned.md):

    python benchmarks/learned_wider_base.py --out runs/lm_wide [--steps 500] [--problems 64000]
    python benchmarks/learned_out_of_kind.py --model "NAME"=runs/lm_wide/lm_base

No problem of any file in data/learned is among those it learns from.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its siblings, when loaded by path
from learned_other_errors import shipped_problems  # noqa: E402
from learned_training import DATA  # noqa: E402

from rewardkit.models import arithmetic  # noqa: E402

WIDE = arithmetic.Spec(start=(1, 4999), addend_digits=(1, 2, 3), steps=(2, 8),
                       templates=arithmetic.TRAIN_TEMPLATES + arithmetic.HELD_OUT_TEMPLATES,
                       notes="first number 1-4999, addends of 1-3 digits, 2-8 steps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=500, help="training steps of 128")
    parser.add_argument("--problems", type=int, default=64000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.path.insert(0, str(DATA))
    from build import build_lm_base  # data/learned/build.py: the base's own training

    problems = arithmetic.make_problems(args.problems, WIDE, args.seed + 70, shipped_problems())
    build_lm_base(args.out / "lm_base", DATA / "broad" / "lm_base", problems, args.steps,
                  args.seed, "wide, from the broad base")
    print(f"wrote {args.out / 'lm_base'}")


if __name__ == "__main__":
    main()
