"""Reward models on mistakes the data generator never makes: a dropped carry, two digits
swapped, an operand miscopied from the prompt, an operand skipped, a result off by one.

    python benchmarks/learned_other_errors.py [--n 300] [--model NAME=DIR ...]

The shipped preference data (data/learned) has one kind of wrong answer: one digit of one step's
result replaced. Models make others. Here every pair is the right worked solution of a fresh
problem drawn like the training data (none is in any shipped file) against one with a mistake
of one kind in one step, later steps carrying it on as the generator's slips do:

  carry_dropped      the step's sum written digit by digit without carrying (58+67 -> 15)
  transposed         two different adjacent digits of the step's result swapped (117 -> 171)
  operand_miscopied  the step adds one digit-changed copy of its addend, correctly
  operand_skipped    one addend left out, the rest added correctly
  off_by_one         the step's result one above or below (a units-digit slip, as trained)

Each model is read with its own reward (a classifier with ``reward_model``, a causal LM with
``implicit_reward``, as ``eval rm`` does) and scored as ``eval rm`` scores (per kind, bootstrap
interval); the trivial rules on the same pairs are printed with them. Default models: the
figures' runs under runs/learned_figures (``python benchmarks/learned_figures.py``, the broad
one with ``--likelihood-from``) and data/learned/lm_base; pass ``--model NAME=DIR`` to choose.
"""
from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "learned"
RUNS = ROOT / "runs" / "learned_figures"
DEFAULT_MODELS = {"classifier (train rm, seed 0)": RUNS / "rm_seed0" / "final",
                  "TRL RewardTrainer (seed 0)": RUNS / "trl_seed0" / "final",
                  "train rm likelihood (seed 0)": RUNS / "likelihood_seed0" / "final",
                  "TRL SFTTrainer (seed 0)": RUNS / "trl_sft_seed0" / "final",
                  "lm_base": DATA / "lm_base",
                  "train rm likelihood from the broad base (seed 0)":
                      RUNS / "likelihood_lm_base_broad_seed0" / "final",
                  "train rm likelihood from the broad base, replay recipe (seed 0)":
                      RUNS / "likelihood_lm_base_broad_replay_seed0" / "final"}
KINDS = ("carry_dropped", "transposed", "operand_miscopied", "operand_skipped", "off_by_one")


def shipped_problems() -> set[str]:
    """Every problem of every shipped file, as ``a+b+c``."""
    seen = set()
    for path in DATA.glob("*.jsonl"):
        for line in path.open():
            seen.add("+".join(re.findall(r"\d+", json.loads(line)["prompt"])))
    return seen


def no_carry(a: int, b: int) -> int:
    digits, place = 0, 1
    while a or b:
        digits += ((a % 10 + b % 10) % 10) * place
        a, b, place = a // 10, b // 10, place * 10
    return digits


def mistaken(ops: list[int], kind: str, rng: random.Random) -> list[str] | None:
    """The worked steps with one mistake of ``kind`` at a step drawn from those that can take
    it; None when no step can."""
    from rewardkit.models.arithmetic import solve

    order = list(range(len(ops) - 1))
    rng.shuffle(order)
    for at in order:
        total = sum(ops[:at + 1])
        x, right = ops[at + 1], total + ops[at + 1]
        if kind == "operand_skipped":
            return solve(ops[:at + 1] + ops[at + 2:])
        if kind == "operand_miscopied":
            digits = list(str(x))
            i = rng.randrange(len(digits))
            choices = [d for d in "0123456789" if d != digits[i] and not (i == 0 and d == "0")]
            digits[i] = rng.choice(choices)
            return solve(ops[:at + 1] + [int("".join(digits))] + ops[at + 2:])
        if kind == "carry_dropped":
            wrong = no_carry(total, x)
        elif kind == "transposed":
            s = str(right)
            pairs = [i for i in range(len(s) - 1) if s[i] != s[i + 1] and
                     not (i == 0 and s[1] == "0")]
            if not pairs:
                continue
            i = rng.choice(pairs)
            wrong = int(s[:i] + s[i + 1] + s[i] + s[i + 2:])
        else:
            wrong = right + rng.choice((-1, 1))
        if wrong != right and wrong >= 0:
            return solve(ops, at, wrong - right)
    return None


def build_pairs(n: int, seed: int) -> list[Any]:
    from rewardkit.models import arithmetic
    from rewardkit.models.data import Pair

    rng = random.Random(seed)
    stream = arithmetic.problem_stream(arithmetic.TRAIN, seed, shipped_problems())
    pairs = []
    for kind in KINDS:
        kept = 0
        while kept < n:
            pb = next(stream)
            wrong = mistaken(pb.ops, kind, rng)
            if wrong is None:
                continue
            pairs.append(Pair(pb.prompt, "\n".join(arithmetic.solve(pb.ops)), "\n".join(wrong),
                              subset=kind))
            kept += 1
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="pairs per kind of mistake")
    parser.add_argument("--seed", type=int, default=123)
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    import rewardkit
    from rewardkit.models.evaluation import evaluate_reward_model
    from rewardkit.models.heuristics import pair_heuristics
    from rewardkit.models.loading import classifier_kind, load_config

    models = dict(item.split("=", 1) for item in args.model) if args.model else DEFAULT_MODELS
    pairs = build_pairs(args.n, args.seed)
    out: dict[str, Any] = {"n_per_kind": args.n, "seed": args.seed, "models": {}}
    rules = pair_heuristics(pairs)
    for name, path in models.items():
        if not Path(path, "config.json").is_file():
            print(f"{name}: no model at {path}; skipped (train it with "
                  "benchmarks/learned_figures.py)")
            continue
        reward = "reward_model" if classifier_kind(load_config(str(path))) == "sequence" \
            else "implicit_reward"
        report = evaluate_reward_model(rewardkit.load(reward, model=str(path), device="cpu"),
                                       pairs, heuristics=False)
        out["models"][name] = {"reward": reward, "overall": report["overall"],
                               "kinds": report["subsets"]}
    header = "| mistake | " + " | ".join(out["models"]) + " | best trivial rule |"
    print(header)
    print("|---" * (len(out["models"]) + 2) + "|")
    for kind in (*KINDS, "overall"):
        cells = []
        for m in out["models"].values():
            b = m["overall"] if kind == "overall" else m["kinds"][kind]
            cells.append(f"{b['accuracy']:.3f} ({b['ci95'][0]:.3f}–{b['ci95'][1]:.3f})")
        r = {k: v for k, v in rules[kind].items() if isinstance(v, dict)}
        best = max(r, key=lambda k: r[k]["accuracy"])
        print(f"| {kind} | " + " | ".join(cells) + f" | {best} {r[best]['accuracy']:.3f} |")
    out["heuristics"] = {k: {r: v["accuracy"] for r, v in b.items() if isinstance(v, dict)}
                         for k, b in rules.items()}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
