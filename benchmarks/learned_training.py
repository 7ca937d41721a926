"""Training runs behind the learned-reward figures (benchmarks/learned_figures.py): ``train
rm|prm`` with a recipe of data/learned, and the peers with the same settings — TRL's
RewardTrainer for the Bradley–Terry runs, TRL's SFTTrainer for the likelihood runs. A run whose
``final/`` exists is kept, not retrained; its training time is kept beside it.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "learned"


def recipe(name: str = "recipe.yaml") -> dict[str, Any]:
    from rewardkit.compose import read_config_file

    return dict(read_config_file(DATA / name)["train"])


def runnable(options: dict[str, Any]) -> dict[str, Any]:
    """A recipe's options with a relative ``replay_data`` read from the repository's root,
    where the recipes' commands run."""
    if options.get("replay_data"):
        return {**options, "replay_data": str(ROOT / options["replay_data"])}
    return options


LIKELIHOOD_RECIPE = "recipe_likelihood.yaml"
"""``train rm`` with ``objective: likelihood`` (the base learns the chosen completions)."""


SETTINGS: dict[str, Any] = {"train_data": DATA, "batch_size": None, "device": "cpu"}
"""What the command line changes from the recipe for every run: the folder the training rows
are read from (the held-out files are always data/learned's), the batch size and the device."""


def train_rewardkit(task: str, seed: int, out: Path, steps: int | None,
                    recipe_file: str = "recipe.yaml", base: Path = DATA / "base"
                    ) -> tuple[Path, float]:
    from rewardkit.models.train import train_reward_model
    from rewardkit.models.train_config import RewardTrainConfig

    final = out / "final"
    if (final / "config.json").is_file():
        return final, _seconds(out)
    options = {**runnable(recipe(recipe_file)), "task": task, "seed": seed, "output_dir": str(out),
               "model": str(base),
               "data": str(SETTINGS["train_data"] / f"{task}_train.jsonl"),
               "eval_data": str(DATA / f"{task}_test.jsonl"), "device": SETTINGS["device"],
               "progress": False, "tensorboard": False, "plots": False, "eval_every": 0}
    if steps:
        options["steps"] = steps
    if SETTINGS["batch_size"]:
        options["batch_size"] = SETTINGS["batch_size"]
    start = time.perf_counter()
    train_reward_model(RewardTrainConfig(**options))
    return final, _seconds(out, time.perf_counter() - start)


def _seconds(out: Path, seconds: float | None = None) -> float:
    """Record a run's training time beside it (``seconds`` given), or read it back (NaN when
    the run was made without it), so a run trained by an earlier call keeps its time."""
    path = out / "train_seconds.txt"
    if seconds is not None:
        path.write_text(f"{seconds}\n")
        return seconds
    return float(path.read_text()) if path.is_file() else float("nan")


def train_trl(seed: int, out: Path, steps: int | None) -> tuple[Path, float]:
    """TRL's RewardTrainer with the recipe's settings, written where ``reward_model`` reads it."""
    final = out / "final"
    if (final / "config.json").is_file():
        return final, _seconds(out)
    import torch
    from datasets import load_dataset
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    r = recipe()
    tok = AutoTokenizer.from_pretrained(DATA / "base")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the head, seeded as train rm seeds it
        model = AutoModelForSequenceClassification.from_pretrained(DATA / "base", num_labels=1)
    model.config.pad_token_id = tok.pad_token_id
    data = load_dataset("json", data_files=str(SETTINGS["train_data"] / "rm_train.jsonl"),
                        split="train")
    data = data.select_columns(["prompt", "chosen", "rejected"])
    gpu = SETTINGS["device"] != "cpu"  # bf16 autocast there, as train rm's dtype auto
    schedule = r.get("lr_schedule", "linear")
    args = RewardConfig(
        output_dir=str(out), per_device_train_batch_size=SETTINGS["batch_size"] or r["batch_size"],
        max_steps=steps or r["steps"], learning_rate=r["learning_rate"],
        lr_scheduler_type="constant_with_warmup" if schedule == "constant" else schedule,
        warmup_steps=r.get("warmup_steps", 0), weight_decay=r.get("weight_decay", 0.0),
        max_grad_norm=r.get("max_grad_norm", 1.0), gradient_checkpointing=False, seed=seed,
        logging_steps=10**6, save_strategy="no", report_to=[], use_cpu=not gpu, bf16=gpu,
        dataloader_num_workers=0, max_length=r.get("max_length", 1024), disable_tqdm=True,
        center_rewards_coefficient=None)
    trainer = RewardTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    return final, _train_and_save(trainer, tok, final, out)


def _train_and_save(trainer: Any, tok: Any, final: Path, out: Path) -> float:
    """Train a TRL trainer, save its model and tokenizer in ``final``; the recorded time."""
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    trainer.save_model(str(final))
    tok.save_pretrained(str(final))
    return _seconds(out, seconds)


def train_trl_sft(seed: int, out: Path, recipe_file: str = LIKELIHOOD_RECIPE,
                  base: Path = DATA / "base") -> tuple[Path, float]:
    """TRL's SFTTrainer on the chosen sides with a likelihood recipe's settings (loss on the
    completion only, EOS appended, no packing): the peer of ``train rm`` with ``objective:
    likelihood``; read by ``implicit_reward`` like it."""
    final = out / "final"
    if (final / "config.json").is_file():
        return final, _seconds(out)
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from rewardkit.models.loading import write_sidecar

    r = runnable(recipe(recipe_file))
    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base)
    data = load_dataset("json", data_files=str(SETTINGS["train_data"] / "rm_train.jsonl"),
                        split="train")
    data = data.rename_column("chosen", "completion").select_columns(["prompt", "completion"])
    if r.get("replay_data"):  # the same share of replayed rows, drawn as datasets mixes sets
        from datasets import interleave_datasets

        share = r.get("replay_fraction", 0.5)
        replay = load_dataset("json", data_files=r["replay_data"], split="train")
        data = interleave_datasets([data, replay.select_columns(["prompt", "completion"])],
                                   probabilities=[1 - share, share], seed=seed,
                                   stopping_strategy="all_exhausted")
    gpu = SETTINGS["device"] != "cpu"
    args = SFTConfig(
        output_dir=str(out), per_device_train_batch_size=r["batch_size"],
        max_steps=r["steps"], learning_rate=r["learning_rate"],
        lr_scheduler_type=r.get("lr_schedule", "linear"), warmup_steps=r.get("warmup_steps", 0),
        weight_decay=r.get("weight_decay", 0.0), max_grad_norm=r.get("max_grad_norm", 1.0),
        gradient_checkpointing=False, seed=seed, logging_steps=10**6, save_strategy="no",
        report_to=[], use_cpu=not gpu, bf16=gpu, dataloader_num_workers=0,
        max_length=r.get("max_length", 1024), disable_tqdm=True, completion_only_loss=True,
        packing=False)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    seconds = _train_and_save(trainer, tok, final, out)
    write_sidecar(final, {"separator": "\n", "trained_by": "TRL SFTTrainer"})
    return final, seconds
