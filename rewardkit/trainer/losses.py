"""The policy-gradient loss, piece by piece: log-probs, KL estimators, entropy, clipped ratio,
token aggregation and the top-entropy token mask. Pure functions on tensors."""
from __future__ import annotations

from dataclasses import dataclass

import torch

KL_ESTIMATORS = ("k1", "k3")
AGGREGATIONS = ("seq_mean", "token_mean", "constant")


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``log p(token)`` per position: ``logit[token] - logsumexp(logits)``.

    Computed without materialising the full ``[B, T, V]`` log-softmax, which matters for large
    vocabularies.
    """
    picked = torch.gather(logits, -1, tokens.unsqueeze(-1)).squeeze(-1)
    return picked.float() - torch.logsumexp(logits.float(), dim=-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the next-token distribution at each position, ``-sum p log p``."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token estimate of ``KL(pi || pi_ref)`` from samples of ``pi`` (Schulman 2020,
    "Approximating KL divergence").

    - ``k1 = log pi - log pi_ref``: unbiased, high variance, can be negative per token;
    - ``k3 = exp(log pi_ref - log pi) - (log pi_ref - log pi) - 1``: unbiased and always >= 0,
      the estimator GRPO uses (Shao et al. 2024).
    """
    if estimator == "k1":
        return logp - ref_logp
    if estimator == "k3":
        log_ratio = ref_logp - logp
        return torch.exp(log_ratio) - log_ratio - 1.0
    raise ValueError(f"kl estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")


@dataclass
class ClippedLoss:
    """Per-token clipped surrogate loss and the fraction of tokens where clipping was active."""

    per_token: torch.Tensor
    clipped: torch.Tensor  # bool [B, T]: the clipped branch was taken
    ratio: torch.Tensor


def clipped_policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                        eps_low: float = 0.2, eps_high: float = 0.2) -> ClippedLoss:
    """PPO's clipped surrogate, per token (Schulman et al. 2017), with separate lower and upper
    clip ranges: the ratio is clipped to ``[1 - eps_low, 1 + eps_high]``.

    A larger ``eps_high`` is DAPO's "clip-higher" (Yu et al. 2025): low-probability tokens with
    positive advantage may grow further, which keeps entropy from collapsing.

    ``loss_t = -min(ratio_t * A_t, clip(ratio_t) * A_t)``. ``advantages`` is ``[B]`` (one per
    sequence, broadcast over tokens) or ``[B, T]``.
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    return ClippedLoss(-torch.min(unclipped, clipped), clipped < unclipped, ratio)


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str, *,
              num_tokens: float | None = None, num_seqs: float | None = None,
              max_tokens: int | None = None) -> torch.Tensor:
    """Reduce a ``[B, T]`` per-token loss to a scalar.

    - ``"seq_mean"``: mean over each sequence's tokens, then mean over sequences (GRPO, Shao et
      al. 2024); long sequences weigh less per token.
    - ``"token_mean"``: sum over all tokens / number of tokens in the batch (DAPO, Yu et al. 2025);
      every token weighs the same.
    - ``"constant"``: sum over all tokens / (number of sequences * ``max_tokens``) (Dr. GRPO, Liu
      et al. 2025): a constant normaliser, so no length bias.

    ``num_tokens`` / ``num_seqs`` are the totals over the whole optimisation batch: with gradient
    accumulation over micro-batches each micro-batch passes the totals, so the summed gradients
    equal those of one big batch.
    """
    mask = mask.to(per_token.dtype)
    masked = per_token * mask
    if mode == "seq_mean":
        seqs = num_seqs if num_seqs is not None else per_token.shape[0]
        per_seq = masked.sum(-1) / mask.sum(-1).clamp(min=1.0)
        return per_seq.sum() / max(seqs, 1)
    if mode == "token_mean":
        tokens = num_tokens if num_tokens is not None else mask.sum().item()
        return masked.sum() / max(tokens, 1.0)
    if mode == "constant":
        if not max_tokens:
            raise ValueError("aggregation 'constant' needs max_tokens (the generation length)")
        seqs = num_seqs if num_seqs is not None else per_token.shape[0]
        return masked.sum() / (max(seqs, 1) * max_tokens)
    raise ValueError(f"loss aggregation must be one of {AGGREGATIONS}, got {mode!r}")


def top_entropy_mask(entropy: torch.Tensor, mask: torch.Tensor, ratio: float) -> torch.Tensor:
    """Keep only the top-``ratio`` fraction of valid tokens by entropy (the "forking tokens").

    Wang et al. 2025 ("Beyond the 80/20 Rule") train on the ~20% highest-entropy tokens and match
    or beat full-token updates. ``ratio >= 1`` keeps every valid token. Ties at the threshold are
    kept. Returns a mask of the same shape and dtype as ``mask``.
    """
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"top-entropy ratio must be in (0, 1], got {ratio}")
    valid = mask.bool()
    if ratio >= 1.0 or not valid.any():
        return mask
    values = entropy.detach()[valid]
    k = max(1, int(round(ratio * values.numel())))
    threshold = torch.topk(values, k).values.min()
    return (valid & (entropy.detach() >= threshold)).to(mask.dtype)


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               clip: float | None = 0.2) -> torch.Tensor:
    """Per-token clipped value loss (Schulman et al. 2017; the clipped form from OpenAI
    baselines): ``0.5 * max((V - R)^2, (clip(V, V_old +- c) - R)^2)``."""
    loss = (values - returns) ** 2
    if clip is not None:
        clipped = old_values + torch.clamp(values - old_values, -clip, clip)
        loss = torch.max(loss, (clipped - returns) ** 2)
    return 0.5 * loss
