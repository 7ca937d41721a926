"""The policy-gradient loss, piece by piece: log-probs, KL estimators, entropy, clipped ratio,
token aggregation and the top-entropy token mask. Pure functions on tensors."""
from __future__ import annotations

from dataclasses import dataclass

import torch

KL_ESTIMATORS = ("k1", "k3")
AGGREGATIONS = ("seq_mean", "token_mean", "constant")


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0,
                   chunk_tokens: int | None = None) -> torch.Tensor:
    """``log p(token)`` per position: ``logit[token] / τ - logsumexp(logits / τ)``.

    Computed without materialising the full ``[B, T, V]`` log-softmax; with ``chunk_tokens``
    the fp32 copy of the logits exists only for that many positions at a time (see
    :func:`logprobs_and_entropy`).
    """
    return logprobs_and_entropy(logits, tokens, temperature, chunk_tokens)[0]


def entropy_from_logits(logits: torch.Tensor, temperature: float = 1.0,
                        chunk_tokens: int | None = None) -> torch.Tensor:
    """Entropy of the next-token distribution at each position, ``-sum p log p``."""
    tokens = torch.zeros(logits.shape[:-1], dtype=torch.long, device=logits.device)
    return logprobs_and_entropy(logits, tokens, temperature, chunk_tokens, entropy=True,
                                entropy_grad=True)[1]


def _chunk_stats(logits: torch.Tensor, tokens: torch.Tensor, temperature: float, entropy: bool,
                 entropy_grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    x = logits.float()
    if temperature != 1.0:
        x = x / temperature
    lse = torch.logsumexp(x, dim=-1)
    logp = x.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - lse
    if not entropy:
        return logp, None
    # -sum p log p on the chunk's log-softmax (the lse - sum p·x form loses digits to
    # cancellation when logits are large)
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        log_p = x - lse.unsqueeze(-1)
        ent = -(log_p.exp() * log_p).sum(-1)
    return logp, ent


def logprobs_and_entropy(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0,
                         chunk_tokens: int | None = None, entropy: bool = False,
                         entropy_grad: bool = False
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of the chosen ``tokens`` (``[B, T]``) and, optionally, the entropy of each
    position's distribution, from ``[B, T, V]`` logits at temperature ``τ``.

    Memory: a bf16 model's logits are upcast to fp32 (and divided by τ) only ``chunk_tokens``
    positions at a time (``None``: all at once), so no full fp32 ``[B, T, V]`` copy is made;
    for a 152k vocabulary at 64 × 1k tokens that copy alone is 40 GB. When the logits need a
    gradient each chunk is recomputed in the backward pass (activation checkpointing, Chen et
    al. 2016) instead of keeping its fp32 copy alive. The entropy carries a gradient only with
    ``entropy_grad`` (an entropy bonus); otherwise it is a measurement.
    """
    if logits.shape[:-1] != tokens.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and tokens {tuple(tokens.shape)} must "
                         "share the [B, T] dimensions")
    rows, steps = tokens.shape
    width = steps if not chunk_tokens else max(1, chunk_tokens // max(rows, 1))
    if width >= steps:
        return _chunk_stats(logits, tokens, temperature, entropy, entropy_grad)
    recompute = logits.requires_grad and torch.is_grad_enabled()
    logps: list[torch.Tensor] = []
    ents: list[torch.Tensor] = []
    for lo in range(0, steps, width):
        args = (logits[:, lo:lo + width], tokens[:, lo:lo + width], temperature, entropy,
                entropy_grad)
        if recompute:
            from torch.utils.checkpoint import checkpoint

            logp, ent = checkpoint(_chunk_stats, *args, use_reentrant=False)
        else:
            logp, ent = _chunk_stats(*args)
        logps.append(logp)
        if ent is not None:
            ents.append(ent)
    return torch.cat(logps, dim=1), (torch.cat(ents, dim=1) if entropy else None)


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
