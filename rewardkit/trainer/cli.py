"""``rewardkit train grpo|ppo``: the command line of the built-in trainer.

A config file (``--config``, its ``train:`` section) sets every option; the flags here override
the common ones. Importing this module is cheap: torch and transformers load only when a run
starts.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from ..arguments import EXIT_INTERRUPTED, EXIT_NO_SIGNAL, exit_status, parse_key_value
from ..compose import ConfigError, read_config_file
from ..dataio import DataError
from ..runtime.health import NoLearningSignal
from .config import TrainConfig

# flag dest -> TrainConfig field, for the flags that override the config file
_OVERRIDES = {
    "model": "model", "data": "data", "eval_data": "eval_data", "steps": "steps",
    "output": "output_dir", "batch_size": "batch_size", "group_size": "group_size",
    "learning_rate": "learning_rate", "max_new_tokens": "max_new_tokens",
    "temperature": "temperature", "prompt_field": "prompt_field",
    "reference_field": "reference_field", "seed": "seed", "device": "device",
    "eval_every": "eval_every", "save_every": "save_every", "kl_coef": "kl_coef",
    "lora": "lora", "lora_r": "lora_r", "dtype": "dtype",
}


def _add_algorithm(sub: Any, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary, description=summary + " Every option can be set in "
                       "--config (its train: section); flags override it.")
    p.add_argument("--config", "-c", help="YAML/TOML/JSON file: train: options, and the reward "
                                          "in its reward: section")
    p.add_argument("--model", "-m", help="HF causal LM: local folder or hub id")
    p.add_argument("--data", "-d", help="training prompts: JSONL, JSON, CSV, Parquet, datasets "
                                        "folder, hf:NAME")
    p.add_argument("--eval-data", help="held-out prompts for periodic evaluation")
    reward = p.add_mutually_exclusive_group()
    reward.add_argument("--reward", "-r", help="registered reward name (see `rewardkit list`)")
    reward.add_argument("--reward-config", help="reward config file (a composition)")
    p.add_argument("--reward-option", "-O", action="append", default=[], type=parse_key_value,
                   metavar="KEY=VALUE", help="reward option (repeatable; values parse as YAML)")
    p.add_argument("--set", action="append", default=[], type=parse_key_value, metavar="KEY=VALUE",
                   help="any train option, e.g. --set clip_eps_high=0.28 (repeatable)")
    p.add_argument("--steps", type=int, help="RL steps")
    p.add_argument("--output", "-o", help="output folder (checkpoints, metrics, plots, final/)")
    p.add_argument("--resume", help="continue from a checkpoint folder or a run's output folder; "
                                    "alone, it restores the run's own options (model, LoRA, "
                                    "data, reward)")
    p.add_argument("--lora", action="store_true", default=None,
                   help="train a LoRA adapter instead of every weight (needs peft)")
    p.add_argument("--lora-r", type=int, help="LoRA rank (with --lora)")
    p.add_argument("--dtype", help="auto, float32, bfloat16, float16 (bf16/fp16: mixed precision "
                                   "with fp32 master weights)")
    p.add_argument("--batch-size", type=int, help="completions per step")
    p.add_argument("--group-size", type=int, help="completions per prompt")
    p.add_argument("--learning-rate", "--lr", type=float)
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--temperature", type=float)
    p.add_argument("--prompt-field", help="prompt column (string or chat messages)")
    p.add_argument("--reference-field", help="reference column passed to the reward")
    p.add_argument("--eval-every", type=int)
    p.add_argument("--save-every", type=int)
    p.add_argument("--kl-coef", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--device", help="auto, cpu, cuda, cuda:1")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=run_train, algorithm=name)


def add_train_parser(subparsers: Any, more: Sequence[Callable[[Any], None]] = ()
                     ) -> argparse.ArgumentParser:
    """Add ``train grpo|ppo`` to a ``rewardkit`` sub-command parser; each of ``more`` adds
    further ``train`` sub-commands (the models room's ``rm|prm``)."""
    p = subparsers.add_parser("train", help="train a policy with GRPO or PPO against a reward",
                              description="Built-in GRPO/PPO trainer; rewards come from the "
                                          "same names and configs as `rewardkit score`.")
    algos = p.add_subparsers(dest="algorithm", required=True, metavar="ALGORITHM")
    _add_algorithm(algos, "grpo", "Group-relative policy optimisation (critic-free).")
    _add_algorithm(algos, "ppo", "PPO with a value head and GAE.")
    for add in more:
        add(algos)
    return p


def config_from_args(args: argparse.Namespace) -> Any:
    """The TrainConfig a parsed command line describes (file first, then flags)."""
    overrides: dict[str, Any] = {field: getattr(args, dest, None)
                                 for dest, field in _OVERRIDES.items()}
    overrides["algorithm"] = args.algorithm
    if args.reward or args.reward_config:
        overrides["reward"] = args.reward or args.reward_config
    if args.reward_option:
        overrides["reward_options"] = dict(args.reward_option)
    if args.quiet:
        overrides["progress"] = False
    overrides.update(dict(args.set))
    saved: dict[str, Any] = {}
    if getattr(args, "resume", None):
        from .checkpoint import find_checkpoint, saved_config  # deferred: torch

        saved = saved_config(find_checkpoint(args.resume))
        # the run's own options come first; a config file or flags given now override them
        overrides = {**{k: v for k, v in saved.items()
                        if k in TrainConfig.__dataclass_fields__},
                     **{k: v for k, v in overrides.items() if v is not None}}
    if args.config:
        return TrainConfig.from_file(args.config, **overrides) if not saved else \
            TrainConfig.from_dict({**_file_section(args.config), **overrides})
    return TrainConfig.from_dict({k: v for k, v in overrides.items() if v is not None})


def _file_section(path: str) -> dict[str, Any]:
    return {k: v for k, v in TrainConfig.from_file(path).to_dict().items()
            if k in _explicit_keys(path)}


def _explicit_keys(path: str) -> set[str]:
    """Options a config file sets itself (its ``train:`` keys and a top-level reward)."""
    data = read_config_file(Path(path))
    keys = set(data.get("train", {}) or {})
    if "reward" in data:
        keys.add("reward")
    return keys


def run_train(args: argparse.Namespace) -> int:
    """Entry point of ``rewardkit train``; returns the exit status."""
    try:
        cfg = config_from_args(args)
        cfg.validate()
        from .loop import Trainer  # deferred: torch and transformers

        trainer = Trainer(cfg, resume=args.resume)
    except (ConfigError, DataError) as exc:
        print(f"rewardkit train: {exc}", file=sys.stderr)
        return exit_status(exc)
    try:
        final = trainer.train()
    except NoLearningSignal as exc:
        if trainer.dist.is_main:
            print(f"rewardkit train: {exc}", file=sys.stderr)
        return EXIT_NO_SIGNAL
    except KeyboardInterrupt:
        if trainer.interrupt_checkpoint is not None:
            print(f"\ninterrupted after step {trainer.step_count}; checkpoint saved in "
                  f"{trainer.interrupt_checkpoint}. Continue with --resume {cfg.output_dir}",
                  file=sys.stderr)
        else:
            print("\ninterrupted during an update: no checkpoint of that step was written; "
                  f"--resume {cfg.output_dir} continues from the last periodic checkpoint, if "
                  "any (set save_every to write them)", file=sys.stderr)
        return EXIT_INTERRUPTED
    if not trainer.dist.is_main:  # one summary per job, not one per process
        return 0
    if final:
        print(" ".join(f"{k}={v:.4g}" for k, v in sorted(final.items())
                       if isinstance(v, (int, float))))
    print(f"final model: {cfg.output_dir}/final")
    return 0
