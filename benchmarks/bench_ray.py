"""Offline scoring throughput: local ``--workers N`` against ``--ray`` with N CPUs, same job.

    .venv/bin/python benchmarks/bench_ray.py --rows 20000 --pairs 3
    .venv/bin/python benchmarks/bench_ray.py --job rm --rows 2000 --pairs 2 --shard-rows 250

Scores the same ``math`` job (GSM8K-style numbers and LaTeX answers, a quarter wrong), or with
``--job rm`` a tiny learned reward model on CPU, with the local process pool and with Ray Data's actor pool of the same size, alternating which runs first,
and prints rows/s of both, their ratio and Ray's overhead in seconds, pair by pair. Ray starts
once before the pairs (``ray.init`` is a fixed cost of a cluster, paid once per job); its start
time is printed apart. Both outputs are checked to be identical row for row.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from rewardkit.offline import RewardSpec, ScoreJob, run
from rewardkit.scale.data import RayOptions, read_output, run_on_ray


def write_math_rows(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(n):
            a, b = rng.randint(1, 999), rng.randint(1, 999)
            gold = str(a + b)
            said = gold if rng.random() < 0.75 else str(a + b + rng.randint(1, 9))
            completion = (f"{a} + {b} = {said}. #### {said}" if i % 2 else
                          f"Adding, we get $\\boxed{{{said}}}$.")
            f.write(json.dumps({"prompt": f"What is {a} + {b}? (group {i // 8})",
                                "completion": completion, "reference": gold}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--shard-rows", type=int, default=2_500)
    parser.add_argument("--job", choices=["math", "rm"], default="math",
                        help="rm: a tiny learned reward model (hidden 32, 1 layer) on CPU")
    args = parser.parse_args()

    import ray

    tmp = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    src = tmp / "in.jsonl"
    write_math_rows(src, args.rows)
    spec = RewardSpec("math")
    if args.job == "rm":
        from rewardkit.testing import make_tiny_reward_model

        model = make_tiny_reward_model(tmp / "rm")
        spec = RewardSpec("reward_model", {"model": str(model), "device": "cpu"})
    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    print(f"ray.init: {time.perf_counter() - t0:.1f} s (once per job)")
    print(f"{args.rows} rows of {args.job}, {args.workers} workers/actors")

    def local(k: int) -> float:
        job = ScoreJob(str(src), str(tmp / f"local{k}.jsonl"), spec, workers=args.workers,
                       progress=False)
        start = time.perf_counter()
        run(job)
        return time.perf_counter() - start

    def on_ray(k: int) -> float:
        job = ScoreJob(str(src), str(tmp / f"ray{k}"), spec, progress=False)
        start = time.perf_counter()
        run_on_ray(job, RayOptions(actors=args.workers, shard_rows=args.shard_rows))
        return time.perf_counter() - start

    try:
        for k in range(args.pairs):
            order = (("local", local), ("ray", on_ray)) if k % 2 == 0 else \
                (("ray", on_ray), ("local", local))
            secs = {name: fn(k) for name, fn in order}
            rate = {name: args.rows / s for name, s in secs.items()}
            print(f"pair {k + 1} ({order[0][0]} first): local --workers {args.workers} "
                  f"{rate['local']:,.0f} rows/s | --ray {rate['ray']:,.0f} rows/s | "
                  f"ray/local {rate['ray'] / rate['local']:.2f} | "
                  f"ray overhead {secs['ray'] - secs['local']:+.1f} s")
            local_rows = [json.loads(x) for x in (tmp / f"local{k}.jsonl").read_text().splitlines()]
            ray_rows = list(read_output(str(tmp / f"ray{k}")))
            if args.job == "math":
                assert ray_rows == local_rows, "outputs differ"
            else:  # float logits may differ in the last bits between thread counts
                assert len(ray_rows) == len(local_rows) and all(
                    abs(a["reward"] - b["reward"]) < 1e-4 for a, b in zip(ray_rows, local_rows))
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
