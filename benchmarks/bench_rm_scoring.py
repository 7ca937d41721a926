"""Reward-model scoring throughput: token-budget batching vs fixed-size batching vs one padded
batch (how TRL's reward functions call a reward model), same model and samples, one run.

The samples have realistic, varied lengths (log-normal, 16 to 1,024 tokens, median ~150).
All three compute the same logits; what differs is how many pad tokens they push through the
model. Runs alternate in order; samples/s is the median of ``--repeats``.

    python benchmarks/bench_rm_scoring.py [--samples 256] [--repeats 3] [--hidden 256]
"""
from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16, help="fixed-size batching")
    parser.add_argument("--batch-tokens", type=int, default=8192, help="token budget")
    args = parser.parse_args()

    import rewardkit
    from rewardkit import Sample
    from rewardkit.testing import make_tiny_reward_model

    rng = random.Random(0)
    words = "the answer is seven because three plus four equals seven and so on".split()
    samples = []
    for _ in range(args.samples):
        n = int(min(1024, max(16, rng.lognormvariate(5.0, 0.8))))
        samples.append(Sample("Question: what is the result?",
                              " ".join(rng.choice(words) for _ in range(n // 2))))
    with tempfile.TemporaryDirectory() as d:
        path = make_tiny_reward_model(d, hidden_size=args.hidden, num_layers=args.layers)
        scorer = rewardkit.load("reward_model", model=str(path), device="cpu",
                                batch_tokens=args.batch_tokens, max_length=1024)
        encoded = [scorer.encode(s) for s in samples]
        lengths = [len(e.ids) for e in encoded]
        print(f"{len(samples)} samples, {sum(lengths)} tokens, lengths {min(lengths)}-"
              f"{max(lengths)} (median {statistics.median(lengths):.0f})")

        def token_budget() -> list[float]:
            return scorer.logits(encoded)

        def fixed_size() -> list[float]:
            out: list[float] = []
            for lo in range(0, len(encoded), args.batch_size):
                rows = [e.ids for e in encoded[lo:lo + args.batch_size]]
                out += scorer.forward_logits(rows)[:, 0].tolist()
            return out

        def one_batch() -> list[float]:
            out: list[float] = []
            for lo in range(0, len(encoded), 64):  # one padded batch per call of 64 samples
                out += scorer.forward_logits([e.ids for e in encoded[lo:lo + 64]])[:, 0].tolist()
            return out

        ways = {"token-budget": token_budget, f"fixed-size ({args.batch_size})": fixed_size,
                "one batch per call (64)": one_batch}
        reference = torch.tensor(token_budget())
        for name, fn in ways.items():
            assert torch.allclose(torch.tensor(fn()), reference, atol=1e-3), name
        times: dict[str, list[float]] = {k: [] for k in ways}
        for r in range(args.repeats):
            order = list(ways) if r % 2 == 0 else list(reversed(ways))
            for name in order:
                start = time.perf_counter()
                ways[name]()
                times[name].append(time.perf_counter() - start)
            print(f"repeat {r + 1}: " + ", ".join(
                f"{k} {len(samples) / times[k][-1]:.1f}/s" for k in ways), flush=True)
        base = statistics.median(times["token-budget"])
        for name in ways:
            med = statistics.median(times[name])
            print(f"{name:>26}: {len(samples) / med:8.1f} samples/s  "
                  f"(token-budget is {med / base:.2f}x faster)")


if __name__ == "__main__":
    main()
