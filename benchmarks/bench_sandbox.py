"""Per-run overhead of the sandbox against the cheapest unsandboxed alternative.

Peer: a fresh ``python -c pass`` subprocess per run (what a harness that starts one interpreter
per program pays, with no isolation at all). Ours: ``Sandbox.run`` of a trivial Python program
(``pass``), fully isolated (namespaces, per-run uid, rlimits, private directory), sequentially
and with ``run_many`` on a pool. Prints both figures and the ratio from one run.

Measured in ``--pairs`` pairs, the order alternating (peer first, then ours first...), each
pair's figures and ratio printed: on a shared machine only ratios from the same pair compare.

    python benchmarks/bench_sandbox.py [--runs 200] [--pool 2] [--pairs 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from rewardkit.sandboxes import Program, Sandbox, capabilities_report


def per_run_ms(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--pool", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()

    def fresh_python() -> None:
        subprocess.run([sys.executable, "-c", "pass"], check=True, env={})

    program = Program("pass")
    print(capabilities_report())
    print()
    print(f"{'pair':>4s} {'peer ms/run':>12s} {'ours ms/run':>12s} {'run_many ms':>12s} "
          f"{'bash ms':>9s} {'ratio ours/peer':>16s}")
    ratios = []
    with Sandbox(pool_size=args.pool) as sb:
        caps = sb.capabilities()
        sb.run(program)  # start the fork server outside the timing
        for pair in range(args.pairs):
            if pair % 2 == 0:
                peer = per_run_ms(fresh_python, min(args.runs, 100))
            ours = per_run_ms(lambda: sb.run(program), args.runs)
            start = time.perf_counter()
            results = sb.run_many([program] * args.runs)
            batch = (time.perf_counter() - start) * 1000 / args.runs
            assert all(r.status == "ok" for r in results), {r.status for r in results}
            bash_ms = per_run_ms(lambda: sb.run(Program("true", "bash")), 20) \
                if caps["languages"]["bash"] else float("nan")
            if pair % 2 == 1:
                peer = per_run_ms(fresh_python, min(args.runs, 100))
            ratios.append(ours / peer)
            print(f"{pair + 1:>4d} {peer:12.2f} {ours:12.2f} {batch:12.2f} {bash_ms:9.2f} "
                  f"{ours / peer:15.3f}x")
    print(f"peer: a fresh `python -c pass` subprocess; ours: Sandbox.run(python `pass`), "
          f"run_many with pool={args.pool} (amortised), Sandbox.run(bash `true`, exec)")
    print(f"ratio rewardkit/peer, median of {len(ratios)} pairs: "
          f"{statistics.median(ratios):.3f}x")


if __name__ == "__main__":
    main()
