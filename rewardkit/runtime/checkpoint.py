"""Resumable checkpoints shared by every training job (the policy trainer and reward-model
training): model (or LoRA adapter) files, a state file (optimizer, scheduler, sampler, every
RNG, the step), the run's options, so ``--resume`` continues as if never stopped.

Layout: ``<output>/checkpoints/step-<N>/`` holding ``save_pretrained`` files and
``trainer_state.pt``. The final model goes to ``<output>/final/`` and loads with
``from_pretrained`` (for LoRA: the merged model there, the adapter in ``final/adapter``).
"""
from __future__ import annotations

import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..compose import ConfigError
from ..dataio import json_shape
from ..diagnostics import config_changes, describe_changes
from .device import dtype_kwarg

STATE_FILE = "trainer_state.pt"
CONFIG_FILE = "train_config.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(directory: Path, model: Any, tokenizer: Any, state: dict[str, Any],
                    keep: int | None = 2, model_state: dict[str, Any] | None = None) -> Path:
    """Write a checkpoint atomically (to a temporary folder, then renamed) and keep only the
    ``keep`` most recent ones. ``model_state``: the full weights when the model itself holds
    only a shard (FSDP)."""
    directory = Path(directory)
    tmp = directory.with_name(directory.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, **({"state_dict": model_state} if model_state else {}))
    tokenizer.save_pretrained(tmp)
    torch.save({**state, "rng": rng_state()}, tmp / STATE_FILE)
    if state.get("config") is not None:  # readable without loading the optimizer state
        import json

        (tmp / CONFIG_FILE).write_text(json.dumps(state["config"], indent=1, default=str))
    if directory.exists():
        shutil.rmtree(directory)
    tmp.rename(directory)
    if keep:
        for old in list_checkpoints(directory.parent)[:-keep]:
            shutil.rmtree(old)
    return directory


def list_checkpoints(parent: Path) -> list[Path]:
    """Checkpoint folders under ``parent``, oldest first."""
    if not Path(parent).is_dir():
        return []
    found = [(int(m.group(1)), p) for p in Path(parent).iterdir()
             if p.is_dir() and (m := _STEP_DIR.match(p.name)) and (p / STATE_FILE).exists()]
    return [p for _, p in sorted(found)]


def find_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder from ``--resume PATH``: the folder itself, or the latest checkpoint in
    ``PATH/checkpoints`` (a run's output folder)."""
    path = Path(path)
    if (path / STATE_FILE).exists():
        return path
    for parent in (path / "checkpoints", path):
        found = list_checkpoints(parent)
        if found:
            return found[-1]
    raise ConfigError(f"--resume {str(path)!r}: no checkpoint there (expected {STATE_FILE} in it "
                      "or in checkpoints/step-N/ below it)")


def load_state(checkpoint: Path) -> dict[str, Any]:
    return torch.load(Path(checkpoint) / STATE_FILE, weights_only=False)


def saved_config(checkpoint: Path) -> dict[str, Any]:
    """The options the checkpointed run was started with (``--resume DIR`` alone restores
    them): from ``train_config.json``, or from the state file of older checkpoints."""
    path = Path(checkpoint) / CONFIG_FILE
    if path.exists():
        import json

        return json.loads(path.read_text())
    config = load_state(checkpoint).get("config")
    if not config:
        raise ConfigError(f"--resume {str(checkpoint)!r}: the checkpoint records no options; "
                          "pass --config or --model/--data/--reward as the run was started")
    return dict(config)


RESUMABLE_CHANGES = frozenset({
    "steps", "output_dir", "progress", "tensorboard", "plots", "log_every", "save_every",
    "eval_every", "eval_data", "eval_samples", "eval_k", "eval_max_prompts", "eval_threshold",
    "eval_temperature", "gold_reward", "device", "max_tokens_per_forward",
    "logprob_chunk_tokens", "generation_batch_size", "stop_without_signal",
    "stop_on_overoptimisation", "measure_kl",
    "generation_backend", "vllm_gpu_memory_utilization",
})
"""Options a resumed run may change: how long it runs, where and how often it logs, saves and
evaluates. Any other change would make the continued run differ from the one checkpointed."""


def check_resume_config(saved: dict[str, Any] | None, current: dict[str, Any],
                        checkpoint: Path) -> None:
    """Refuse to resume with options that change the training itself (batch shape, reward,
    algorithm, learning rate, ...), naming each difference."""
    if not saved:
        return
    changed = [key for key in sorted(current) if key not in RESUMABLE_CHANGES
               and key in saved and json_shape(saved[key]) != json_shape(current[key])]
    if changed:
        # nested options (a composition's reward section) are named key by key
        diffs = describe_changes([c for k in changed
                                  for c in config_changes(json_shape(saved[k]),
                                                          json_shape(current[k]), k)],
                                 "in the checkpoint", "now")
        raise ConfigError(
            f"--resume {str(checkpoint)!r}: the run was started with other options ({diffs}). "
            "Resume with the same options (only steps, output, logging, saving and evaluation "
            "options may change), or start a new run from the checkpoint's weights with "
            f"--model {str(checkpoint)!r} and no --resume."
        )


def load_model_weights(model: Any, checkpoint: Path, uses_lora: bool) -> None:
    """Load the checkpoint's weights into an already built model (full model or adapter)."""
    checkpoint = Path(checkpoint)
    if uses_lora:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(model, load_file(str(checkpoint / "adapter_model.safetensors")))
        return
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(
        checkpoint, **dtype_kwarg(next(model.parameters()).dtype))
    model.load_state_dict(loaded.state_dict())


def save_final(output_dir: Path, model: Any, tokenizer: Any, uses_lora: bool,
               model_state: dict[str, Any] | None = None) -> Path:
    """The final model, loadable with ``from_pretrained`` (``model_state``: the full weights
    of a sharded model)."""
    final = Path(output_dir) / "final"
    final.mkdir(parents=True, exist_ok=True)
    if uses_lora:
        model.save_pretrained(final / "adapter")
        tokenizer.save_pretrained(final / "adapter")
        import copy

        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(final)
    else:
        model.save_pretrained(final, **({"state_dict": model_state} if model_state else {}))
    tokenizer.save_pretrained(final)
    return final
