"""Scoring time of a K-head shared-trunk ensemble vs K separate reward models of the same size.

Both sides score the same samples through the `ensemble` reward with the same combine rule and
normalisation off: the shared form (``model=DIR``, one trunk pass for all K heads) against K
`reward_model` members (the same trunk and heads written out as K single-head models by
``split_heads``, so both compute the same K values — checked). One single-head model is timed
too, for the "≈ 1× of one model" comparison. Order alternates per pair.

    python benchmarks/bench_ensemble.py --ks 4 8 --pairs 3 --samples 64
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import rewardkit
from rewardkit import Sample
from rewardkit.models.loading import resolve_device_dtype
from rewardkit.models.multihead import split_heads
from rewardkit.testing import make_tiny_reward_model


def samples(n: int) -> list[Sample]:
    words = "the sum of these numbers is found by adding one step per line".split()
    return [Sample(f"Problem {i}: " + " ".join(words[: 3 + i % 8]),
                   " ".join(words * (1 + i % 6))) for i in range(n)]


def timed(scorer, batch) -> tuple[float, list]:
    start = time.perf_counter()
    out = scorer.score(batch)
    return time.perf_counter() - start, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    batch = samples(args.samples)
    print(f"{args.samples} samples; tiny random Qwen2 classifiers, hidden {args.hidden}, "
          f"{args.layers} layers; device and dtype {resolve_device_dtype('auto', 'auto')}")
    with tempfile.TemporaryDirectory() as tmp:
        for k in args.ks:
            multi = make_tiny_reward_model(Path(tmp) / f"multi{k}", num_labels=k,
                                           hidden_size=args.hidden, num_layers=args.layers)
            singles = split_heads(multi, Path(tmp) / f"singles{k}")
            shared = rewardkit.load("ensemble", model=str(multi), normalize=False)
            separate = rewardkit.load("ensemble", normalize=False, members=[
                {"reward": "reward_model", "options": {"model": str(p)}} for p in singles])
            one = rewardkit.load("reward_model", model=str(singles[0]))
            for scorer in (shared, separate, one):  # warm-up
                scorer.score(batch[:4])
            a, b = shared.score(batch), separate.score(batch)
            worst = max(abs(x - y) for s, t in zip(a, b)
                        for x, y in zip(s.components.values(), t.components.values()))
            assert worst < 1e-4, f"the two forms disagree by {worst}"
            t_shared, t_sep, t_one = [], [], []
            for pair in range(args.pairs):
                order = [("shared", shared, t_shared), ("separate", separate, t_sep),
                         ("one", one, t_one)]
                if pair % 2:
                    order.reverse()
                for _, scorer, sink in order:
                    sink.append(timed(scorer, batch)[0])
                print(f"K={k} pair {pair + 1}: shared {t_shared[-1] * 1e3:.1f} ms, "
                      f"{k} separate {t_sep[-1] * 1e3:.1f} ms (ratio "
                      f"{t_sep[-1] / t_shared[-1]:.2f}x), one model {t_one[-1] * 1e3:.1f} ms "
                      f"(shared/one {t_shared[-1] / t_one[-1]:.2f}x)")
            ms, mp, mo = (statistics.median(x) for x in (t_shared, t_sep, t_one))
            print(f"K={k} medians: shared {ms * 1e3:.1f} ms, separate {mp * 1e3:.1f} ms, one "
                  f"{mo * 1e3:.1f} ms; separate/shared {mp / ms:.2f}x, shared/one "
                  f"{ms / mo:.2f}x (max |difference| of the K values {worst:.1e})")


if __name__ == "__main__":
    main()
