"""The shared driver of the training-step benchmarks against a peer trainer: alternate who runs
first in each pair, print every pair and the ratio of the medians; and what both reward-model
benchmarks (``train rm``, ``train prm``) time the same way: rewardkit's steps, and a
``transformers`` Trainer's by a callback."""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

DATA = Path(__file__).resolve().parents[1] / "data" / "learned"
"""The shipped arithmetic base model and its preference and stepwise data."""

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


def reward_config(task: str, workdir: str, steps: int, batch: int) -> Any:
    """``train rm|prm`` options of both reward-model benchmarks: the shipped base and its
    training data, no held-out split, constant learning rate 1e-4, fp32 on CPU, no output
    beyond the checkpoint folder."""
    from rewardkit.models.train_config import RewardTrainConfig

    return RewardTrainConfig(task=task, model=str(DATA / "base"),
                             data=str(DATA / f"{task}_train.jsonl"), eval_fraction=0.0,
                             output_dir=workdir, steps=steps, batch_size=batch,
                             learning_rate=1e-4, lr_schedule="constant", progress=False,
                             tensorboard=False, plots=False, device="cpu", eval_every=0)


def time_reward_steps(task: str, steps: int, batch: int, warmup: int, workdir: str) -> float:
    """rewardkit's side: median seconds of ``RewardTrainer.step()`` after ``warmup`` steps."""
    from rewardkit.models.train import RewardTrainer

    trainer = RewardTrainer(reward_config(task, workdir, steps, batch))
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        trainer.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[warmup:])


def step_clock(times: list[float]) -> Any:
    """A ``transformers`` callback appending to ``times`` the time from one step's end to the
    next: the whole iteration, batch collation included (rewardkit's ``step()`` also builds its
    batch; ``on_step_begin`` fires after the fetch)."""
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        last: float | None = None

        def on_step_end(self, *a, **k):  # noqa: ANN002, ANN003
            now = time.perf_counter()
            if self.last is not None:
                times.append(now - self.last)
            self.last = now

    return Clock()
