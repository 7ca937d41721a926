"""Rebuild the learned-reward data from the arithmetic task (seconds).

    python data/learned/build.py [--out data/learned]

Writes, with held-out prompts never seen in training:
  rm_train.jsonl / rm_test.jsonl      preference pairs (TRL format + ``subset``)
  prm_train.jsonl / prm_test.jsonl    stepwise solutions (TRL format + ProcessBench ``label``)
  base/                               the arithmetic policy with "\\n" and "<step>" tokens, to
                                      start reward models from
See rewardkit/models/arithmetic.py for how solutions and slips are made.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from rewardkit.models import arithmetic
from rewardkit.trainer.arithmetic import write_jsonl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    test = arithmetic.make_chains(400, seed=args.seed + 1)
    held_out = {arithmetic.prompt_of(c) for c in test}
    train = arithmetic.make_chains(4000, seed=args.seed + 2, exclude=held_out)
    write_jsonl(arithmetic.preference_rows(train, args.seed + 3), args.out / "rm_train.jsonl")
    write_jsonl(arithmetic.preference_rows(test, args.seed + 4), args.out / "rm_test.jsonl")
    write_jsonl(arithmetic.stepwise_rows(train, args.seed + 5), args.out / "prm_train.jsonl")
    write_jsonl(arithmetic.stepwise_rows(test, args.seed + 6), args.out / "prm_test.jsonl")
    arithmetic.make_base(args.out / "base")
    print(f"wrote {len(train)} training and {len(test)} held-out problems to {args.out}")


if __name__ == "__main__":
    main()
