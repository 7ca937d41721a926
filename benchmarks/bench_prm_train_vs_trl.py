"""rewardkit's `train prm` step vs the PRMTrainer step on identical work, in one run.

TRL's PRMTrainer (TRL < 1.0; the installed TRL no longer ships it) is a ``transformers.Trainer``
over rows it tokenises one way: prompt, then every step followed by ``step_separator``, the
step's label on the separator's last token and -100 elsewhere, padded by
``DataCollatorForTokenClassification``, cross-entropy over the two classes. The peer here is
exactly that: ``transformers.Trainer`` + ``DataCollatorForTokenClassification`` on the token
ids and labels rewardkit builds (identical tokens, labels, model, batch, learning rate; fp32 on
CPU). Runs alternate (peer, rewardkit) / (rewardkit, peer); time per optimizer step is the
median after ``--warmup`` steps.

    python benchmarks/bench_prm_train_vs_trl.py [--pairs 3] [--steps 30] [--batch-size 16]
    python benchmarks/bench_prm_train_vs_trl.py --device cuda --hidden 1024 --layers 12 \
        --batch-size 64     # on a GPU, bf16 autocast on both sides, a model worth timing
"""
from __future__ import annotations

import statistics
import tempfile

from paired_training import (Setting, Timing, compare, reward_config,  # benchmarks/
                             step_clock, time_reward_steps)

from rewardkit.models.train import RewardTrainer


def run_rewardkit(setting: Setting) -> Timing:
    return time_reward_steps("prm", setting)


def run_peer(setting: Setting) -> Timing:
    import torch
    from datasets import Dataset
    from transformers import (AutoModelForTokenClassification, AutoTokenizer,
                              DataCollatorForTokenClassification, Trainer, TrainingArguments)

    rows = RewardTrainer(reward_config("prm", setting, steps=1)).train_examples  # same ids
    data = Dataset.from_list([{"input_ids": e.ids, "labels": e.labels} for e in rows])
    tok = AutoTokenizer.from_pretrained(setting.base)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForTokenClassification.from_pretrained(setting.base, num_labels=2)
    times: list[float] = []
    args = TrainingArguments(output_dir=setting.workdir, per_device_train_batch_size=setting.batch,
                             max_steps=setting.steps, learning_rate=1e-4,
                             lr_scheduler_type="constant", logging_steps=10**6,
                             save_strategy="no", report_to=[], use_cpu=setting.device == "cpu",
                             bf16=setting.bf16, dataloader_num_workers=0, disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=data,
            callbacks=[step_clock(times, setting.device)],
            data_collator=DataCollatorForTokenClassification(tok)).train()
    return Timing(statistics.median(times[setting.warmup:]))


def tokens_per_solution(base) -> float:
    """Mean real tokens of one solution as both sides read it (rewardkit's encoding)."""
    with tempfile.TemporaryDirectory() as workdir:
        setting = Setting(1, 1, 0, workdir, base, "cpu")
        rows = RewardTrainer(reward_config("prm", setting, steps=1)).train_examples
    return statistics.mean(len(e.ids) for e in rows)


def main() -> None:
    compare(__doc__.splitlines()[0], "PRMTrainer-equivalent", run_peer, run_rewardkit, "PRM",
            "solutions", tokens_per_solution)


if __name__ == "__main__":
    main()
