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
import time
from pathlib import Path

from paired_training import compare  # benchmarks/, beside this script

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "learned"


def _config(workdir: str, steps: int, batch: int):  # noqa: ANN202
    from rewardkit.models.train_config import RewardTrainConfig

    return RewardTrainConfig(task="prm", model=str(DATA / "base"),
                             data=str(DATA / "prm_train.jsonl"), eval_fraction=0.0,
                             output_dir=workdir, steps=steps, batch_size=batch,
                             learning_rate=1e-4, lr_schedule="constant", progress=False,
                             tensorboard=False, plots=False, device="cpu", eval_every=0)


def run_rewardkit(steps: int, batch: int, warmup: int, workdir: str) -> float:
    from rewardkit.models.train import RewardTrainer

    trainer = RewardTrainer(_config(workdir, steps, batch))
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        trainer.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[warmup:])


def run_peer(steps: int, batch: int, warmup: int, workdir: str) -> float:
    import torch
    from datasets import Dataset
    from transformers import (AutoModelForTokenClassification, DataCollatorForTokenClassification,
                              Trainer, TrainerCallback, TrainingArguments)

    from rewardkit.models.train import RewardTrainer

    rows = RewardTrainer(_config(workdir, 1, batch)).train_examples  # the same token ids
    data = Dataset.from_list([{"input_ids": e.ids, "labels": e.labels} for e in rows])
    tok = __import__("transformers").AutoTokenizer.from_pretrained(DATA / "base")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForTokenClassification.from_pretrained(DATA / "base", num_labels=2)
    times: list[float] = []

    class Clock(TrainerCallback):
        """Time from one step's end to the next: the whole iteration, batch collation included
        (rewardkit's ``step()`` also builds its batch; on_step_begin fires after the fetch)."""

        last: float | None = None

        def on_step_end(self, *a, **k):  # noqa: ANN002, ANN003
            now = time.perf_counter()
            if self.last is not None:
                times.append(now - self.last)
            self.last = now

    args = TrainingArguments(output_dir=workdir, per_device_train_batch_size=batch,
                             max_steps=steps, learning_rate=1e-4, lr_scheduler_type="constant",
                             logging_steps=10**6, save_strategy="no", report_to=[], use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=data, callbacks=[Clock()],
            data_collator=DataCollatorForTokenClassification(tok)).train()
    return statistics.median(times[warmup:])


def main() -> None:
    compare(__doc__.splitlines()[0], "PRMTrainer-equivalent", run_peer, run_rewardkit, "PRM",
            "solutions")


if __name__ == "__main__":
    main()
