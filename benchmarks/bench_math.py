"""Math-Verify against rewardkit's ``math`` reward on the same cases, in one run.

Accuracy, each side by side:

1. ``data/math_equivalence.jsonl`` — rewardkit's own labelled set (each row with its options).
2. ``data/math_verify_suite.jsonl`` — Math-Verify's own test suite, restated, both presets
   (``bench_math_suite.py``); rows marked with a policy are documented differences
   (docs/math.md) and are counted apart.
3. ``data/math_realistic.jsonl`` — completions written as models write them (GSM8K and MATH
   chain of thought, Minerva's "Final Answer", reasoning models with ``<think>``, ``<answer>``).
4. ``data/math_hacks.jsonl`` — completions that try to get a reward without the answer; the
   figure is how many each side refuses.

Throughput (distinct completions per second), in interleaved rounds that alternate which side
runs first, every round printed and the median ratios reported, for a *fresh* scorer (new each
round, pool started and warmed up on other pairs only: training sees new completions every step)
beside a *warm* one (kept across rounds, it has seen the pairs before): on fresh data (the
differential corpus of ``bench_math_corpus.py``: every gold of the project's sets and of
Math-Verify's suite in every answer style), a realistic chain-of-thought mix (the realistic set,
each completion varied into ``--copies`` distinct ones, as the samples of one prompt in GRPO) and
the plain-number mix (``math_rl_mix.make_mix``: mostly integers). Also the worker pool's start-up
cost.

Run: ``python benchmarks/bench_math.py [--rounds 3] [--copies 6]``. Needs the ``bench`` extra
(``math-verify``). On a shared machine timings are noisy; read the ratio within a pair.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import rewardkit  # noqa: E402
from bench_math_corpus import corpus, math_verify_judge  # noqa: E402
from math_rl_mix import make_mix  # noqa: E402
from rewardkit import Sample  # noqa: E402


def load(name: str) -> list[dict]:
    return [json.loads(x) for x in (ROOT / "data" / name).read_text().splitlines() if x.strip()]


def rewardkit_scores(rows: list[dict], preset: str, with_prompt: bool = True) -> list[float]:
    groups: dict[str, list[int]] = defaultdict(list)
    for k, r in enumerate(rows):
        groups[json.dumps(r.get("options", {}), sort_keys=True)].append(k)
    out = [0.0] * len(rows)
    for options, idx in groups.items():
        opts = {"preset": preset, **json.loads(options)}
        with rewardkit.load("math", **opts) as v:
            samples = [Sample(rows[k].get("prompt", "") if with_prompt else "",
                              rows[k]["completion"], rows[k]["gold"]) for k in idx]
            for k, s in zip(idx, v.score(samples)):
                out[k] = s.value
    return out


def agreement(scores: list[float], rows: list[dict]) -> tuple[int, int, list]:
    wrong = [r["id"] for s, r in zip(scores, rows) if s != r["expected"]]
    return len(rows) - len(wrong), len(rows), wrong


def accuracy_section() -> None:
    mv = math_verify_judge()
    print("== accuracy (agreement with the labels) ==")
    labeled = load("math_equivalence.jsonl")
    rk = [0.0] * len(labeled)
    groups: dict[str, list[int]] = defaultdict(list)
    for k, r in enumerate(labeled):
        groups[json.dumps(r["options"], sort_keys=True)].append(k)
    for options, idx in groups.items():
        with rewardkit.load("math", **json.loads(options)) as v:
            for k, s in zip(idx, v.score([Sample("", labeled[k]["completion"], labeled[k]["gold"])
                                          for k in idx])):
                rk[k] = s.value
    _print_pair("rewardkit's labelled set", labeled, [mv(r["gold"], r["completion"])
                                                     for r in labeled], rk)

    import bench_math_suite

    suite = bench_math_suite.load_suite()
    print(f"\nMath-Verify's test suite, restated: {len(suite)} cases")
    bench_math_suite.report("Math-Verify", suite, bench_math_suite.math_verify_verdicts(suite),
                            None, False)
    for preset in ("eval", "default"):
        bench_math_suite.report(f"rewardkit {preset}", suite,
                                bench_math_suite.rewardkit_verdicts(suite, preset), preset, False)

    real = load("math_realistic.jsonl")
    mv_r = [mv(r["gold"], r["completion"]) for r in real]
    _print_pair("realistic completions (default preset, prompt given)", real, mv_r,
                rewardkit_scores(real, "default"))
    _print_pair("realistic completions (eval preset)", real, mv_r, rewardkit_scores(real, "eval"))

    hacks = load("math_hacks.jsonl")
    mv_h = [mv(r["gold"], r["completion"]) for r in hacks]
    rk_h = rewardkit_scores(hacks, "default")
    rk_he = rewardkit_scores(hacks, "eval")
    print(f"\nhack list ({len(hacks)} completions that must score 0): refused by")
    print(f"  Math-Verify {sum(s == 0 for s in mv_h):3d}   rewardkit default {sum(s == 0 for s in rk_h):3d}"
          f"   rewardkit eval {sum(s == 0 for s in rk_he):3d}")
    print(f"  rewarded by Math-Verify: {[hacks[k]['kind'] for k, s in enumerate(mv_h) if s]}")
    print(f"  rewarded by rewardkit default: {[hacks[k]['kind'] for k, s in enumerate(rk_h) if s]}")
    print(f"  rewarded by rewardkit eval: {[hacks[k]['kind'] for k, s in enumerate(rk_he) if s]}")


def _print_pair(title: str, rows: list[dict], mv: list[float], rk: list[float]) -> None:
    a, n, mv_wrong = agreement(mv, rows)
    b, _, rk_wrong = agreement(rk, rows)
    print(f"\n{title}: {n} cases")
    print(f"  Math-Verify {a / n:7.1%} ({a}/{n})   rewardkit {b / n:7.1%} ({b}/{n})")
    print(f"  ids Math-Verify disagrees on: {mv_wrong[:40]}")
    print(f"  ids rewardkit disagrees on:   {rk_wrong[:40]}")


def realistic_mix(copies: int, seed: int = 3) -> list[dict]:
    """Each realistic completion varied into ``copies`` distinct ones (a different worked number
    in the reasoning), as the samples of one prompt."""
    rng = random.Random(seed)
    out = []
    for r in load("math_realistic.jsonl"):
        for c in range(copies):
            note = f"(Check {c}: {rng.randint(2, 999)} + {rng.randint(2, 999)} is a side computation.)\n"
            out.append({"gold": r["gold"], "completion": note + r["completion"],
                        "correct": bool(r["expected"]), "prompt": r.get("prompt", "")})
    rng.shuffle(out)
    return out


def needs_sympy(pairs: list[dict]) -> int:
    from rewardkit.verifiers.math.config import make_options
    from rewardkit.verifiers.math.extract import extract
    from rewardkit.verifiers.math.normal_form import read_answers, read_gold
    from rewardkit.verifiers.math.verdict import decide

    opts = make_options("default")
    count = 0
    for p in pairs:
        ex = extract(p["completion"], opts)
        if ex.candidates:
            try:
                gold = read_gold(p["gold"], opts)
            except ValueError:
                continue
            if decide(gold, read_answers(ex.candidates, gold, opts), opts,
                      p.get("prompt", "")) is None:
                count += 1
    return count


def time_mv(pairs: list[dict]) -> tuple[float, list[float]]:
    mv = math_verify_judge()
    start = time.perf_counter()
    scores = [mv(p["gold"], p["completion"]) for p in pairs]
    return len(pairs) / (time.perf_counter() - start), scores


def time_rk(verifier, pairs: list[dict], batch: int) -> tuple[float, list[float]]:
    samples = [Sample(p.get("prompt", ""), p["completion"], p["gold"]) for p in pairs]
    start = time.perf_counter()
    scores: list[float] = []
    for i in range(0, len(samples), batch):
        scores += [s.value for s in verifier.score(samples[i:i + batch])]
    return len(pairs) / (time.perf_counter() - start), scores


_NEEDS_SYMPY = Sample("", r"\boxed{\sec x}", r"\frac{1}{\cos x}")  # outside the fast reader


def fresh_scorer(warmup: list[dict], batch: int):
    """A new scorer as a training run starts one: pool started, warmed up on other pairs (the
    labelled set) only, so nothing it caches (worker gold parses) comes from the timed pairs."""
    v = rewardkit.load("math")
    v.score([_NEEDS_SYMPY] * v.options.n_workers)
    time_rk(v, warmup, batch)
    return v


def throughput_section(rounds: int, copies: int, batch: int, mix_n: int, corpus_golds: int) -> None:
    """Throughput on fresh data and on the mixes, side by side: ``rounds`` interleaved rounds per
    mix, alternating which side runs first. Each round times Math-Verify, a *fresh* scorer (new,
    warmed up on other pairs only: what training sees, new completions every step) and a *warm*
    scorer (one kept across rounds, which has seen the mix before); every round's figures and
    ratios are printed, and the median ratios."""
    print("\n== throughput (pairs per second; fresh and warm scorer) ==")
    start = time.perf_counter()
    with rewardkit.load("math") as v:
        v.score([_NEEDS_SYMPY])
        cold = time.perf_counter() - start
        start = time.perf_counter()
        v.score([Sample("", r"\boxed{\sec y}", r"\frac{1}{\cos y}")])
        warm = time.perf_counter() - start
    print(f"pool start-up: first sympy verdict {cold:.2f}s cold, then {warm * 1000:.1f} ms")
    fresh_corpus = [dict(r, correct=bool(r["expected"]))
                    for r in corpus(corpus_golds)]
    mixes = (("differential corpus (every gold in every style; fresh data)", fresh_corpus),
             ("realistic chain-of-thought mix", realistic_mix(copies)),
             ("plain-number mix (mostly integers)", make_mix(mix_n)))
    warmup = [{"gold": r["gold"], "completion": r["completion"]}
              for r in load("math_equivalence.jsonl") if not r["options"]]
    with rewardkit.load("math") as v:
        v.score([_NEEDS_SYMPY] * v.options.n_workers)
        time_rk(v, warmup, batch)  # warm-up on other pairs
        time_mv(warmup[:100])
        medians = {}
        for title, pairs in mixes:
            print(f"\n{title}: {len(pairs)} distinct pairs, {needs_sympy(pairs)} need sympy; "
                  f"batches of {batch}")
            fresh_ratios, warm_ratios = [], []
            for k in range(rounds):
                with fresh_scorer(warmup, batch) as fresh:
                    if k % 2 == 0:
                        mv_rate, mv_scores = time_mv(pairs)
                        fresh_rate, rk_scores = time_rk(fresh, pairs, batch)
                        warm_rate, _ = time_rk(v, pairs, batch)
                    else:
                        fresh_rate, rk_scores = time_rk(fresh, pairs, batch)
                        warm_rate, _ = time_rk(v, pairs, batch)
                        mv_rate, mv_scores = time_mv(pairs)
                fresh_ratios.append(fresh_rate / mv_rate)
                warm_ratios.append(warm_rate / mv_rate)
                print(f"  round {k + 1} ({'Math-Verify' if k % 2 == 0 else 'rewardkit'} first): "
                      f"Math-Verify {mv_rate:6.0f}/s   rewardkit fresh {fresh_rate:6.0f}/s "
                      f"(x{fresh_rate / mv_rate:.1f})   warm {warm_rate:6.0f}/s "
                      f"(x{warm_rate / mv_rate:.1f})")
            medians[title] = (statistics.median(fresh_ratios), statistics.median(warm_ratios))
            if "correct" in pairs[0]:
                labels = [float(p["correct"]) for p in pairs]
                print(f"  agreement with the labels: Math-Verify "
                      f"{sum(a == b for a, b in zip(mv_scores, labels)) / len(pairs):.1%}, "
                      f"rewardkit {sum(a == b for a, b in zip(rk_scores, labels)) / len(pairs):.1%}")
            print(f"  median ratio: fresh x{medians[title][0]:.1f}, warm x{medians[title][1]:.1f}")
    print("\nside by side (median of the rounds, fresh / warm): " + "; ".join(
        f"{title} x{f:.1f} / x{w:.1f}" for title, (f, w) in medians.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds per mix")
    ap.add_argument("--copies", type=int, default=6, help="variants of each realistic completion")
    ap.add_argument("--mix", type=int, default=1200, help="pairs of the old RL-like mix")
    ap.add_argument("--batch", type=int, default=256, help="samples per score() call")
    ap.add_argument("--corpus-golds", type=int, default=1000,
                    help="golds of the differential corpus (the fresh-data mix)")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args()
    if not args.skip_accuracy:
        accuracy_section()
    if not args.skip_throughput:
        throughput_section(args.rounds, args.copies, args.batch, args.mix, args.corpus_golds)


if __name__ == "__main__":
    main()
