"""Advantage estimators: one sequence-level reward per completion in, advantages out.

Every function is pure (tensors in, tensors out) so each formula can be checked by hand.
Rewards arrive grouped: the ``G`` completions of one prompt are contiguous, so a batch of
``B = P * G`` rewards reshapes to ``[P, G]``.
"""
from __future__ import annotations

import torch

GROUP_SCALES = ("group", "batch", "none")


def _grouped(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (one per completion), got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size:
        raise ValueError(
            f"{rewards.numel()} rewards cannot be split into groups of {group_size}; the batch "
            "must hold whole groups (batch_size divisible by group_size)"
        )
    return rewards.view(-1, group_size)


def grpo_advantages(rewards: torch.Tensor, group_size: int, scale: str = "group",
                    eps: float = 1e-6) -> torch.Tensor:
    """Group-relative advantages: ``A_i = (r_i - mean(group)) / std``.

    ``scale`` chooses the denominator:

    - ``"group"``: the group's standard deviation (GRPO, Shao et al. 2024, DeepSeekMath);
    - ``"batch"``: the whole batch's standard deviation (Hu et al. 2025, REINFORCE++ baseline
      form; also the "batch std" option studied by Liu et al. 2025);
    - ``"none"``: no scaling, only the group mean subtracted (Dr. GRPO, Liu et al. 2025,
      "Understanding R1-Zero-Like Training"), which removes the question-difficulty bias.

    The standard deviation is the unbiased sample std (as in the GRPO reference code).
    """
    if scale not in GROUP_SCALES:
        raise ValueError(f"std scaling must be one of {GROUP_SCALES}, got {scale!r}")
    grouped = _grouped(rewards, group_size)
    centered = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == "group":
        std = grouped.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(grouped)
        centered = centered / (std + eps)
    elif scale == "batch":
        std = rewards.std() if rewards.numel() > 1 else rewards.new_tensor(0.0)
        centered = centered / (std + eps)
    return centered.reshape(-1)


def rloo_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """REINFORCE leave-one-out: ``A_i = r_i - mean_{j != i} r_j``.

    Each completion's baseline is the mean reward of the other ``G - 1`` completions of its
    prompt, which keeps the estimator unbiased (Kool et al. 2019; Ahmadian et al. 2024, "Back to
    Basics"). Equals ``G / (G - 1)`` times the group-mean-centred reward.
    """
    if group_size < 2:
        raise ValueError("RLOO needs group_size >= 2 (the baseline is the other completions)")
    grouped = _grouped(rewards, group_size)
    others = (grouped.sum(dim=1, keepdim=True) - grouped) / (group_size - 1)
    return (grouped - others).reshape(-1)


def reinforce_pp_advantages(rewards: torch.Tensor, group_size: int | None = None,
                            eps: float = 1e-6) -> torch.Tensor:
    """REINFORCE++: rewards normalised over the whole batch, ``(r - mean_B) / std_B``.

    Hu et al. 2025 ("REINFORCE++") replace the per-prompt critic with batch-level normalisation.
    With ``group_size`` set, the group mean is subtracted first (their "REINFORCE++-baseline"
    variant for multi-sample prompts), then the result is batch-normalised. With
    ``group_size`` 1 (the paper's one sample per prompt) a group mean would zero every
    advantage, so the baseline is the batch mean alone.
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D, got shape {tuple(rewards.shape)}")
    centered = rewards
    if group_size is not None and group_size > 1:
        grouped = _grouped(rewards, group_size)
        centered = (grouped - grouped.mean(dim=1, keepdim=True)).reshape(-1)
    std = centered.std() if centered.numel() > 1 else centered.new_tensor(0.0)
    return (centered - centered.mean()) / (std + eps)


def gae(token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over completion tokens (Schulman et al. 2016).

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` and ``A_t = delta_t + gamma * lam * A_{t+1}``,
    with ``V`` beyond the last valid token taken as 0 (the episode ends there). Returns
    ``(advantages, returns)`` where ``returns = A + V`` is the value target. Positions where
    ``mask`` is 0 get 0 in both.

    Args:
        token_rewards: ``[B, T]`` reward per token (usually the sequence reward on the last
            valid token, minus a per-token KL penalty when the KL goes in the reward).
        values: ``[B, T]`` value estimates ``V(s_t)``.
        mask: ``[B, T]`` 1 on completion tokens, 0 on padding; padding only at the end.
    """
    if not (token_rewards.shape == values.shape == mask.shape):
        raise ValueError(
            f"token_rewards, values and mask must have the same [B, T] shape, got "
            f"{tuple(token_rewards.shape)}, {tuple(values.shape)}, {tuple(mask.shape)}"
        )
    mask = mask.to(values.dtype)
    values = values * mask
    rewards = token_rewards * mask
    advantages = torch.zeros_like(values)
    last = torch.zeros_like(values[:, 0])
    steps = values.shape[1]
    for t in reversed(range(steps)):
        next_value = values[:, t + 1] if t + 1 < steps else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        advantages[:, t] = last
    return advantages, (advantages + values) * mask


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Normalise ``x`` to zero mean and unit variance over the positions where ``mask`` is 1
    (the usual PPO advantage normalisation, Schulman et al. 2017)."""
    mask = mask.to(x.dtype)
    n = mask.sum().clamp(min=1.0)
    mean = (x * mask).sum() / n
    var = (((x - mean) * mask) ** 2).sum() / n
    return (x - mean) * torch.rsqrt(var + eps) * mask
