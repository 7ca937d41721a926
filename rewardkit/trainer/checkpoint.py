"""Resumable checkpoints: model (or LoRA adapter), optimizer, scheduler, value head, prompt
sampler, every RNG, and the step, so ``--resume`` continues as if never stopped.

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

STATE_FILE = "trainer_state.pt"
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
                    keep: int | None = 2) -> Path:
    """Write a checkpoint atomically (to a temporary folder, then renamed) and keep only the
    ``keep`` most recent ones."""
    directory = Path(directory)
    tmp = directory.with_name(directory.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save({**state, "rng": rng_state()}, tmp / STATE_FILE)
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


def load_model_weights(model: Any, checkpoint: Path, uses_lora: bool) -> None:
    """Load the checkpoint's weights into an already built model (full model or adapter)."""
    checkpoint = Path(checkpoint)
    if uses_lora:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(model, load_file(str(checkpoint / "adapter_model.safetensors")))
        return
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=next(model.parameters()).dtype)
    model.load_state_dict(loaded.state_dict())


def save_final(output_dir: Path, model: Any, tokenizer: Any, uses_lora: bool) -> Path:
    """The final model, loadable with ``from_pretrained``."""
    final = Path(output_dir) / "final"
    final.mkdir(parents=True, exist_ok=True)
    if uses_lora:
        model.save_pretrained(final / "adapter")
        tokenizer.save_pretrained(final / "adapter")
        import copy

        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(final)
    else:
        model.save_pretrained(final)
    tokenizer.save_pretrained(final)
    return final
