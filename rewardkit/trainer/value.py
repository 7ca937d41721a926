"""PPO's critic: a linear value head on the policy's last hidden state (shared trunk, as in
Stiennon et al. 2020 / Ouyang et al. 2022 where the value model starts from the policy), and the
per-token rewards GAE consumes."""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


class ValueHead(nn.Module):
    """``V(s_t) = w · h_t + b`` on the hidden state ``h_t`` of the token before position ``t``.

    Zero-initialised so the first advantages equal the returns-to-go and the critic starts
    neutral instead of random.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden.to(self.linear.weight.dtype)).squeeze(-1)

    def save(self, path: Path) -> None:
        torch.save(self.state_dict(), path)


def token_rewards(rewards: torch.Tensor, mask: torch.Tensor,
                  kl: torch.Tensor | None = None, kl_coef: float = 0.0) -> torch.Tensor:
    """Per-token rewards for GAE: the sequence reward on the last valid token, minus
    ``kl_coef * kl_t`` on every valid token when the KL penalty goes in the reward (the PPO-RLHF
    form, Ziegler et al. 2019; Ouyang et al. 2022)."""
    mask = mask.to(rewards.dtype)
    out = torch.zeros_like(mask)
    last = (mask.sum(dim=1).long() - 1).clamp(min=0)
    out[torch.arange(mask.shape[0], device=mask.device), last] = rewards
    out = out * mask
    if kl is not None and kl_coef:
        out = out - kl_coef * kl.detach() * mask
    return out
