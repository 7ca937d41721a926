"""Framework overhead of the scoring spine, measured with the cheapest reward (exact_match).

Prints, for 100k rows:
  * the bare comparison (the reward's own work, no framework) in µs/sample,
  * Scorer.score on a batch of Samples in µs/sample and rows/s, and the difference: the
    framework's overhead per sample (target ≤ 20 µs),
  * Sample construction from dicts (what adapters and the CLI pay per row),
  * `rewardkit score` end to end on a 100k-row JSONL (read, score, write, summary), 1 and 2
    worker processes.
Run: python benchmarks/bench_overhead.py [--rows N]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rewardkit
from rewardkit import Sample


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    n = ap.parse_args().rows
    rows = [{"prompt": f"question {i // 8}", "completion": f"The answer is {i % 13}.",
             "reference": f"the answer is {i % 11}"} for i in range(n)]
    samples = [Sample(r["prompt"], r["completion"], r["reference"]) for r in rows]
    scorer = rewardkit.load("exact_match")

    def bare():
        norm = scorer.normalize
        return [float(norm(s.completion) == norm(s.reference)) for s in samples]

    def framework():
        return scorer.score(samples)

    assert [s.value for s in framework()] == bare()
    t_bare = best_of(bare)
    t_fw = best_of(framework)
    t_build = best_of(lambda: [Sample(r["prompt"], r["completion"], r["reference"]) for r in rows])
    us = 1e6 / n
    print(f"rows: {n:,}")
    print(f"bare comparison (no framework) : {t_bare * us:7.2f} µs/sample")
    print(f"Scorer.score (in-process)      : {t_fw * us:7.2f} µs/sample  {n / t_fw:12,.0f} rows/s")
    print(f"framework overhead             : {(t_fw - t_bare) * us:7.2f} µs/sample  (target ≤ 20)")
    print(f"Sample construction from dicts : {t_build * us:7.2f} µs/sample")

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
        for workers in (1, 2):
            out = Path(tmp) / f"out{workers}.jsonl"
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "rewardkit", "score", str(src), "-r",
                            "exact_match", "-o", str(out), "-q", "-j", str(workers),
                            "--chunk-size", "2048"], check=True, stdout=subprocess.DEVNULL)
            dt = time.perf_counter() - t
            print(f"CLI end to end, {workers} worker(s)   : {dt * us:7.2f} µs/row   "
                  f"{n / dt:12,.0f} rows/s  ({dt:.2f} s incl. start-up)")


if __name__ == "__main__":
    main()
