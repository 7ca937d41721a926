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
"""
from __future__ import annotations

import statistics

from paired_training import (DATA, compare, reward_config, step_clock,  # benchmarks/
                             time_reward_steps)


def run_rewardkit(steps: int, batch: int, warmup: int, workdir: str) -> float:
    return time_reward_steps("prm", steps, batch, warmup, workdir)


def run_peer(steps: int, batch: int, warmup: int, workdir: str) -> float:
    import torch
    from datasets import Dataset
    from transformers import (AutoModelForTokenClassification, DataCollatorForTokenClassification,
                              Trainer, TrainingArguments)

    from rewardkit.models.train import RewardTrainer

    rows = RewardTrainer(reward_config("prm", workdir, 1, batch)).train_examples  # same ids
    data = Dataset.from_list([{"input_ids": e.ids, "labels": e.labels} for e in rows])
    tok = __import__("transformers").AutoTokenizer.from_pretrained(DATA / "base")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForTokenClassification.from_pretrained(DATA / "base", num_labels=2)
    times: list[float] = []
    args = TrainingArguments(output_dir=workdir, per_device_train_batch_size=batch,
                             max_steps=steps, learning_rate=1e-4, lr_scheduler_type="constant",
                             logging_steps=10**6, save_strategy="no", report_to=[], use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=data, callbacks=[step_clock(times)],
            data_collator=DataCollatorForTokenClassification(tok)).train()
    return statistics.median(times[warmup:])


def main() -> None:
    compare(__doc__.splitlines()[0], "PRMTrainer-equivalent", run_peer, run_rewardkit, "PRM",
            "solutions")


if __name__ == "__main__":
    main()
