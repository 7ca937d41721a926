"""The training loop. One step reads top to bottom:

    prompts → generate G completions each → score with the Scorer → advantages → filters
    → clipped policy loss (+ KL, entropy, value) → optimizer step → metrics

Each arrow is a function of its own module (generation, advantages, filters, losses, value),
tested alone; this module only wires them.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..compose import ConfigError
from ..console import evaluation_line, hide_library_progress_bars, say
from ..diagnostics import explain_flat_rewards
from ..scorer import Scorer
from ..types import Sample
from . import advantages as adv
from . import checkpoint as ckpt
from . import filters
from .config import TrainConfig, load_reward
from .data import (PromptSampler, check_inputs, describe_reference, load_prompts,
                   truncated_count)
from .distributed import Dist
from .evaluation import evaluate, evaluate_gold, gold_prompts, seed_everything
from .generation import GenerationOptions, Rollout, concat_rollouts, generate, rollout_stats
from ..runtime.allocator import retain_freed_memory
from ..runtime.device import host_values, memory_metrics
from ..runtime.health import NoLearningSignal, SignalMonitor
from ..runtime.schedule import lr_factor
from ..runtime.steps import Every, run_steps
from .reward_refresh import refreshed_reward
from .overoptimisation import OveroptimisationMonitor, plot_proxy_and_gold_against_kl
from .early_stop import BeforeStop, DisagreementStop
from .kl_control import KLController
from .losses import (aggregate, clipped_policy_loss, kl_penalty, logprobs_and_entropy,
                     top_entropy_mask, value_loss)
from ..runtime.metrics import MetricsLogger, run_caption
from .policy import Policy, load_policy, logits_to_keep_name, unwrap
from .value import ValueHead, token_rewards



@dataclass
class Batch:
    """What one step trains on: the rollout and, per completion, everything the loss needs."""

    rollout: Rollout
    rewards: torch.Tensor
    advantages: torch.Tensor           # [B] (critic-free) or [B, T] (GAE)
    loss_mask: torch.Tensor            # [B, T] completion tokens that train
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    old_values: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    stats: dict[str, float] = field(default_factory=dict)


class Trainer:
    """GRPO/PPO on any HF causal LM with any Scorer. ``Trainer(cfg).train()`` runs it all."""

    def __init__(self, cfg: TrainConfig, scorer: Scorer | None = None,
                 gold_scorer: Scorer | None = None, resume: str | Path | None = None) -> None:
        self.cfg = cfg.validate()
        check_inputs(cfg)  # before any weight loads
        if not cfg.progress:
            hide_library_progress_bars()
        self.dist = Dist.from_env()
        seed_everything(cfg.seed + self.dist.rank)
        self.scorer = scorer or load_reward(cfg.reward, cfg.reward_options, "reward")
        self.gold = gold_scorer or (load_reward(cfg.gold_reward, {}, "gold_reward")
                                    if cfg.gold_reward else None)
        self.monitor = (load_reward(cfg.monitor_reward, {}, "monitor_reward")
                        if cfg.monitor_reward else None)
        if cfg.reward_refresh_every:
            self.scorer = refreshed_reward(cfg, self.scorer)
        self.policy: Policy = load_policy(cfg, self.dist.device(cfg.device))
        if self.policy.device.type == "cpu":  # 3.5x fewer page faults, steps ~2% faster
            retain_freed_memory()
        tok = self.policy.tokenizer
        prompts = load_prompts(cfg.data, tok, cfg.prompt_field, cfg.reference_field,
                               cfg.chat_template, cfg.max_prompt_tokens)
        self.sampler = PromptSampler(prompts, seed=cfg.seed + self.dist.rank)
        held_out = (load_prompts(cfg.eval_data, tok, cfg.prompt_field, cfg.reference_field,
                                 cfg.chat_template, cfg.max_prompt_tokens) if cfg.eval_data else [])
        self.eval_prompts = held_out[:cfg.eval_max_prompts]
        self.gold_prompts = gold_prompts(held_out, cfg.gold_eval_prompts, self.gold)
        self._say(describe_reference(prompts, cfg.reference_field, cfg.data))
        cut = truncated_count(prompts)
        if cut:
            self._say(f"{cut} of {len(prompts)} prompts were longer than max_prompt_tokens "
                      f"({cfg.max_prompt_tokens}) and keep only their last tokens")
        self.gen = GenerationOptions(cfg.max_new_tokens, cfg.temperature, cfg.top_p, cfg.top_k,
                                     tuple(cfg.stop))
        self.value_head = None
        if cfg.algorithm == "ppo":
            hidden = unwrap(self.policy.model).config.get_text_config().hidden_size
            self.value_head = ValueHead(hidden).to(self.policy.device)
        self.model = self.dist.wrap(self.policy.model, cfg.distributed)
        self.value_module = self.dist.wrap(self.value_head) if self.value_head else None
        params = [p for p in self.policy.model.parameters() if p.requires_grad]
        if not params:
            raise ConfigError(f"no trainable weight in {cfg.model!r} (lora: {cfg.lora}); a LoRA "
                              "run continues with --resume on its output folder, which restores "
                              "its options (lora included)")
        if self.value_head is not None:
            params += list(self.value_head.parameters())
        self.params = params
        self.scaler = torch.amp.GradScaler(self.policy.device.type, enabled=(
            self.policy.compute_dtype == torch.float16 and cfg.mixed_precision))
        self.vllm = None
        if cfg.generation_backend == "vllm":
            from .vllm_generation import VLLMGenerator  # deferred: vLLM, only when chosen

            self.vllm = VLLMGenerator(cfg, self.policy)
        self.signal = SignalMonitor(cfg.stop_without_signal)
        self.overoptimisation = OveroptimisationMonitor(cfg.stop_on_overoptimisation)
        self.early_stop = DisagreementStop(cfg.stop_on_disagreement, cfg.disagreement_margin)
        self.before_stop = BeforeStop(cfg.keep_before_stop, sharded=self.dist.sharded)
        self.kl = KLController(cfg.kl_coef, cfg.kl_target, cfg.kl_adapt_rate)
        self.optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate, betas=cfg.adam_betas,
                                           weight_decay=cfg.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, self.cfg))
        self.step_count = 0
        self._updating = False
        self._step_start: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.interrupt_checkpoint: Path | None = None
        self.output = Path(cfg.output_dir)
        self.logger = MetricsLogger(self.output, cfg.tensorboard, cfg.plots,
                                    enabled=self.dist.is_main, caption=run_caption(cfg))
        if resume is not None:
            ckpt.resume_run(self, ckpt.find_checkpoint(resume))
            if self.vllm is not None:  # the engine started from cfg.model's weights
                self.vllm.sync_weights(unwrap(self.model))

    # -- the step ---------------------------------------------------------------------------------
    def step(self) -> dict[str, float]:
        """One RL step; returns its metrics."""
        start = time.perf_counter()
        batch = self.collect()
        collected = time.perf_counter()
        if self.dist.sum(float(batch.loss_mask.any())) > 0:
            self._updating = True
            stats = self.update(batch)
            self.scheduler.step()
            self._updating = False
        else:  # nothing to train on (all filtered): keep the schedule aligned with the step
            stats = {"skipped": 1.0}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                self.scheduler.step()
        self.step_count += 1
        kl_coef = self.kl.value
        self.kl.update(self.dist.mean_metrics({"kl": stats["kl"]})["kl"] if "kl" in stats
                       else None)
        elapsed = time.perf_counter() - start
        generated = batch.rollout.completion_mask.sum().item()
        return {**batch.stats, **stats, "lr": self.scheduler.get_last_lr()[0], "kl_coef": kl_coef,
                "time/step": elapsed, "time/update": time.perf_counter() - collected,
                "tokens_per_s": generated * self.dist.world_size / elapsed,
                **memory_metrics(self.policy.device)}

    def _check_signal(self, metrics: dict[str, float]) -> None:
        """Warn on a step without learning signal; stop after ``stop_without_signal``."""
        warning = self.signal.update(metrics, self.step_count)
        if warning:
            self._say(warning + "\n" + explain_flat_rewards(self.scorer, *self.last_scored))
        self.signal.raise_if_stalled()

    def _say(self, message: str) -> None:
        if self.dist.is_main:  # through tqdm, so a progress bar on the terminal is not torn
            say(message)

    def collect(self) -> Batch:
        """Generate, score and filter until the batch holds enough kept groups (or resampling
        rounds run out), then compute advantages.

        The batch always has the same number of rows: kept groups first, then (when too few were
        kept) dropped groups with their loss masked out. Equal shapes on every process keep
        data-parallel ranks in step."""
        cfg = self.cfg
        n_prompts = max(1, cfg.batch_size // cfg.group_size // self.dist.world_size)
        parts: list[tuple[Rollout, torch.Tensor, torch.Tensor, torch.Tensor]] = []
        stats: dict[str, float] = {"time/generate": 0.0, "time/score": 0.0}
        kept_groups, seen_groups, zero_var = 0, 0, 0
        for round_ in range(cfg.resample_rounds + 1):
            prompts = self.sampler.next(n_prompts if round_ == 0 else n_prompts - kept_groups)
            t0 = time.perf_counter()
            rollout = self.generate([p.ids for p in prompts])
            t1 = time.perf_counter()
            rewards, score_stats, trains = self.score(prompts, rollout)
            stats["time/generate"] += t1 - t0
            stats["time/score"] += time.perf_counter() - t1
            if round_ == 0:
                stats.update(score_stats)
                stats.update(rollout_stats(rollout))
            zero_var += int(filters.zero_variance_groups(rewards, cfg.group_size).sum())
            keep = self.group_keep(rewards)
            seen_groups += len(prompts)
            kept_groups += int(keep.sum()) // cfg.group_size
            parts.append((rollout, rewards, keep, trains))
            if kept_groups >= n_prompts:
                break
        rollout = concat_rollouts([p[0] for p in parts], self.policy.tokenizer.pad_token_id)
        rewards = torch.cat([p[1] for p in parts])
        keep = torch.cat([p[2] for p in parts])
        trains = torch.cat([p[3] for p in parts])
        # kept rows first (stable, so groups stay contiguous), then cut to the batch size
        order = torch.cat([keep.nonzero().squeeze(-1), (~keep).nonzero().squeeze(-1)])
        order = order[:n_prompts * cfg.group_size]
        stats.update({"groups/zero_variance": zero_var / seen_groups,
                      "groups/kept": kept_groups / seen_groups, "resample_rounds": len(parts) - 1})
        first = parts[0][1]
        no_variance = (first.std().item() == 0.0 if cfg.group_size == 1 or len(first) < 2
                       else bool(filters.zero_variance_groups(first, cfg.group_size).all()))
        stats["signal/none"] = float(no_variance or stats.get("reward/errors", 0.0) >= 1.0)
        return self.make_batch(rollout.select(order), rewards[order], stats,
                               keep[order] & trains[order])

    def generate(self, prompt_ids: list[list[int]]) -> Rollout:
        """``group_size`` completions per prompt (vLLM or HF ``generate`` under autocast), in
        calls of at most ``generation_batch_size`` completions."""
        cfg = self.cfg
        if self.vllm is not None:
            return self.vllm.generate(prompt_ids, cfg.group_size, self.gen)
        per_call = max(1, (cfg.generation_batch_size or len(prompt_ids) * cfg.group_size)
                       // cfg.group_size)
        parts = []
        for lo in range(0, len(prompt_ids), per_call):
            with self.policy.autocast():
                parts.append(generate(unwrap(self.model), self.policy.tokenizer,
                                      prompt_ids[lo:lo + per_call], cfg.group_size, self.gen,
                                      self.policy.device, synced=self.dist.sharded))
        return concat_rollouts(parts, self.policy.tokenizer.pad_token_id)

    def score(self, prompts: list, rollout: Rollout
              ) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:
        """Rewards from the Scorer, ``r - λ·uncertainty`` where a Score reports uncertainty, and
        the truncation penalty; and which completions may enter the loss (with
        ``reward_errors: skip``, not those the reward could not score)."""
        g = self.cfg.group_size
        # rewards with a schedule over training (the iou reward's dynamic threshold) read the
        # step from the metadata
        samples = [Sample(prompts[i // g].prompt, text, prompts[i // g].reference,
                          {**(prompts[i // g].row or {}), "group": i // g,
                           "step": self.step_count, "total_steps": self.cfg.steps})
                   for i, text in enumerate(rollout.texts)]
        scores = self.scorer.score(samples)
        values = [s.value - self.cfg.uncertainty_penalty * (s.uncertainty or 0.0) for s in scores]
        self.last_scored = (samples, scores, values)  # what a no-signal warning shows
        rewards = torch.tensor(values, dtype=torch.float32, device=self.policy.device)
        trains = torch.ones_like(rewards, dtype=torch.bool)
        scored = [s.ok for s in scores]
        if self.cfg.reward_errors == "skip" and not all(scored):
            trains = torch.tensor(scored, device=rewards.device)
            rewards = filters.stand_in_for_errors(rewards, trains, g)
        if self.cfg.truncation == "penalty":
            rewards = filters.penalize_truncated(rewards, rollout.truncated,
                                                 self.cfg.truncation_penalty)
            trains = trains | rollout.truncated.bool().to(trains.device)  # a known penalty
        counted = values  # what reward/mean and reward/std describe: with skip, the scored
        if self.cfg.reward_errors == "skip":
            counted = [v for v, ok in zip(values, scored) if ok] or values
        stats = {"reward/mean": float(np.mean(counted)), "reward/std": float(np.std(counted)),
                 "reward/errors": sum(not ok for ok in scored) / len(scores)}
        # each component's mean and std over the samples that report it (an errored sample
        # has no components, and may come first)
        for name in dict.fromkeys(k for s in scores for k in s.components):
            parts = [s.components[name] for s in scores if name in s.components]
            stats[f"reward/{name}"] = float(np.mean(parts))
            stats[f"reward/{name}/std"] = float(np.std(parts))
        return rewards, stats, trains

    def group_keep(self, rewards: torch.Tensor) -> torch.Tensor:
        """Which completions the group filter keeps (whole groups)."""
        if self.cfg.group_filter == "zero_variance":
            return filters.keep_nonzero_variance(rewards, self.cfg.group_size)
        if self.cfg.group_filter == "reinforce_rej":
            return filters.reinforce_rej(rewards, self.cfg.group_size)
        return torch.ones_like(rewards, dtype=torch.bool)

    @torch.no_grad()
    def make_batch(self, rollout: Rollout, rewards: torch.Tensor, stats: dict[str, float],
                   keep: torch.Tensor | None = None) -> Batch:
        """Old/reference log-probs and values where the loss needs them, then advantages.
        ``keep`` masks rows the filters dropped out of the loss."""
        cfg = self.cfg
        mask = rollout.completion_mask.float()
        if keep is not None:
            mask = mask * keep.unsqueeze(1)
        if cfg.truncation == "mask":
            mask = mask * filters.keep_untruncated(rollout.truncated).unsqueeze(1)
        needs_old = cfg.epochs > 1 or (cfg.mini_batch_size or cfg.batch_size) < cfg.batch_size
        old_logp = old_values = ref_logp = None
        if needs_old or self.value_head is not None:
            old_logp, old_values = self.forward_no_grad(self.model, rollout, values=True)
        if self.policy.has_reference and (cfg.kl_coef > 0 or cfg.measure_kl):
            with self.policy.reference_model() as ref:
                ref_logp, _ = self.forward_no_grad(ref, rollout)
        seq_rewards = rewards
        if ref_logp is not None and cfg.kl_in == "reward":
            logp = (old_logp if old_logp is not None
                    else self.forward_no_grad(self.model, rollout)[0])
            kl = kl_penalty(logp, ref_logp, cfg.kl_estimator)
            if cfg.advantage != "gae":  # sequence-level rewards: the summed per-token KL
                seq_rewards = rewards - self.kl.value * (kl * mask).sum(-1)
        returns = None
        if cfg.advantage == "gae":
            kl = (kl_penalty(old_logp, ref_logp, cfg.kl_estimator)
                  if ref_logp is not None and cfg.kl_in == "reward" else None)
            per_token = token_rewards(rewards, rollout.completion_mask, kl, self.kl.value)
            advantages, returns = adv.gae(per_token, old_values, rollout.completion_mask,
                                          cfg.gamma, cfg.lam)
            advantages = adv.whiten(advantages, mask)
        elif cfg.advantage == "rloo":
            advantages = adv.rloo_advantages(seq_rewards, cfg.group_size)
        elif cfg.advantage == "reinforce_pp":
            advantages = adv.reinforce_pp_advantages(seq_rewards, cfg.group_size)
        else:
            advantages = adv.grpo_advantages(seq_rewards, cfg.group_size, cfg.std_scale)
        seq_adv = advantages if advantages.dim() == 1 else (advantages * mask).sum(-1)
        stats.update({"advantage/mean": seq_adv.mean().item(), "advantage/std":
                      seq_adv.std().item() if len(seq_adv) > 1 else 0.0,
                      "advantage/abs_max": seq_adv.abs().max().item() if len(seq_adv) else 0.0})
        return Batch(rollout, rewards, advantages, mask, old_logp, ref_logp, old_values, returns,
                     stats)

    def forward(self, model: Any, rollout: Rollout, values: bool = False,
                entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None,
                                                torch.Tensor | None]:
        """Per-token log-probs of the completion (at the sampling temperature), and optionally
        entropies and values, from one forward pass over prompt + completion."""
        ids = torch.cat([rollout.prompt_ids, rollout.completion_ids], dim=1)
        attention = torch.cat([rollout.prompt_mask, rollout.completion_mask], dim=1)
        # Positions count real tokens only, as generate() counts them for left-padded prompts.
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        steps = rollout.completion_ids.shape[1]
        want_values = values and self.value_head is not None
        keep = logits_to_keep_name(type(unwrap(unwrap(model))))
        with self.policy.autocast():
            out = model(input_ids=ids, attention_mask=attention, position_ids=positions,
                        output_hidden_states=want_values, use_cache=False,
                        **({keep: steps + 1} if keep else {}))
        # logits of the positions that predict completion tokens; temperature and the fp32
        # upcast are applied chunk by chunk inside logprobs_and_entropy
        logits = out.logits[:, -steps - 1:-1]
        # with no entropy bonus, entropy is only measured: no graph for it
        logp, ent = logprobs_and_entropy(logits, rollout.completion_ids, self.cfg.temperature,
                                         self.cfg.logprob_chunk_tokens, entropy=entropy,
                                         entropy_grad=self.cfg.entropy_coef > 0)
        vals = None
        if want_values:
            hidden = out.hidden_states[-1][:, -steps - 1:-1]
            vals = self.value_module(hidden)
        return logp, ent, vals

    def row_chunks(self, rows: int, width: int, limit: int | None = None) -> list[slice]:
        """Consecutive row ranges for forward passes over ``rows`` sequences ``width`` tokens
        wide: at most ``limit`` rows (``micro_batch_size`` by default) and at most
        ``max_tokens_per_forward`` tokens each (at least one row)."""
        cfg = self.cfg
        size = limit or cfg.micro_batch_size or cfg.mini_batch_size or rows
        if cfg.max_tokens_per_forward:
            size = min(size, max(1, cfg.max_tokens_per_forward // max(width, 1)))
        size = max(1, size)
        return [slice(lo, min(lo + size, rows)) for lo in range(0, rows, size)]

    @torch.no_grad()
    def forward_no_grad(self, model: Any, rollout: Rollout, values: bool = False
                        ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-probs (and values) of a whole batch without a graph, micro-batched as
        :meth:`row_chunks` says: old-policy, reference and value passes."""
        width = rollout.prompt_ids.shape[1] + rollout.completion_ids.shape[1]
        logps, vals = [], []
        for part in self.row_chunks(len(rollout), width):
            index = torch.arange(part.start, part.stop, device=rollout.prompt_ids.device)
            logp, _, value = self.forward(model, rollout.select(index, texts=False), values=values)
            logps.append(logp)
            if value is not None:
                vals.append(value)
        return torch.cat(logps), (torch.cat(vals) if vals else None)

    def update(self, batch: Batch) -> dict[str, float]:
        """``epochs`` passes over the batch in mini-batches (one optimizer step each), each
        mini-batch in micro-batches (gradient accumulation)."""
        cfg = self.cfg
        n = len(batch.rollout)
        mini = min(cfg.mini_batch_size or n, n)
        micro = min(cfg.micro_batch_size or mini, mini)
        width = batch.rollout.prompt_ids.shape[1] + batch.rollout.completion_ids.shape[1]
        records: list[dict[str, Any]] = []  # each micro-batch's figures, as 0-dim tensors
        norms: list[Any] = []
        self.model.train()
        for _ in range(cfg.epochs):
            order = torch.randperm(n) if mini < n else torch.arange(n)
            for lo in range(0, n, mini):
                rows = order[lo:lo + mini].to(batch.loss_mask.device)
                num_tokens = self.dist.sum(batch.loss_mask[rows].sum().item())
                num_seqs = self.dist.sum(float((batch.loss_mask[rows].sum(-1) > 0).sum().item()))
                chunks = self.row_chunks(len(rows), width, micro)
                for i, part in enumerate(chunks):
                    last = i == len(chunks) - 1
                    with self.dist.no_sync(self.model, self.value_module, skip=last):
                        parts = self.loss(batch, rows[part], num_tokens, num_seqs)
                        loss = parts.pop("loss") * self.dist.world_size
                        self.scaler.scale(loss).backward()
                    records.append(parts)
                self.scaler.unscale_(self.optimizer)
                norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm or math.inf)
                norms.append(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
                self.scaler.step(self.optimizer)
                self.scaler.update()
                self.optimizer.zero_grad(set_to_none=True)
        if self.vllm is not None:  # the engine samples the next step from the new weights
            self.vllm.sync_weights(unwrap(self.model))
        # read from the device once, now that every pass is queued (host_values says why)
        read = iter(host_values(norms + [v for parts in records for v in parts.values()]))
        norms = [next(read) for _ in norms]
        sums: dict[str, float] = {}
        for parts in records:
            for key in parts:
                sums[key] = sums.get(key, 0.0) + next(read)
        count = len(records)
        # losses: micro-batch shares summed per optimizer step; the rest: mean per micro-batch
        return {**{k: v / (len(norms) if k.startswith("loss/") else max(count, 1))
                   for k, v in sums.items()},
                "grad_norm": sum(norms) / len(norms), "optimizer_steps": len(norms)}

    def loss(self, batch: Batch, rows: torch.Tensor, num_tokens: float,
             num_seqs: float) -> dict[str, Any]:
        """Clipped policy loss + β·KL − c·entropy (+ value loss) on some rows of the batch, and
        its figures as 0-dim tensors (:meth:`update` reads them after the optimizer step)."""
        cfg = self.cfg
        rollout = batch.rollout.select(rows, texts=False)
        mask = batch.loss_mask[rows]
        logp, entropy, values = self.forward(self.model, rollout, values=True, entropy=True)
        old = batch.old_logp[rows] if batch.old_logp is not None else logp.detach()
        clipped = clipped_policy_loss(logp, old, batch.advantages[rows], cfg.clip_eps_low,
                                      cfg.clip_eps_high)
        per_token = clipped.per_token
        train_mask = mask
        if cfg.top_entropy_ratio < 1.0:
            train_mask = mask * top_entropy_mask(entropy, mask, cfg.top_entropy_ratio)
        kl = None
        if batch.ref_logp is not None:
            kl = kl_penalty(logp, batch.ref_logp[rows], cfg.kl_estimator)
            if cfg.kl_in == "loss":
                per_token = per_token + self.kl.value * kl
        if cfg.entropy_coef > 0:
            per_token = per_token - cfg.entropy_coef * entropy
        loss = aggregate(per_token, train_mask, cfg.loss_aggregation, num_tokens=num_tokens,
                         num_seqs=num_seqs, max_tokens=cfg.max_new_tokens)
        # this micro-batch's share of the mini-batch loss (over all processes)
        out: dict[str, Any] = {"loss/policy": loss.detach() * self.dist.world_size}
        if values is not None:
            vloss = value_loss(values, batch.old_values[rows], batch.returns[rows], cfg.value_clip)
            vloss = aggregate(vloss, mask, "token_mean", num_tokens=num_tokens)
            loss = loss + cfg.vf_coef * vloss
            out["loss/value"] = vloss.detach() * self.dist.world_size
        denom = mask.sum().clamp(min=1)
        out.update({
            "loss": loss,
            "clip_fraction": (clipped.clipped.float() * mask).sum() / denom,
            "ratio/mean": (clipped.ratio.detach() * mask).sum() / denom,
            "entropy": (entropy.detach() * mask).sum() / denom,
        })
        if kl is not None:
            out["kl"] = (kl.detach() * mask).sum() / denom
        return out

    # -- the run ----------------------------------------------------------------------------------
    def train(self) -> dict[str, float]:
        """Run to ``cfg.steps``: progress bar, metrics, periodic evaluation and checkpoints, a
        checkpoint on Ctrl-C, and the final model in ``output_dir/final``. Returns the last
        evaluation (or step) metrics.

        Ctrl-C (SIGINT) lets the current step finish, saves a checkpoint and raises
        KeyboardInterrupt, so ``--resume`` continues exactly; a second Ctrl-C stops at once. An
        interruption inside a step (a second Ctrl-C, or KeyboardInterrupt raised by a reward)
        before the optimizer has moved saves the state the step started from; one during the
        update saves nothing, since the weights are part-way through a step, and the last
        periodic checkpoint stays the one to resume from (:attr:`interrupt_checkpoint` is
        None)."""
        cfg = self.cfg
        if self.step_count == 0 and self.eval_prompts:
            self.logger.log(0, self._evaluate_and_watch({"kl": 0.0}))
        self.interrupt_checkpoint = None
        try:
            last = run_steps(
                self._collect_and_step, lambda: self.step_count, cfg.steps,
                every=Every(cfg.eval_every if self.eval_prompts else 0, cfg.log_every,
                            cfg.save_every, log_last_step=True),
                evaluate=lambda step, metrics: metrics.update(self._evaluate_and_watch(metrics)),
                log=self.logger.log, save=self.save, check=self._check_after_step,
                on_interrupt=self._interrupted, progress=cfg.progress and self.dist.is_main,
                desc=f"{cfg.algorithm} steps", show=("reward", "reward/mean"))
        except NoLearningSignal:  # the step itself finished: keep it, and what was logged
            self._step_start = None
            self.interrupt_checkpoint = self.save()
            if self.early_stop.stopping and self.dist.is_main:
                self.before_stop.save(unwrap(self.model), self.output, self.policy, self._say)
            self.logger.close()
            self._plot_overoptimisation()
            raise
        if self.eval_prompts:
            last = self._evaluate_and_watch(last)
            self.logger.log(self.step_count, last)
        self.save()
        full = ckpt.full_state(self)[0] if self.dist.sharded else None
        if self.dist.is_main:
            ckpt.save_final(self.output, unwrap(self.model), self.policy.tokenizer,
                            self.policy.uses_lora, model_state=full)
        self.logger.close()
        self._plot_overoptimisation()
        return last

    def _collect_and_step(self) -> dict[str, float]:
        """One step, remembering where collecting started (see :meth:`_save_on_interrupt`)."""
        self._step_start = (ckpt.rng_state(), dict(self.sampler.state_dict()))
        metrics = self.dist.mean_metrics(self.step())
        self._step_start = None
        return metrics

    def _check_after_step(self, metrics: dict[str, float]) -> None:
        self._check_signal(metrics)
        self.overoptimisation.raise_if_overoptimised()
        self.early_stop.raise_if_diverging()

    def _interrupted(self) -> None:
        self.interrupt_checkpoint = self._save_on_interrupt()

    def _plot_overoptimisation(self) -> None:
        if self.gold is not None and self.cfg.plots and self.dist.is_main:
            plot_proxy_and_gold_against_kl(self.logger.path,
                                           self.output / "overoptimisation.png")

    def _evaluate_and_watch(self, step_metrics: dict[str, float]) -> dict[str, float]:
        """Evaluate, adding the proxy–gold gap and this step's KL to the reference."""
        metrics = self.evaluate()
        metrics.update(self.overoptimisation.update(metrics, step_metrics.get("kl")))
        self.early_stop.update(metrics)
        self.before_stop.remember(unwrap(self.model), self.step_count, self.early_stop.stopping)
        self._say(evaluation_line(self.step_count, metrics, self.logger.path))
        return metrics

    def _save_on_interrupt(self) -> Path | None:
        """The checkpoint an interruption leaves: the last finished step's state, or None when
        the weights were changed part-way through a step."""
        if self._updating:
            return None
        start = getattr(self, "_step_start", None)
        if start is not None:  # interrupted while collecting: rewind what collecting consumed
            ckpt.set_rng_state(start[0])
            self.sampler.load_state_dict(start[1])
            self._step_start = None
        return self.save()

    def evaluate(self) -> dict[str, float]:
        cfg = self.cfg
        options = GenerationOptions(cfg.max_new_tokens, cfg.eval_temperature or cfg.temperature,
                                    cfg.top_p, cfg.top_k, tuple(cfg.stop))
        model, tok, device = unwrap(self.model), self.policy.tokenizer, self.policy.device
        with self.policy.autocast():
            metrics = evaluate(model, tok, self.eval_prompts, self.scorer, options, device,
                               cfg.eval_samples, cfg.eval_k,
                               None if self.gold_prompts else self.gold,
                               success_threshold=cfg.eval_threshold, monitor=self.monitor)
            if self.gold_prompts:  # gold on samples of its own: see gold_eval_prompts
                metrics.update(evaluate_gold(
                    model, tok, self.gold_prompts, self.gold, options, device, cfg.eval_samples,
                    (cfg.seed + self.dist.rank, self.step_count), cfg.eval_threshold))
        return metrics

    # -- checkpoints ------------------------------------------------------------------------------
    def save(self) -> Path | None:
        """A resumable checkpoint of the current step (see :func:`checkpoint.save_run`)."""
        return ckpt.save_run(self)


def train(cfg: TrainConfig, scorer: Scorer | None = None, resume: str | Path | None = None
          ) -> dict[str, float]:
    """Python API: train as the config says and return the final evaluation metrics."""
    return Trainer(cfg, scorer=scorer, resume=resume).train()
