"""Rebuild the learned-reward data from the arithmetic task (seconds).

    python data/learned/build.py [--out data/learned] [--seed 0]

Writes, with no problem shared between any two files (each file draws its own problems):
  rm_train.jsonl / rm_test.jsonl      preference pairs (TRL format + ``subset``), in distribution
  prm_train.jsonl / prm_test.jsonl    stepwise solutions (TRL format + ProcessBench ``label``)
  rm_slices.jsonl / prm_slices.jsonl  held-out slices, ``subset`` = the slice's name (more steps,
                                      larger operands, an unseen template, one digit position,
                                      one direction; rewardkit.models.arithmetic.SLICES)
  base/                               the arithmetic policy with "\\n", "<step>" and the template
                                      words in its tokenizer, to start reward models from
See rewardkit/models/arithmetic.py for how solutions and slips are made and why.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from rewardkit.models import arithmetic
from rewardkit.testing.arithmetic import write_jsonl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=10000, help="training rows per task")
    parser.add_argument("--test", type=int, default=400, help="rows per held-out slice")
    parser.add_argument("--no-base", action="store_true", help="keep the existing base/")
    args = parser.parse_args()
    seen: set[str] = set()
    s, n = args.seed, args.test

    def stream(spec: arithmetic.Spec, seed: int):
        return arithmetic.problem_stream(spec, seed, seen)

    train = arithmetic.TRAIN
    rm_test = arithmetic.preference_rows(stream(train, s + 1), s + 4, n=n)
    prm_test = arithmetic.stepwise_rows(stream(train, s + 7), s + 6, n=n)
    rm_rows = [{**r, "subset": "in_distribution"} for r in rm_test]
    prm_rows = [{**r, "subset": "in_distribution"} for r in prm_test]
    slices = [name for name in arithmetic.SLICES if name != "in_distribution"]
    for i, name in enumerate(slices):
        spec = arithmetic.SLICES[name]
        rm_rows += arithmetic.preference_rows(stream(spec, s + 10 + i), s + 100 + i, spec, name,
                                              n=n)
        prm_rows += arithmetic.stepwise_rows(stream(spec, s + 30 + i), s + 200 + i, spec, name,
                                             n=n)
    # training problems last: none of them is a held-out problem
    write_jsonl(arithmetic.preference_rows(stream(train, s + 2), s + 3, n=args.train),
                args.out / "rm_train.jsonl")
    write_jsonl(arithmetic.stepwise_rows(stream(train, s + 8), s + 5, n=args.train),
                args.out / "prm_train.jsonl")
    write_jsonl(rm_test, args.out / "rm_test.jsonl")
    write_jsonl(prm_test, args.out / "prm_test.jsonl")
    write_jsonl(rm_rows, args.out / "rm_slices.jsonl")
    write_jsonl(prm_rows, args.out / "prm_slices.jsonl")
    if not args.no_base:
        arithmetic.make_base(args.out / "base")
    print(f"wrote {args.train} training rows per task, {n} held-out in distribution and "
          f"{len(slices)} held-out slices of {n} to {args.out}")


if __name__ == "__main__":
    main()
