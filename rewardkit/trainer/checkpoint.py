"""Checkpoints of a policy run: what :class:`~rewardkit.trainer.loop.Trainer` adds to the
shared checkpoint files of :mod:`rewardkit.runtime.checkpoint` (value head, over-optimisation
monitor, each process's sampler and RNG, FSDP's gathered state).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..runtime.checkpoint import (CONFIG_FILE, RESUMABLE_CHANGES, STATE_FILE, check_resume_config,
                                  find_checkpoint, list_checkpoints, load_model_weights,
                                  load_state, rng_state, save_checkpoint, save_final,
                                  saved_config, set_rng_state)
from ..compose import ConfigError, read_config_file
from ..diagnostics import config_changes, describe_changes
from ..runtime.device import unwrap

__all__ = ["CONFIG_FILE", "RESUMABLE_CHANGES", "STATE_FILE", "check_resume_config",
           "find_checkpoint", "list_checkpoints", "load_model_weights", "load_state",
           "rng_state", "save_checkpoint", "save_final", "saved_config", "set_rng_state",
           "full_state", "save_run", "resume_run", "reward_file_content", "check_reward_file"]


def reward_file_content(reward: Any) -> dict[str, Any] | None:
    """The parsed content of a reward given as a config file path (None otherwise), saved in
    each checkpoint so that a resume notices the file was edited although its path is the
    same."""
    if not isinstance(reward, str) or not Path(reward).is_file():
        return None
    try:
        return dict(read_config_file(Path(reward)))
    except Exception:  # noqa: BLE001 - an unreadable file is reported when the reward loads
        return None


def check_reward_file(saved: dict[str, Any] | None, reward: Any, checkpoint: Path) -> None:
    """Refuse to resume when the reward's config file changed since the checkpoint, naming each
    changed key with its old and new value."""
    current = reward_file_content(reward)
    if saved is None or current is None:
        return
    changes = config_changes(saved, current)
    if changes:
        raise ConfigError(
            f"--resume {str(checkpoint)!r}: the reward file {reward!r} changed since the "
            f"checkpoint ({describe_changes(changes, 'in the checkpoint', 'now')}). Restore "
            "it, or start a new run from the checkpoint's weights with "
            f"--model {str(checkpoint)!r} and no --resume.")


def full_state(trainer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Full (unsharded) model and optimizer state of an FSDP policy, on the CPU; a collective:
    every process calls it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    return get_state_dict(trainer.model, trainer.optimizer, options=StateDictOptions(
        full_state_dict=True, cpu_offload=True))


def save_run(trainer: Any) -> Path | None:
    """A resumable checkpoint of a policy trainer's current step, written by the main process
    (with FSDP every process takes part in gathering the full state)."""
    model_state, optim_state = full_state(trainer) if trainer.dist.sharded else (None, None)
    # each process samples its own prompts with its own RNG: keep every process's
    ranks = trainer.dist.gather_objects({"sampler": trainer.sampler.state_dict(),
                                         "rng": rng_state()})
    if not trainer.dist.is_main:
        return None
    state = {"step": trainer.step_count, "ranks": ranks,
             "optimizer": optim_state or trainer.optimizer.state_dict(),
             "scheduler": trainer.scheduler.state_dict(),
             "sampler": trainer.sampler.state_dict(),
             "value_head": trainer.value_head.state_dict() if trainer.value_head else None,
             "overoptimisation": trainer.overoptimisation.state_dict(),
             "disagreement_stop": trainer.early_stop.state_dict(),
             "kl_controller": trainer.kl.state_dict(),
             "config": trainer.cfg.to_dict(),
             "reward_file": reward_file_content(trainer.cfg.reward)}
    return save_checkpoint(trainer.output / "checkpoints" / f"step-{trainer.step_count}",
                           unwrap(trainer.model), trainer.policy.tokenizer, state,
                           model_state=model_state)


def resume_run(trainer: Any, checkpoint: Path) -> None:
    """Restore a policy trainer from :func:`save_run`'s checkpoint, refusing changed options."""
    state = load_state(checkpoint)
    check_resume_config(state.get("config"), trainer.cfg.to_dict(), checkpoint)
    check_reward_file(state.get("reward_file"), trainer.cfg.reward, checkpoint)
    if trainer.dist.sharded:  # every process reads the full state and keeps its shard
        # deferred: safetensors and torch.distributed load only for a sharded run
        from safetensors.torch import load_file
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        weights: dict[str, Any] = {}
        for part in sorted(Path(checkpoint).glob("*.safetensors")):
            weights.update(load_file(str(part)))
        set_state_dict(trainer.model, trainer.optimizer, model_state_dict=weights,
                       optim_state_dict=state["optimizer"],
                       options=StateDictOptions(full_state_dict=True, strict=False))
    else:
        load_model_weights(unwrap(trainer.model), checkpoint, trainer.policy.uses_lora)
        trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    trainer.sampler.load_state_dict(state["sampler"])
    if trainer.value_head is not None and state.get("value_head"):
        trainer.value_head.load_state_dict(state["value_head"])
    trainer.step_count = int(state["step"])
    trainer.overoptimisation.load_state_dict(state.get("overoptimisation") or {})
    trainer.early_stop.load_state_dict(state.get("disagreement_stop") or {})
    trainer.kl.load_state_dict(state.get("kl_controller") or {})
    set_rng_state(state["rng"])
    ranks = state.get("ranks")
    if ranks and len(ranks) == trainer.dist.world_size:
        trainer.sampler.load_state_dict(ranks[trainer.dist.rank]["sampler"])
        set_rng_state(ranks[trainer.dist.rank]["rng"])
    trainer.logger.truncate_after(trainer.step_count)
