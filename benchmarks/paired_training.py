"""The shared driver of the training-step benchmarks against a peer trainer: alternate who runs
first in each pair, print every pair and the ratio of the medians."""
from __future__ import annotations

import argparse
import statistics
import tempfile
from typing import Callable

Run = Callable[[int, int, int, str], float]
"""``run(steps, batch_size, warmup, workdir)`` → median seconds per optimizer step."""


def compare(description: str, peer: str, run_peer: Run, run_rewardkit: Run, what: str,
            unit: str) -> None:
    """Parse ``--pairs --steps --warmup --batch-size``, run the pairs and print them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    ours, theirs = [], []
    for i in range(args.pairs):
        order = (peer, "rewardkit") if i % 2 == 0 else ("rewardkit", peer)
        for who in order:
            with tempfile.TemporaryDirectory() as workdir:
                run = run_peer if who == peer else run_rewardkit
                t = run(args.steps, args.batch_size, args.warmup, workdir)
            (theirs if who == peer else ours).append(t)
        print(f"pair {i + 1} ({' then '.join(order)}): {peer} {theirs[-1] * 1000:.1f} ms/step, "
              f"rewardkit {ours[-1] * 1000:.1f} ms/step, ratio {ours[-1] / theirs[-1]:.2f}",
              flush=True)
    t, o = statistics.median(theirs), statistics.median(ours)
    print(f"\n{what} training step, batch {args.batch_size} {unit}, median of {args.pairs} "
          f"runs: {peer} {t * 1000:.1f} ms, rewardkit {o * 1000:.1f} ms, ratio {o / t:.2f}x "
          "(target <= 1.0)")
