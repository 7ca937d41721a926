"""rewardkit's GRPO trainer vs TRL's GRPOTrainer on identical work, in one run.

Same tiny policy (data/arithmetic/policy), prompts, reward (the `math` verifier, gsm8k preset;
TRL gets it through ``rewardkit.to_trl``), completions per step, group size, completion length,
learning rate, clipping (0.2 / 0.28), token-mean loss, group std scaling, no KL, and steps.
Each trainer runs in its own process so peak memory is its own. Prints wall time per step
(median after warm-up), peak resident memory, the reward curve of both (mean of the first and
last steps), held-out accuracy of both final policies measured by the same evaluator, and the
ratios.

    python benchmarks/bench_trainer_vs_trl.py [--steps 60] [--batch-size 64] [--json out.json]

Needs the ``trl`` extra. Timings on a shared machine are noisy: compare ratios from one run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "arithmetic"


def _held_out(model_dir: str, prompts: int, seed: int, max_new_tokens: int) -> dict[str, float]:
    import torch

    import rewardkit
    from rewardkit.trainer.data import load_prompts
    from rewardkit.trainer.evaluation import evaluate
    from rewardkit.trainer.generation import GenerationOptions
    from rewardkit.trainer.policy import load_tokenizer
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    tok = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    items = load_prompts(str(DATA / "test.jsonl"), tok)[:prompts]
    return evaluate(model, tok, items, rewardkit.load("math", preset="gsm8k"),
                    GenerationOptions(max_new_tokens=max_new_tokens), torch.device("cpu"),
                    samples=4)


def run_rewardkit(args: argparse.Namespace, out: Path) -> dict:
    from rewardkit.trainer.arithmetic import task_config
    from rewardkit.trainer.loop import Trainer

    cfg = task_config(out, model=args.model, reward="math", reward_options={"preset": "gsm8k"}, steps=args.steps,
                      batch_size=args.batch_size, group_size=args.group_size,
                      max_new_tokens=args.max_new_tokens, learning_rate=args.lr,
                      clip_eps_low=0.2, clip_eps_high=0.28, loss_aggregation="token_mean",
                      std_scale="group", seed=args.seed)
    trainer = Trainer(cfg)
    times, rewards = [], []
    for _ in range(args.steps):
        start = time.perf_counter()
        metrics = trainer.step()
        times.append(time.perf_counter() - start)
        rewards.append(metrics["reward/mean"])
    trainer.policy.model.save_pretrained(out / "final")
    trainer.policy.tokenizer.save_pretrained(out / "final")
    return {"times": times, "rewards": rewards, "model": str(out / "final")}


def run_trl(args: argparse.Namespace, out: Path) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    import rewardkit
    from rewardkit.trainer.policy import load_tokenizer

    rows = [json.loads(line) for line in open(DATA / "train.jsonl", encoding="utf-8")]
    dataset = Dataset.from_list(rows)
    config = GRPOConfig(
        output_dir=str(out), use_cpu=True, bf16=False, max_steps=args.steps,
        per_device_train_batch_size=args.batch_size, num_generations=args.group_size,
        steps_per_generation=1, gradient_accumulation_steps=1, num_iterations=1,
        max_completion_length=args.max_new_tokens, temperature=1.0, top_p=1.0, top_k=0,
        learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0, max_grad_norm=1.0,
        epsilon=0.2, epsilon_high=0.28, loss_type="dapo", scale_rewards="group", beta=0.0,
        logging_steps=1, save_strategy="no", report_to="none", seed=args.seed,
        disable_dropout=True,
    )
    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):  # noqa: ANN002, ANN003
            self.start = time.perf_counter()

        def on_step_end(self, *a, **k):  # noqa: ANN002, ANN003
            times.append(time.perf_counter() - self.start)

    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(args.model),
        processing_class=load_tokenizer(args.model),
        reward_funcs=[rewardkit.to_trl("math", reference_column="answer", preset="gsm8k")],
        args=config, train_dataset=dataset, callbacks=[Clock()])
    trainer.train()
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    trainer.save_model(str(out / "final"))
    return {"times": times, "rewards": rewards, "model": str(out / "final")}


def child(args: argparse.Namespace) -> None:
    out = Path(args.workdir) / args.child
    result = (run_trl if args.child == "trl" else run_rewardkit)(args, out)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["held_out"] = _held_out(result["model"], args.eval_prompts, args.seed,
                                   args.max_new_tokens)
    print("RESULT " + json.dumps(result))


def _summary(result: dict, warmup: int) -> dict:
    times = result["times"][warmup:] or result["times"]
    rewards = result["rewards"]
    k = max(1, len(rewards) // 5)
    return {"step_s": statistics.median(times), "peak_rss_mb": result["peak_rss_mb"],
            "reward_first": sum(rewards[:k]) / k, "reward_last": sum(rewards[-k:]) / k,
            "held_out_pass@1": result["held_out"]["eval/pass@1"],
            "held_out_greedy": result["held_out"]["eval/greedy"]}


def _launch(name: str, args: argparse.Namespace, workdir: str, seed: int) -> dict:
    cmd = [sys.executable, __file__, "--child", name, "--workdir", workdir, f"--seed={seed}",
           *[f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
             if k not in ("child", "workdir", "json", "repeats", "seed") and v is not None]]
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        sys.exit(f"{name} run failed:\n{proc.stderr[-4000:]}")
    return json.loads(line[-1][len("RESULT "):])


def _best(results: list[dict], warmup: int) -> dict:
    """Fastest median step time over the repeats (the least disturbed by other load); the other
    figures averaged."""
    summaries = [_summary(r, warmup) for r in results]
    out = {k: sum(s[k] for s in summaries) / len(summaries) for k in summaries[0]}
    out["step_s"] = min(s["step_s"] for s in summaries)
    out["peak_rss_mb"] = max(s["peak_rss_mb"] for s in summaries)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--model", default=str(DATA / "policy"),
                        help="policy for both (default: the warm-started arithmetic policy); "
                             "any local causal LM works, e.g. a larger random one for speed")
    parser.add_argument("--batch-size", type=int, default=64, help="completions per step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=6)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-prompts", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=3, help="steps left out of the timing")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each, alternating, with seeds seed, seed+1, ...")
    parser.add_argument("--json", help="also write all figures and curves here")
    parser.add_argument("--child", choices=["trl", "rewardkit"], help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    workdir = tempfile.mkdtemp(prefix="bench_trainer_")
    runs: dict[str, list[dict]] = {"trl": [], "rewardkit": []}
    order = ["trl", "rewardkit"]
    for repeat in range(args.repeats):  # alternate the order so both see the same noise
        for name in order if repeat % 2 == 0 else order[::-1]:
            runs[name].append(_launch(name, args, f"{workdir}/{repeat}", args.seed + repeat))
    results = {n: r[0] for n, r in runs.items()}
    trl, ours = (_best(runs[n], args.warmup) for n in ("trl", "rewardkit"))
    print(f"model {args.model}")
    print(f"GRPO, {args.steps} steps x {args.batch_size} completions (group {args.group_size}, "
          f"<= {args.max_new_tokens} new tokens), CPU, torch threads {_threads()}, best of "
          f"{args.repeats} alternating runs (time), mean over their seeds (rewards, accuracy)")
    print(f"{'':22}{'TRL':>12}{'rewardkit':>12}{'ratio rk/TRL':>14}")
    for key, label in (("step_s", "time per step (s)"), ("peak_rss_mb", "peak RSS (MB)"),
                       ("reward_first", "reward, first 20%"), ("reward_last", "reward, last 20%"),
                       ("held_out_pass@1", "held-out pass@1"),
                       ("held_out_greedy", "held-out greedy acc")):
        ratio = ours[key] / trl[key] if trl[key] else float("nan")
        print(f"{label:22}{trl[key]:12.4g}{ours[key]:12.4g}{ratio:14.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "summary": {
            "trl": trl, "rewardkit": ours}, "curves": {n: {"rewards": r["rewards"],
                                                           "times": r["times"]}
                                                       for n, r in results.items()}}, indent=1))


def _threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    main()
