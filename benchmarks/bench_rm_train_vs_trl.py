"""rewardkit's `train rm` step vs TRL's RewardTrainer step on identical work, in one run.

Same model (the arithmetic base, data/learned/base, with a fresh one-output head seeded the
same), the same preference pairs (data/learned/rm_train.jsonl, plain strings: both build
``prompt + completion + EOS``), batch size, learning rate, fp32 on CPU, gradient
checkpointing off on both sides (TRL's RewardConfig turns it on by default, which recomputes
activations and is not what rewardkit does). Each pair of runs is
(TRL, rewardkit) or (rewardkit, TRL), alternating; each run trains ``--steps`` steps and the
time per optimizer step is the median after ``--warmup`` steps. Prints every pair, and the
ratio of the medians.

    python benchmarks/bench_rm_train_vs_trl.py [--pairs 3] [--steps 30] [--batch-size 16]
    python benchmarks/bench_rm_train_vs_trl.py --device cuda --hidden 1024 --layers 12 \
        --batch-size 64     # on a GPU, bf16 autocast on both sides, a model worth timing

Needs the ``trl`` extra. Timings on a shared machine are noisy: compare ratios from one run.
"""
from __future__ import annotations

import json
import statistics

from paired_training import (DATA, Setting, Timing, compare, step_clock,  # benchmarks/
                             time_reward_steps)


def run_rewardkit(setting: Setting) -> Timing:
    return time_reward_steps("rm", setting)


def run_trl(setting: Setting) -> Timing:
    import torch
    from datasets import load_dataset
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    tok = AutoTokenizer.from_pretrained(setting.base)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_pretrained(setting.base, num_labels=1)
    model.config.pad_token_id = tok.pad_token_id
    data = load_dataset("json", data_files=str(setting.data / "rm_train.jsonl"), split="train")
    data = data.select_columns(["prompt", "chosen", "rejected"])
    times: list[float] = []
    args = RewardConfig(output_dir=setting.workdir, per_device_train_batch_size=setting.batch,
                        max_steps=setting.steps, learning_rate=1e-4,
                        lr_scheduler_type="constant", logging_steps=10**6, save_strategy="no",
                        report_to=[], use_cpu=setting.device == "cpu", bf16=setting.bf16,
                        dataloader_num_workers=0, max_length=1024, disable_tqdm=True,
                        center_rewards_coefficient=None, gradient_checkpointing=False)
    trainer = RewardTrainer(model=model, args=args, train_dataset=data, processing_class=tok,
                            callbacks=[step_clock(times, setting.device)])
    trainer.train()
    return Timing(statistics.median(times[setting.warmup:]))


def tokens_per_pair(base) -> float:
    """Mean real tokens of one pair (chosen and rejected, EOS included) as both sides read it."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    rows = [json.loads(line) for line in open(DATA / "rm_train.jsonl")][:2000]
    return statistics.mean(len(tok(r["prompt"] + r[side] + tok.eos_token).input_ids)
                           for r in rows for side in ("chosen", "rejected")) * 2


def main() -> None:
    compare(__doc__.splitlines()[0], "TRL RewardTrainer", run_trl, run_rewardkit, "RM",
            "pairs", tokens_per_pair)


if __name__ == "__main__":
    main()
