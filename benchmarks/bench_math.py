"""Math-Verify against rewardkit's ``math`` reward on the same cases, in one run.

1. Agreement with the labels of ``data/math_equivalence.jsonl`` (each row scored with its own
   options by rewardkit; Math-Verify has no options and is scored as is).
2. Throughput on the RL-like mix of ``benchmarks/math_rl_mix.py`` (distinct pairs), and on a
   small set only the sympy path can judge (the slow end): Math-Verify
   single-process against rewardkit with one worker process and with its default pool, with the
   worker pool already started (as in training, where it persists across steps).

Run: ``python benchmarks/bench_math.py [--pairs 2400] [--skip-labeled]``. Needs the ``bench``
extra (``math-verify``). On a shared machine the timings are noisy; the ratio is what to read.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import rewardkit  # noqa: E402
from math_rl_mix import make_hard, make_mix  # noqa: E402
from rewardkit import Sample  # noqa: E402


def math_verify_judge():
    import logging

    from math_verify import parse, verify

    # Math-Verify logs every timeout (with the whole input) as a warning; the counts are what
    # matter here.
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    def judge(gold: str, completion: str) -> float:
        try:
            return float(verify(parse("\\boxed{" + gold + "}"), parse(completion)))
        except Exception:  # noqa: BLE001 - a failure counts as 0, as Math-Verify's own default
            return 0.0

    return judge


def labeled_agreement(rows: list[dict]) -> tuple[float, float, list, list]:
    mv = math_verify_judge()
    mv_right, mv_wrong = 0, []
    for r in rows:
        if mv(r["gold"], r["completion"]) == r["expected"]:
            mv_right += 1
        else:
            mv_wrong.append(r["id"])
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[json.dumps(r["options"], sort_keys=True)].append(r)
    rk_right, rk_wrong = 0, []
    for options, rs in groups.items():
        with rewardkit.load("math", **json.loads(options)) as v:
            for r, s in zip(rs, v.score([Sample("", r["completion"], r["gold"]) for r in rs])):
                if s.value == r["expected"]:
                    rk_right += 1
                else:
                    rk_wrong.append(r["id"])
    return mv_right / len(rows), rk_right / len(rows), mv_wrong, rk_wrong


def throughput(pairs: list[dict], batch: int) -> dict[str, tuple[float, float]]:
    out = {}
    mv = math_verify_judge()
    start = time.perf_counter()
    mv_scores = [mv(p["gold"], p["completion"]) for p in pairs]
    elapsed = time.perf_counter() - start
    out["Math-Verify (1 process)"] = (len(pairs) / elapsed, _accuracy(mv_scores, pairs))
    samples = [Sample("", p["completion"], p["gold"]) for p in pairs]
    for label, kwargs in (("rewardkit (1 worker)", {"workers": 1}),
                          ("rewardkit (default pool)", {})):
        with rewardkit.load("math", **kwargs) as v:
            v.score([Sample("", r"\boxed{\sin x}", r"\sin x")] * v.options.n_workers)  # start pool
            start = time.perf_counter()
            scores = []
            for i in range(0, len(samples), batch):
                scores += [s.value for s in v.score(samples[i:i + batch])]
            elapsed = time.perf_counter() - start
        out[label] = (len(pairs) / elapsed, _accuracy(scores, pairs))
    return out


def _accuracy(scores: list[float], pairs: list[dict]) -> float:
    return sum((s == 1.0) == p["correct"] for s, p in zip(scores, pairs)) / len(pairs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2400)
    ap.add_argument("--batch", type=int, default=256, help="samples per score() call")
    ap.add_argument("--hard", type=int, default=60, help="sympy-only pairs")
    ap.add_argument("--skip-labeled", action="store_true")
    args = ap.parse_args()

    if not args.skip_labeled:
        rows = [json.loads(x) for x in (ROOT / "data" / "math_equivalence.jsonl").read_text()
                .splitlines() if x.strip()]
        mv_acc, rk_acc, mv_wrong, rk_wrong = labeled_agreement(rows)
        print(f"labeled set ({len(rows)} rows): agreement with labels")
        print(f"  Math-Verify {mv_acc:7.1%}   rewardkit {rk_acc:7.1%}")
        print(f"  rows Math-Verify gets wrong: {mv_wrong}")
        print(f"  rows rewardkit gets wrong:   {rk_wrong}")

    for title, pairs in ((f"RL-like mix ({args.pairs} distinct pairs, half correct)",
                          make_mix(args.pairs)),
                         ("sympy-only pairs (the slow end: log bases, powers of functions, "
                          "matrices, inequalities)", make_hard(args.hard))):
        results = throughput(pairs, args.batch)
        print(f"\n{title}; batches of {args.batch}")
        base = results["Math-Verify (1 process)"][0]
        for label, (rate, acc) in results.items():
            print(f"  {label:26s} {rate:9.0f} pairs/s   agreement {acc:6.1%}   "
                  f"ratio x{rate / base:.1f}")


if __name__ == "__main__":
    main()
