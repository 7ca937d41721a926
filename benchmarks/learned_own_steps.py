"""How far a model's own greedy worked solution gets, step by step, on the out-of-kind slices.

A bare answer (``"81+705+780="`` -> ``"1566"``) is read by ``verify: generate`` through the
model's own greedy solution (docs/learned.md): where that solution reaches the right sum the
pair is ranked right, where it does not the reading compares the path the model wrote, as
well as that path is close (``benchmarks/learned_bare_own_answer.py``). So how well the model
solves the slice bounds the bare reading, and a solution is a chain: every step right. This
prints, per model and slice, over the distinct prompts of the slice's bare pairs in
data/learned/rm_out_of_kind.jsonl:

* ``solved``: the share of solutions that are the right chain, step for step, to the right sum;
* ``step``: the share of steps written right where every step before it was right (the
  chance of the next step, conditional on a right start), with how many such steps were read;
* ``steps per problem``: the mean number of steps a right chain has on the slice, so that
  ``step ** steps`` is about ``solved`` when the steps fail independently (a share ``s`` of
  solved problems takes about ``s ** (1 / steps)`` a step).

    python benchmarks/learned_own_steps.py --model "1000 steps"=runs/L/whole1000/lm_base \\
        --model "2000 steps"=runs/L/whole2000/lm_base [--slices addends_100_999,steps_7_8]

Any causal LM trained on the task's worked solutions (a base, or a reward model trained from
one with the likelihood objective) can be read; one thread unless ``OMP_NUM_THREADS`` says
otherwise.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its siblings, when loaded by path
from learned_bare_own_answer import PAIRS, reader_arguments  # noqa: E402

from rewardkit.models import arithmetic  # noqa: E402
from rewardkit.models.data import read_pairs  # noqa: E402

STEP = re.compile(r"^\s*(\d+)\s*\+\s*(\d+)\s*=\s*(\d+)\s*$")


def chain(prompt: str) -> list[str]:
    """The right worked steps of ``prompt`` (every number in it an operand, in order), as the
    task writes them (:func:`rewardkit.models.arithmetic.solve`)."""
    return arithmetic.solve([int(x) for x in re.findall(r"\d+", prompt)])


def read_steps(prompt: str, solution: str) -> tuple[int, int, bool]:
    """Against the right chain of ``prompt``: how many steps of ``solution`` were read with
    every step before them right (a chain that stops early counts its first missing step as
    read and wrong), how many of those were right, and whether the whole solution is the right
    chain (no step missing, none added). A step is compared by its numbers, so spacing does
    not count against it."""
    right = [STEP.match(step).groups() for step in chain(prompt)]
    lines = [line for line in solution.strip().splitlines() if line.strip()]
    read = good = 0
    for i, want in enumerate(right):
        read += 1
        got = STEP.match(lines[i]) if i < len(lines) else None
        if got is None or tuple(int(x) for x in got.groups()) != tuple(map(int, want)):
            break
        good += 1
    return read, good, good == len(right) == len(lines)


def summarise(prompts: Sequence[str], solutions: Sequence[str]) -> dict[str, float]:
    """``solved``, ``step`` (with ``steps_read``) and ``steps_per_problem`` over one slice."""
    if len(prompts) != len(solutions):
        raise ValueError(f"{len(prompts)} prompts but {len(solutions)} solutions")
    if not prompts:
        raise ValueError("no prompts to read")
    read = good = solved = 0
    for prompt, solution in zip(prompts, solutions):
        r, g, s = read_steps(prompt, solution)
        read, good, solved = read + r, good + g, solved + s
    return {"n": len(prompts), "solved": solved / len(prompts),
            "step": good / read if read else 0.0, "steps_read": read,
            "steps_per_problem": sum(len(chain(p)) for p in prompts) / len(prompts)}


def slice_prompts(name: str) -> list[str]:
    """The distinct prompts of a slice's bare pairs, in file order."""
    prompts = list(dict.fromkeys(p.prompt for p in read_pairs(str(PAIRS))
                                 if p.subset == f"{name}/bare"))
    if not prompts:
        raise SystemExit(f"no bare pairs of slice {name!r} in {PAIRS}")
    return prompts


def read_model(model: str, slices: Sequence[str]) -> dict[str, dict[str, float]]:
    import rewardkit
    from rewardkit import Sample

    reward = rewardkit.load("implicit_reward", model=model, device="cpu", verify="generate",
                            num_solutions=1)
    out = {}
    for name in slices:
        prompts = slice_prompts(name)
        got = reward.solutions_for([Sample(p, "0") for p in prompts])
        out[name] = summarise(prompts, [g.texts[0] if g.texts else "" for g in got])
    return out


def main() -> None:
    parser = reader_arguments(__doc__, "NAME=DIR or DIR, a causal LM folder; repeat for each "
                                       "point")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    slices = args.slices
    print("| model | slice | solved | step (steps read) | steps per problem |")
    print("|---|---|---|---|---|")
    figures = {}
    for spec in args.model:
        name, _, folder = spec.rpartition("=")
        figures[name or folder] = read_model(folder, slices)
        for sl, f in figures[name or folder].items():
            print(f"| {name or folder} | {sl} | {f['solved']:.3f} | {f['step']:.3f} "
                  f"({f['steps_read']}) | {f['steps_per_problem']:.2f} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
