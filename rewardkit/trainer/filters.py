"""Which completions train: filters applied between scoring and the loss.

Each filter returns a boolean keep-mask over completions (whole groups kept or dropped
together), so they compose with ``&``.
"""
from __future__ import annotations

import torch


def _group_view(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not form whole groups of {group_size}")
    return rewards.view(-1, group_size)


def zero_variance_groups(rewards: torch.Tensor, group_size: int, tol: float = 1e-6) -> torch.Tensor:
    """Per group: True where every completion got the same reward (within ``tol``).

    Such a group has all-zero group-relative advantages and contributes no gradient; DAPO's
    dynamic sampling (Yu et al. 2025) drops them and samples more prompts to refill the batch.
    """
    grouped = _group_view(rewards, group_size)
    return (grouped.max(dim=1).values - grouped.min(dim=1).values) <= tol


def keep_nonzero_variance(rewards: torch.Tensor, group_size: int, tol: float = 1e-6) -> torch.Tensor:
    """Keep-mask over completions that drops zero-variance groups (DAPO dynamic sampling)."""
    keep_group = ~zero_variance_groups(rewards, group_size, tol)
    return keep_group.repeat_interleave(group_size)


def reinforce_rej(rewards: torch.Tensor, group_size: int, correct: float = 1.0,
                  wrong: float = 0.0) -> torch.Tensor:
    """Keep-mask dropping groups whose completions are all correct (every reward >= ``correct``)
    or all wrong (every reward <= ``wrong``).

    Reinforce-Rej (Xiong et al. 2025, "A Minimalist Approach to LLM Reasoning"): filtering both
    extremes stabilises training; for 0/1 rewards it equals dropping zero-variance groups, with
    graded rewards it keeps groups that differ only in partial credit.
    """
    grouped = _group_view(rewards, group_size)
    all_correct = (grouped >= correct).all(dim=1)
    all_wrong = (grouped <= wrong).all(dim=1)
    return (~(all_correct | all_wrong)).repeat_interleave(group_size)


def penalize_truncated(rewards: torch.Tensor, truncated: torch.Tensor,
                       penalty: float) -> torch.Tensor:
    """Rewards with truncated completions (no end of sequence within the length budget) set to
    ``penalty`` (the overlong punishment of DAPO, Yu et al. 2025, in its simplest form)."""
    return torch.where(truncated.bool(), torch.full_like(rewards, penalty), rewards)


def keep_untruncated(truncated: torch.Tensor) -> torch.Tensor:
    """Keep-mask dropping truncated completions from the loss (DAPO's overlong filtering): a cut
    completion is not judged on an answer it never got to write."""
    return ~truncated.bool()


def stand_in_for_errors(rewards: torch.Tensor, scored: torch.Tensor,
                        group_size: int) -> torch.Tensor:
    """``rewards`` with each unscored completion's (``scored`` False: an error Score) replaced
    by the mean reward of its group's scored completions, so that it shifts no group mean
    (the caller also leaves it out of the loss). A group with nothing scored keeps its values:
    it has no signal either way."""
    grouped = _group_view(rewards, group_size)
    ok = _group_view(scored, group_size)
    counts = ok.sum(dim=1, keepdim=True)
    means = (grouped * ok).sum(dim=1, keepdim=True) / counts.clamp(min=1)
    filled = torch.where(ok | (counts == 0), grouped, means.expand_as(grouped))
    return filled.reshape(-1)
