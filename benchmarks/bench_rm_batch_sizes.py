"""Reward-model scoring by batch size: one reward model against a K-head ensemble (one trunk,
K heads) on the same samples, at request batch sizes 1 to 256, on any device.

For each scorer and batch size the samples are sent as ``Scorer.score(batch)`` calls of that
many samples; prints samples/s, real tokens/s (pad tokens not counted), the ratio of the
K-head ensemble to the one model, and on a GPU the memory the loaded scorer holds and the peak
allocated while scoring. Each figure is the median of ``--repeats``, the scorers' order
alternating per repeat, after one untimed pass at that batch size. The models are random Qwen2
classifiers built here (no downloads).

    python benchmarks/bench_rm_batch_sizes.py --device cuda --hidden 1024 --layers 12
    python benchmarks/bench_rm_batch_sizes.py --device cpu --hidden 128 --layers 3 \\
        --batch-sizes 1 16 64 --samples 128
"""
from __future__ import annotations

import argparse
import gc
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import rewardkit
from rewardkit import Sample
from rewardkit.testing import make_tiny_reward_model


def samples(n: int, seed: int = 0) -> list[Sample]:
    """Answers of varied length (10 to 300 words, most near 60), as rollouts come."""
    rng = random.Random(seed)
    words = ("the sum of these numbers is found by adding one step per line so we carry the "
             "ten and check the result again").split()
    out = []
    for i in range(n):
        length = min(300, max(10, int(rng.lognormvariate(4.1, 0.6))))
        out.append(Sample(f"Problem {i}: add the numbers on each line.",
                          " ".join(rng.choice(words) for _ in range(length))))
    return out


def real_tokens(model_dir: Path, batch: list[Sample]) -> int:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    return sum(len(tok(s.prompt + s.completion).input_ids) for s in batch)


def cuda(device: str) -> Any:
    if not device.startswith("cuda"):
        return None
    import torch

    return torch.cuda


def score_all(scorer: Any, data: list[Sample], batch: int, gpu: Any) -> tuple[float, float]:
    """Seconds to score ``data`` in calls of ``batch`` samples, and the peak GiB allocated."""
    if gpu is not None:
        gpu.synchronize()
        gpu.reset_peak_memory_stats()
    start = time.perf_counter()
    for i in range(0, len(data), batch):
        out = scorer.score(data[i:i + batch])
        bad = [s.error for s in out if not s.ok]
        if bad:
            raise RuntimeError(f"scoring failed: {bad[0]}")
    if gpu is not None:
        gpu.synchronize()
    return time.perf_counter() - start, (gpu.max_memory_allocated() / 2**30 if gpu else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1")
    parser.add_argument("--dtype", default="auto", help="auto: bf16 on CUDA, fp32 on CPU")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--k", type=int, default=4, help="heads of the ensemble")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--samples", type=int, default=512,
                        help="samples per measurement (batch 1 scores a quarter of them)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from rewardkit.runtime.device import resolve_device

    args.device = str(resolve_device(args.device))
    gpu = cuda(args.device)
    data = samples(args.samples)
    with tempfile.TemporaryDirectory() as tmp:
        one_dir = make_tiny_reward_model(Path(tmp) / "one", hidden_size=args.hidden,
                                         num_layers=args.layers)
        k_dir = make_tiny_reward_model(Path(tmp) / "heads", num_labels=args.k,
                                       hidden_size=args.hidden, num_layers=args.layers)
        tokens = real_tokens(one_dir, data)
        options = {"device": args.device, "dtype": args.dtype}
        makers = {
            "one model": lambda: rewardkit.load("reward_model", model=str(one_dir), **options),
            f"{args.k}-head ensemble": lambda: rewardkit.load(
                "ensemble", model=str(k_dir), normalize=False, model_options=options),
        }
        print(f"{args.hidden}x{args.layers} random Qwen2 classifiers on {args.device} "
              f"(dtype {args.dtype}); {len(data)} samples, {tokens / len(data):.0f} real tokens "
              f"each on average", flush=True)
        rate: dict[tuple[str, int], list[float]] = {}
        for batch in args.batch_sizes:
            part = data if batch > 1 else data[:max(1, len(data) // 4)]
            part_tokens = tokens if batch > 1 else real_tokens(one_dir, part)
            # An untimed pass first: on a GPU the first batches of a new shape load their
            # kernels (CUDA's lazy module loading), which only the first scorer timed would pay.
            warm = makers["one model"]()
            score_all(warm, part, batch, gpu)
            warm.close()
            del warm
            for repeat in range(args.repeats):
                names = list(makers) if repeat % 2 == 0 else list(reversed(makers))
                for name in names:
                    held = 0.0
                    if gpu is not None:
                        gc.collect()
                        gpu.empty_cache()
                        base = gpu.memory_allocated()
                    scorer = makers[name]()
                    if gpu is not None:
                        held = (gpu.memory_allocated() - base) / 2**30
                    scorer.score(part[:min(len(part), batch)])  # warm-up
                    seconds, peak = score_all(scorer, part, batch, gpu)
                    scorer.close()
                    del scorer
                    rate.setdefault((name, batch), []).append(seconds)
                    if repeat == args.repeats - 1:
                        s = statistics.median(rate[(name, batch)])
                        memory = (f", holds {held:.2f} GiB, peak {peak:.2f} GiB"
                                  if gpu is not None else "")
                        print(f"batch {batch:>3} {name:>16}: {len(part) / s:8.1f} samples/s, "
                              f"{part_tokens / s:10,.0f} tokens/s{memory}", flush=True)
            one = statistics.median(rate[("one model", batch)])
            heads = statistics.median(rate[(f"{args.k}-head ensemble", batch)])
            print(f"batch {batch:>3}: {args.k}-head ensemble time / one model time "
                  f"{heads / one:.2f}x", flush=True)


if __name__ == "__main__":
    main()
