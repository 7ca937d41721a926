"""Rebuild the learned-reward data from the arithmetic task (seconds; the LM base minutes).

    python data/learned/build.py [--out data/learned] [--seed 0] [--no-base]

Writes, with no problem shared between any two files (each file draws its own problems):
  rm_train.jsonl / rm_test.jsonl      preference pairs (TRL format + ``subset``), in distribution
  prm_train.jsonl / prm_test.jsonl    stepwise solutions (TRL format + ProcessBench ``label``)
  rm_slices.jsonl / prm_slices.jsonl  held-out slices, ``subset`` = the slice's name (more steps,
                                      larger operands, an unseen template, one digit position,
                                      one direction; rewardkit.models.arithmetic.SLICES)
  rm_out_of_kind.jsonl                slices in the broad base's range with mistakes the reward
  prm_out_of_kind.jsonl               data never made, and slices out of its range in kind
                                      (first numbers 500-4999, 7-8 steps, 3-digit addends,
                                      spaced format); pairs in both forms, bare answer and
                                      worked (``subset`` NAME/bare, NAME/worked); drawn last,
                                      sharing no problem with any file or either base
                                      (rewardkit.models.arithmetic_out_of_kind.SLICES)
  base/                               the arithmetic policy with "\\n", "<step>" and the template
                                      words in its tokenizer, to start reward models from
  lm_base/                            base/ trained further as a language model on right worked
                                      solutions of other problems (--lm-steps; ~13 CPU minutes),
                                      for the ``implicit_reward`` (its own log-likelihood); with
                                      OMP_NUM_THREADS=1 the shipped one rebuilds byte for byte
                                      (another thread count may change the last bits)
  lm_replay.jsonl                     with --replay-rows N: the first N of the problems lm_base/
                                      learned from, as prompt-completion rows (``train rm``'s
                                      ``replay_data``; written with --no-base too, in seconds)
See rewardkit/models/arithmetic.py for how solutions and slips are made and why.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from rewardkit.models import arithmetic, arithmetic_out_of_kind
from rewardkit.testing.arithmetic import write_jsonl


def build_lm_base(out: Path, base: Path, problems: list[arithmetic.Problem], steps: int,
                  seed: int, spec: str) -> None:
    """``base`` trained as a causal LM on the right worked solutions of ``problems`` (loss on
    the solution, not the prompt), saved with a ``rewardkit.json`` that names its step
    separator."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rewardkit.models.loading import write_sidecar
    from rewardkit.testing.arithmetic import warm_start

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base)
    rows = [{"prompt": pb.prompt, "answer": arithmetic.worked_solution(pb)}
            for pb in problems]
    losses = warm_start(model, tokenizer, rows, steps, batch_size=128, lr=2e-3, seed=seed,
                        noisy=False, progress=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_sidecar(out, {"kind": "causal_lm", "separator": "\n",
                        "trained_on": f"{len(rows)} right worked solutions ({spec} problems), "
                                      f"{steps} steps of 128, final loss {losses[-1]:.4f}"})


def replay_rows(problems: list[arithmetic.Problem]) -> list[dict[str, str]]:
    """Problems a base learned from with their right worked solutions, as the prompt-completion
    rows ``train rm``'s ``replay_data`` reads."""
    return [{"prompt": pb.prompt, "completion": arithmetic.worked_solution(pb)}
            for pb in problems]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=10000, help="training rows per task")
    parser.add_argument("--test", type=int, default=400, help="rows per held-out slice")
    parser.add_argument("--no-base", action="store_true",
                        help="keep the existing base/ and lm_base/")
    parser.add_argument("--lm-problems", type=int, default=256000,
                        help="right worked solutions lm_base/ is trained on")
    parser.add_argument("--lm-steps", type=int, default=2000,
                        help="training steps of lm_base/ (128 solutions each)")
    parser.add_argument("--replay-rows", type=int, default=0,
                        help="also write lm_replay.jsonl: the first N problems lm_base/ learned "
                             "from, with their right worked solutions (0: none)")
    parser.add_argument("--out-of-kind", type=int, default=150,
                        help="pairs per out-of-kind slice and form, and stepwise rows per slice")
    parser.add_argument("--lm-spec", choices=sorted(arithmetic.LM_SPECS), default="train",
                        help="which problems lm_base/ learns from (rewardkit.models.arithmetic."
                             "LM_SPECS): train (default, the reward data's distribution; every "
                             "slice stays held out) or broad (the slices' distributions too, "
                             "never their problems)")
    args = parser.parse_args()
    seen: set[str] = set()
    s, n = args.seed, args.test

    def stream(spec: arithmetic.Spec, seed: int):
        return arithmetic.problem_stream(spec, seed, seen)

    train = arithmetic.TRAIN
    rm_test = arithmetic.preference_rows(stream(train, s + 1), s + 4, n=n)
    prm_test = arithmetic.stepwise_rows(stream(train, s + 7), s + 6, n=n)
    rm_rows = [{**r, "subset": "in_distribution"} for r in rm_test]
    prm_rows = [{**r, "subset": "in_distribution"} for r in prm_test]
    slices = [name for name in arithmetic.SLICES if name != "in_distribution"]
    for i, name in enumerate(slices):
        spec = arithmetic.SLICES[name]
        rm_rows += arithmetic.preference_rows(stream(spec, s + 10 + i), s + 100 + i, spec, name,
                                              n=n)
        prm_rows += arithmetic.stepwise_rows(stream(spec, s + 30 + i), s + 200 + i, spec, name,
                                             n=n)
    # training problems last: none of them is a held-out problem
    write_jsonl(arithmetic.preference_rows(stream(train, s + 2), s + 3, n=args.train),
                args.out / "rm_train.jsonl")
    write_jsonl(arithmetic.stepwise_rows(stream(train, s + 8), s + 5, n=args.train),
                args.out / "prm_train.jsonl")
    write_jsonl(rm_test, args.out / "rm_test.jsonl")
    write_jsonl(prm_test, args.out / "prm_test.jsonl")
    write_jsonl(rm_rows, args.out / "rm_slices.jsonl")
    write_jsonl(prm_rows, args.out / "prm_slices.jsonl")
    # drawn after every other file's problems, so it shares none of them
    before_lm = set(seen)
    lm_problems = arithmetic.make_problems(args.lm_problems, arithmetic.LM_SPECS[args.lm_spec],
                                           s + 50, seen)
    # out-of-kind slices last, sharing no problem with either base (whichever --lm-spec built
    # this one), so the files are the same for both
    taken = set(seen)
    for spec in arithmetic.LM_SPECS.values():
        learned = set(before_lm)
        arithmetic.make_problems(args.lm_problems, spec, s + 50, learned)
        taken |= learned
    ook_rm, ook_prm = [], []
    for i, name in enumerate(arithmetic_out_of_kind.SLICES):
        ook_rm += arithmetic_out_of_kind.preference_rows(name, args.out_of_kind, s + 300 + 10 * i,
                                                         taken)
        ook_prm += arithmetic_out_of_kind.stepwise_rows(name, args.out_of_kind,
                                                        s + 305 + 10 * i, taken)
    write_jsonl(ook_rm, args.out / "rm_out_of_kind.jsonl")
    write_jsonl(ook_prm, args.out / "prm_out_of_kind.jsonl")
    if args.replay_rows:
        write_jsonl(replay_rows(lm_problems[:args.replay_rows]), args.out / "lm_replay.jsonl")
    if not args.no_base:
        arithmetic.make_base(args.out / "base")
        build_lm_base(args.out / "lm_base", args.out / "base", lm_problems, args.lm_steps, s,
                      args.lm_spec)
    print(f"wrote {args.train} training rows per task, {n} held-out in distribution and "
          f"{len(slices)} held-out slices of {n} to {args.out}")


if __name__ == "__main__":
    main()
