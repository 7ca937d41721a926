"""Bare answers read through the model's own solution, split by whether that solution was right.

``verify: generate`` reads a bare answer (``"89+1+7="`` -> ``"97"``) by the model's own greedy
worked solution with the answer put in its place (docs/learned.md). This splits each slice's
bare pairs of data/learned/rm_out_of_kind.jsonl by what the model's own solution ended on — the
right answer, the pair's wrong one, or another number — and prints the pair accuracy in each
part: where the bare reading is limited by the model's checking and where by its solving.

    python benchmarks/learned_bare_own_answer.py --model runs/L/rm_whole1000_s0/final \\
        [--model DIR ...] [--slices addends_100_999,steps_7_8,first_500_999]

Every ``--model`` (several are seeds of one recipe) is read on every slice, one thread each
unless ``OMP_NUM_THREADS`` says otherwise.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "data" / "learned" / "rm_out_of_kind.jsonl"
SLICES = ("in_distribution", "first_500_999", "steps_7_8", "addends_100_999")
PARTS = ("right", "wrong", "other")
"""What the model's own solution ended on: the pair's right answer, its wrong one, another."""


def split_by_own_answer(pairs: Sequence[Any], chosen: Sequence[Any],
                        rejected: Sequence[Any]) -> dict[str, dict[str, float]]:
    """Per part of :data:`PARTS`: how many pairs (``n``) and how many the reward ranked right
    (``ranked``), from each :class:`~rewardkit.models.data.Pair` and the Scores of its two
    answers (the chosen one's
    ``info["own_answers"][0]`` is the model's own answer). Each pair counts as the pair
    accuracy counts it (:func:`~rewardkit.models.evaluation.pair_outcomes`: a tie is half, a
    side with an error Score is ranked wrong)."""
    from rewardkit.models.evaluation import pair_outcomes

    if not len(pairs) == len(chosen) == len(rejected):
        raise ValueError(f"{len(pairs)} pairs but {len(chosen)} chosen and {len(rejected)} "
                         "rejected Scores")
    outcomes = pair_outcomes([s.value for s in chosen], [s.value for s in rejected],
                             [not (a.ok and b.ok) for a, b in zip(chosen, rejected)])
    split = {part: {"n": 0, "ranked": 0.0} for part in PARTS}
    for pair, good, outcome in zip(pairs, chosen, outcomes):
        own = (good.info.get("own_answers") or [None])[0]
        part = ("right" if str(own) == pair.chosen else
                "wrong" if str(own) == pair.rejected else "other")
        split[part]["n"] += 1
        split[part]["ranked"] += float(outcome)
    return split


def read_model(model: str, slices: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    import rewardkit
    from rewardkit import Sample
    from rewardkit.models.data import read_pairs

    reward = rewardkit.load("implicit_reward", model=model, device="cpu", verify="generate",
                            num_solutions=1)
    pairs = read_pairs(str(PAIRS))
    out = {}
    for name in slices:
        picked = [p for p in pairs if p.subset == f"{name}/bare"]
        if not picked:
            raise SystemExit(f"no bare pairs of slice {name!r} in {PAIRS}")
        # both sides in one call, as the pair accuracy scores them: each prompt's own
        # solution is written once
        scores = reward.score([Sample(p.prompt, side) for p in picked
                               for side in (p.chosen, p.rejected)])
        out[name] = split_by_own_answer(picked, scores[0::2], scores[1::2])
    return out


def _share(ranked: float, n: float) -> str:
    return f"{ranked / n:.3f} ({ranked:g}/{n})" if n else "–"


def reader_arguments(doc: str, model_help: str) -> argparse.ArgumentParser:
    """The command line of the scripts that read a model's own solutions on the slices:
    ``--model`` (repeatable) and ``--slices`` (comma-separated, parsed into a list)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, help=model_help)
    parser.add_argument("--slices", default=list(SLICES),
                        type=lambda value: [s for s in value.split(",") if s],
                        help=f"comma-separated slices (default {','.join(SLICES)})")
    return parser


def main() -> None:
    args = reader_arguments(__doc__, "a trained model folder; repeat for seeds").parse_args()
    slices = args.slices
    print("| model | slice | own solution right | pairs ranked right: own right | own wrong "
          "answer | own other number | all |")
    print("|---|---|---|---|---|---|---|")
    for model in args.model:
        for name, parts in read_model(model, slices).items():
            n = sum(p["n"] for p in parts.values())
            ranked = sum(p["ranked"] for p in parts.values())
            print(f"| {model} | {name} | {parts['right']['n'] / n:.3f} | "
                  + " | ".join(_share(parts[p]["ranked"], parts[p]["n"]) for p in PARTS)
                  + f" | {ranked / n:.3f} |", flush=True)


if __name__ == "__main__":
    main()
