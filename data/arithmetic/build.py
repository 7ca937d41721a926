"""Rebuild the arithmetic task and its warm-started tiny policy (a few CPU minutes).

    python data/arithmetic/build.py [--steps 1500] [--out data/arithmetic]

Writes ``train.jsonl`` (prompts for RL), ``test.jsonl`` (held-out prompts, never seen in
training or warm start) and ``policy/`` (a Qwen2 checkpoint of ~2 MB with its tokenizer).
The warm start trains on noisy answers (see ``rewardkit.testing.arithmetic``), so the policy
starts at roughly 20% sampled accuracy.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from rewardkit.testing import arithmetic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    test = arithmetic.make_problems(500, seed=args.seed + 1)
    train = arithmetic.make_problems(6000, seed=args.seed + 2, exclude={r["prompt"] for r in test})
    arithmetic.write_jsonl(train, args.out / "train.jsonl")
    arithmetic.write_jsonl(test, args.out / "test.jsonl")

    tokenizer = arithmetic.build_tokenizer()
    model = arithmetic.build_model(tokenizer, seed=args.seed)
    start = time.time()
    losses = arithmetic.warm_start(model, tokenizer, train, steps=args.steps, seed=args.seed,
                                     progress=True)
    print(f"warm start: {args.steps} steps in {time.time() - start:.0f}s, "
          f"final loss {sum(losses[-50:]) / 50:.3f}")
    model.save_pretrained(args.out / "policy")
    tokenizer.save_pretrained(args.out / "policy")


if __name__ == "__main__":
    main()
