"""Held-out evaluation: mean reward, pass@k and mean@n for any Scorer, greedy accuracy, and an
optional gold Scorer beside the training reward (over-optimisation shows as training reward
rising while gold stalls)."""
from __future__ import annotations

import math
import random
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from ..compose import ConfigError
from ..runtime.checkpoint import rng_state, set_rng_state
from ..runtime.decoding import plain_generation
from ..scorer import Scorer
from ..types import Sample
from .data import Prompt
from .early_stop import DISAGREEMENT, MONITOR, mean_disagreement
from .generation import GenerationOptions, generate, left_pad


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct (Chen et al. 2021, "Evaluating
    Large Language Models Trained on Code"): ``1 - C(n-c, k) / C(n, k)``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _samples(prompts: Sequence[Prompt], texts: Sequence[str], per: int) -> list[Sample]:
    return [Sample(prompts[i // per].prompt, t, prompts[i // per].reference,
                   {**(prompts[i // per].row or {}), "group": i // per})
            for i, t in enumerate(texts)]


def _score(scorer: Scorer, prompts: Sequence[Prompt], texts: Sequence[str], per: int) -> list[float]:
    return [s.value for s in scorer.score(_samples(prompts, texts, per))]


@torch.no_grad()
def evaluate(model: Any, tokenizer: Any, prompts: Sequence[Prompt], scorer: Scorer,
             options: GenerationOptions, device: torch.device, samples: int = 4,
             ks: Sequence[int] = (1,), gold: Scorer | None = None, greedy: bool = True,
             success_threshold: float = 1.0, batch_prompts: int = 64,
             monitor: Scorer | None = None) -> dict[str, float]:
    """Sample ``samples`` completions per held-out prompt and report:

    - ``eval/reward_mean``: mean reward over all samples;
    - ``eval/mean@n``: mean fraction of correct samples per prompt (correct: reward >=
      ``success_threshold``);
    - ``eval/pass@k``: unbiased pass@k for each k;
    - ``eval/greedy``: fraction of prompts whose greedy completion is correct;
    - ``eval/gold_mean`` (and ``eval/gold_pass@1``) with a gold scorer;
    - ``eval/disagreement`` and ``eval/monitor_mean`` with a monitor (an ensemble): its mean
      ``Score.uncertainty`` and its mean reward on the sampled completions.
    """
    rewards: list[float] = []
    gold_rewards: list[float] = []
    greedy_rewards: list[float] = []
    monitored = []
    for start in range(0, len(prompts), batch_prompts):
        chunk = list(prompts[start:start + batch_prompts])
        rollout = generate(model, tokenizer, [p.ids for p in chunk], samples, options, device)
        rewards += _score(scorer, chunk, rollout.texts, samples)
        if gold is not None:
            gold_rewards += _score(gold, chunk, rollout.texts, samples)
        if monitor is not None:
            monitored += monitor.score(_samples(chunk, rollout.texts, samples))
        if greedy:
            greedy_rewards += _score(scorer, chunk, greedy_texts(model, tokenizer, chunk, options,
                                                                 device), 1)
    out: dict[str, float] = {"eval/reward_mean": sum(rewards) / len(rewards)}
    correct = [sum(r >= success_threshold for r in rewards[i:i + samples])
               for i in range(0, len(rewards), samples)]
    out["eval/mean@n"] = sum(correct) / (len(correct) * samples)
    for k in ks:
        out[f"eval/pass@{k}"] = sum(pass_at_k(samples, c, k) for c in correct) / len(correct)
    if greedy:
        out["eval/greedy"] = sum(r >= success_threshold for r in greedy_rewards) / len(prompts)
    if gold is not None:
        out["eval/gold_mean"] = sum(gold_rewards) / len(gold_rewards)
        gold_correct = [sum(r >= success_threshold for r in gold_rewards[i:i + samples])
                        for i in range(0, len(gold_rewards), samples)]
        out["eval/gold_pass@1"] = sum(gold_correct) / (len(gold_correct) * samples)
    if monitor is not None:
        out[DISAGREEMENT] = mean_disagreement(monitored)
        out[MONITOR] = sum(s.value for s in monitored) / len(monitored)
    return out


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's (every device's) global generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@contextmanager
def own_random_stream(seed: int) -> Iterator[None]:
    """Run the body on a random stream of its own (Python, NumPy, torch and CUDA seeded with
    ``seed``) and give every generator back its state afterwards, so however much the body
    draws, nothing drawn outside it changes. HF ``generate`` samples from the global torch
    generator and takes no generator of its own, hence the save, seed and restore."""
    saved = rng_state()
    seed_everything(seed)
    try:
        yield
    finally:
        set_rng_state(saved)


def gold_prompts(held_out: Sequence[Prompt], size: int | None, gold: Scorer | None
                 ) -> list[Prompt]:
    """The prompts of a gold measurement made apart from the evaluation (``gold_eval_prompts``
    of them), or none when gold scores the evaluation's own completions (``size`` None)."""
    if not size:
        return []
    if gold is None:
        raise ConfigError("gold_eval_prompts sizes the gold reward's measurement, but there is "
                          "no gold reward: set gold_reward, or drop gold_eval_prompts")
    if size > len(held_out):
        raise ConfigError(f"gold_eval_prompts is {size} but eval_data has {len(held_out)} "
                          "prompts: lower it, or add held-out prompts")
    return list(held_out[:size])


def evaluate_gold(model: Any, tokenizer: Any, prompts: Sequence[Prompt], gold: Scorer,
                  options: GenerationOptions, device: torch.device, samples: int,
                  stream: Sequence[int], success_threshold: float = 1.0) -> dict[str, float]:
    """``eval/gold_mean`` and ``eval/gold_pass@1`` on completions sampled for the gold reward
    alone, on a random stream of its own (:func:`own_random_stream`, seeded by ``stream``, e.g.
    the run's seed and the step): the gold measurement can then be as large as its standard
    error needs without changing a single draw of training or of the evaluation a stop rule
    reads."""
    seed = int(np.random.SeedSequence(list(stream)).generate_state(1)[0])
    with own_random_stream(seed):
        out = evaluate(model, tokenizer, prompts, gold, options, device, samples, (1,),
                       greedy=False, success_threshold=success_threshold)
    return {"eval/gold_mean": out["eval/reward_mean"], "eval/gold_pass@1": out["eval/mean@n"]}


def greedy_texts(model: Any, tokenizer: Any, prompts: Sequence[Prompt],
                 options: GenerationOptions, device: torch.device) -> list[str]:
    """Greedy completions, one per prompt."""
    ids, mask = left_pad([p.ids for p in prompts], tokenizer.pad_token_id, device)
    was_training = model.training
    model.eval()
    kwargs: dict[str, Any] = {}
    if options.stop:
        kwargs.update(stop_strings=list(options.stop), tokenizer=tokenizer)
    with plain_generation(model):
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                             max_new_tokens=options.max_new_tokens,
                             pad_token_id=tokenizer.pad_token_id, **kwargs)
    model.train(was_training)
    texts = tokenizer.batch_decode(out[:, ids.shape[1]:], skip_special_tokens=True)
    if options.stop:
        texts = [min((t[:t.find(s) + len(s)] for s in options.stop if s in t), key=len, default=t)
                 for t in texts]
    return texts

