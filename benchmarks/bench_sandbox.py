"""Per-run overhead of the sandbox against the cheapest unsandboxed alternative.

Peer: a fresh ``python -c pass`` subprocess per run (what a harness that starts one interpreter
per program pays, with no isolation at all). Ours: ``Sandbox.run`` of a trivial Python program
(``pass``), fully isolated (namespaces, per-run uid, rlimits, private directory), sequentially
and with ``run_many`` on a pool. Prints both figures and the ratio from one run.

    python benchmarks/bench_sandbox.py [--runs 200] [--pool 2]
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
    args = parser.parse_args()

    def fresh_python() -> None:
        subprocess.run([sys.executable, "-c", "pass"], check=True, env={})

    program = Program("pass")
    with Sandbox(pool_size=args.pool) as sb:
        caps = sb.capabilities()
        sb.run(program)  # start the fork server outside the timing
        ours = per_run_ms(lambda: sb.run(program), args.runs)
        start = time.perf_counter()
        results = sb.run_many([program] * args.runs)
        batch = (time.perf_counter() - start) * 1000 / args.runs
        assert all(r.status == "ok" for r in results), {r.status for r in results}
        bash_ms = per_run_ms(lambda: sb.run(Program("true", "bash")), 20) \
            if caps["languages"]["bash"] else float("nan")
    peer = per_run_ms(fresh_python, min(args.runs, 100))

    print(capabilities_report())
    print()
    print(f"{'':44s}{'ms/run':>10s}")
    print(f"{'peer: fresh `python -c pass` subprocess':44s}{peer:10.2f}")
    print(f"{'rewardkit: Sandbox.run(python `pass`)':44s}{ours:10.2f}")
    print(f"{f'rewardkit: run_many, pool={args.pool} (amortised)':44s}{batch:10.2f}")
    print(f"{'rewardkit: Sandbox.run(bash `true`, exec)':44s}{bash_ms:10.2f}")
    print(f"ratio rewardkit/peer (sequential): {ours / peer:.3f}x; "
          f"per-run overhead saved: {peer - ours:.1f} ms")


if __name__ == "__main__":
    main()
