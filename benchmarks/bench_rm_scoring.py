"""Reward-model scoring throughput on CPU, same model and samples, one run: the default cut of
each call into forward passes (``max_padding: auto``: by each pass's measured cost) vs the fixed
10% padding rule vs fixed-size batches vs one padded batch per call (how TRL's reward functions
call a reward model).

Every way scores the samples in calls of ``--call-size`` (what a server batch or a trainer's
rollout hands the scorer). All compute the same logits; what differs is how many pad tokens
they push through the model and how many passes they pay for. The samples have realistic,
varied lengths (log-normal, 16 to 1,024 tokens, median ~150) for the random model, or are the
bundled preference test pairs with ``--model``. Runs alternate in order; samples/s is the
median of ``--repeats``.

    python benchmarks/bench_rm_scoring.py [--samples 256] [--repeats 3] [--hidden 256]
    OMP_NUM_THREADS=1 python benchmarks/bench_rm_scoring.py --model runs/rm/final \
        --samples 768 --call-size 32 --repeats 8
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16, help="fixed-size batching")
    parser.add_argument("--batch-tokens", type=int, default=8192, help="token budget")
    parser.add_argument("--call-size", type=int, default=64, help="samples per scoring call")
    parser.add_argument("--model", help="a trained reward model folder (default: a random "
                                        "classifier of --hidden and --layers)")
    args = parser.parse_args()

    import rewardkit
    from rewardkit import Sample
    from rewardkit.testing import make_tiny_reward_model

    rng = random.Random(0)
    words = "the answer is seven because three plus four equals seven and so on".split()
    samples = []
    if args.model:
        with open(Path(__file__).resolve().parents[1] / "data/learned/rm_test.jsonl") as f:
            for line in f:
                row = json.loads(line)
                samples += [Sample(row["prompt"], row[k]) for k in ("chosen", "rejected")]
        rng.shuffle(samples)
        samples = samples[:args.samples]
    for _ in range(0 if args.model else args.samples):
        n = int(min(1024, max(16, rng.lognormvariate(5.0, 0.8))))
        samples.append(Sample("Question: what is the result?",
                              " ".join(rng.choice(words) for _ in range(n // 2))))
    with tempfile.TemporaryDirectory() as d:
        path = args.model or make_tiny_reward_model(d, hidden_size=args.hidden,
                                                    num_layers=args.layers)
        load = dict(model=str(path), device="cpu", batch_tokens=args.batch_tokens,
                    max_length=1024)
        scorer = rewardkit.load("reward_model", **load)
        rule = rewardkit.load("reward_model", **load, max_padding=0.1)
        encoded = [scorer.encode(s) for s in samples]
        calls = [encoded[lo:lo + args.call_size]
                 for lo in range(0, len(encoded), args.call_size)]
        lengths = [len(e.ids) for e in encoded]
        print(f"{len(samples)} samples, {sum(lengths)} tokens, lengths {min(lengths)}-"
              f"{max(lengths)} (median {statistics.median(lengths):.0f})")

        def measured() -> list[float]:
            return [v for call in calls for v in scorer.logits(call)]

        def ten_percent() -> list[float]:
            return [v for call in calls for v in rule.logits(call)]

        def fixed_size() -> list[float]:
            out: list[float] = []
            for call in calls:
                for lo in range(0, len(call), args.batch_size):
                    rows = [e.ids for e in call[lo:lo + args.batch_size]]
                    out += scorer.forward_logits(rows)[:, 0].tolist()
            return out

        def one_batch() -> list[float]:
            return [v for call in calls
                    for v in scorer.forward_logits([e.ids for e in call])[:, 0].tolist()]

        ways = {"measured plan (auto)": measured, "10% padding rule": ten_percent,
                f"fixed-size ({args.batch_size})": fixed_size,
                f"one batch per call ({args.call_size})": one_batch}
        reference = torch.tensor(measured())
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
        base = statistics.median(times["measured plan (auto)"])
        for name in ways:
            med = statistics.median(times[name])
            print(f"{name:>26}: {len(samples) / med:8.1f} samples/s  "
                  f"(the measured plan is {med / base:.2f}x faster)")
        if scorer.pass_cost is not None and scorer.pass_cost.fixed_tokens is not None:
            print(f"measured: one more forward pass costs as much as "
                  f"{scorer.pass_cost.fixed_tokens:.0f} padded tokens")


if __name__ == "__main__":
    main()
