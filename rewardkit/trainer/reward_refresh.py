"""Refresh the reward model on the policy's own samples, labelled by a gold reward, every N steps.

A fixed learned reward has errors the policy will find (Gao et al. 2023). Iterated RLHF
(Bai et al. 2022, "Training a Helpful and Harmless Assistant…", online iterated RLHF; Touvron et
al. 2023, Llama 2, which retrains its reward models on the latest policy's samples) closes the
loop: the completions the policy now writes are judged by a better source — here the gold
verifier — and the reward model is fine-tuned on them, so an answer that pays only because
the reward model is wrong stops paying once the policy writes it.

:class:`RefreshedReward` wraps the training reward (a ``reward_model``). On every training
batch (samples whose metadata carries ``step``; evaluation batches do not and are never learned
from) it also scores the completions with the gold reward and keeps, per prompt group, pairs
(gold-right completion, gold-wrong completion). At the first batch of every ``every``-th step it
fine-tunes the current reward model on the newest ``max_pairs`` pairs, each repeated
``new_weight`` times (plus an optional fixed preference file, so the model keeps what it knew;
repeating the new pairs tilts the fine-tune towards the policy's current errors) with
``rewardkit train rm`` in a child process
— the trainer does not import the reward-model code — and scores with the new model from then
on. Each Score's ``info["reward_refresh_round"]`` says which model scored it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from ..compose import ConfigError
from ..registry import load
from ..scorer import Scorer
from ..types import Sample, Score

DEFAULTS: dict[str, Any] = {"steps": 50, "learning_rate": 3e-4, "batch_size": 16,
                            "max_pairs": 2000, "pairs_per_group": 4, "data": None,
                            "gold_threshold": 1.0, "new_weight": 1}
"""Options of ``reward_refresh`` (the trainer config's mapping) and their defaults."""

TrainFn = Callable[[str, Path, Path, Mapping[str, Any]], Path]
"""``train(model, pairs_file, output_dir, options) -> final model folder``."""


def train_with_cli(model: str, pairs: Path, output_dir: Path, options: Mapping[str, Any]
                   ) -> Path:
    """Fine-tune ``model`` on ``pairs`` with ``rewardkit train rm`` in a child process."""
    cmd = [sys.executable, "-m", "rewardkit", "train", "rm", "--model", model,
           "--data", str(pairs), "--output", str(output_dir), "--steps", str(options["steps"]),
           "--batch-size", str(options["batch_size"]), "--lr", str(options["learning_rate"]),
           "--quiet", "--set", "eval_fraction=0", "--set", "lr_schedule=constant",
           "--set", "tensorboard=false", "--set", "plots=false", "--set", "eval_every=0"]
    if options.get("device"):
        cmd += ["--device", str(options["device"])]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"refreshing the reward model failed ({' '.join(cmd)}):\n"
                           f"{done.stderr[-2000:]}")
    return output_dir / "final"


class RefreshedReward(Scorer):
    """A ``reward_model`` fine-tuned every ``every`` steps on gold-labelled policy samples."""

    name = "refreshed_reward_model"

    def __init__(self, reward_options: Mapping[str, Any], gold: Any, every: int,
                 output_dir: str | Path, options: Mapping[str, Any] | None = None,
                 train: TrainFn = train_with_cli,
                 load_reward: Callable[..., Scorer] = load) -> None:
        unknown = set(options or {}) - set(DEFAULTS) - {"device"}
        if unknown:
            raise ConfigError(f"reward_refresh: unknown option(s) {sorted(unknown)}; known: "
                              f"{', '.join(sorted(DEFAULTS))}")
        new_weight = (options or {}).get("new_weight", DEFAULTS["new_weight"])
        if not isinstance(new_weight, int) or isinstance(new_weight, bool) or new_weight < 1:
            raise ConfigError(f"reward_refresh.new_weight must be a whole number >= 1 (how many "
                              f"times each new pair is repeated), got {new_weight!r}")
        if every < 1:
            raise ConfigError(f"reward_refresh_every must be >= 1, got {every}")
        if not reward_options.get("model"):
            raise ConfigError("reward_refresh_every refreshes a reward_model: set reward: "
                              "reward_model with reward_options.model")
        self.options = {**DEFAULTS, **(options or {})}
        self.reward_options = dict(reward_options)
        self.every = every
        self.output = Path(output_dir)
        self.train = train
        self.load_reward = load_reward
        self.gold = gold if isinstance(gold, Scorer) else load_reward(gold)
        self.current = load_reward("reward_model", **self.reward_options)
        self.model_path = str(self.reward_options["model"])
        self.round = 0
        self.pairs: list[dict[str, Any]] = []
        self.refreshed_at: set[int] = set()

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        steps = {(s.metadata or {}).get("step") for s in samples} - {None}
        training = bool(steps)
        if training:
            step = int(min(steps))
            if step > 0 and step % self.every == 0 and step not in self.refreshed_at:
                self.refreshed_at.add(step)
                self.refresh()
        scores = self.current.score(samples)
        if training:
            self.collect(samples)
        for s in scores:
            s.info["reward_refresh_round"] = self.round
        return scores

    def collect(self, samples: list[Sample]) -> None:
        """Pairs (gold-right, gold-wrong) within each prompt group of a training batch."""
        gold = self.gold.score(samples)
        threshold = self.options["gold_threshold"]
        groups: dict[Any, tuple[list[Sample], list[Sample]]] = {}
        for s, g in zip(samples, gold):
            if not g.ok:
                continue
            key = (s.metadata or {}).get("group", s.prompt)
            right, wrong = groups.setdefault(key, ([], []))
            (right if g.value >= threshold else wrong).append(s)
        for right, wrong in groups.values():
            made = 0
            for i, r in enumerate(right):
                for w in wrong[i::max(1, len(right))]:
                    if made >= self.options["pairs_per_group"] or r.completion == w.completion:
                        continue
                    self.pairs.append({"prompt": r.prompt, "chosen": r.completion,
                                       "rejected": w.completion})
                    made += 1
        self.pairs = self.pairs[-self.options["max_pairs"]:]

    def refresh(self) -> None:
        """Fine-tune the current model on the collected pairs (and the fixed data) and swap
        it in. Without any pair yet the model is kept."""
        if not self.pairs:
            return
        self.round += 1
        folder = self.output / f"round_{self.round}"
        folder.mkdir(parents=True, exist_ok=True)
        rows = list(self.pairs) * self.options["new_weight"]
        if self.options["data"]:
            with open(self.options["data"]) as fh:
                rows += [json.loads(line) for line in fh if line.strip()]
        pairs_file = folder / "pairs.jsonl"
        with open(pairs_file, "w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
        final = self.train(self.model_path, pairs_file, folder / "rm", self.options)
        old = self.current
        self.model_path = str(final)
        self.current = self.load_reward("reward_model",
                                        **{**self.reward_options, "model": self.model_path})
        old.close()

    def close(self) -> None:
        self.current.close()
        self.gold.close()


def refreshed_reward(cfg: Any, scorer: Scorer) -> Scorer:
    """The trainer's hook: ``scorer`` (built from ``cfg.reward``) replaced by a
    :class:`RefreshedReward` when ``cfg.reward_refresh_every`` is set."""
    if cfg.reward != "reward_model":
        raise ConfigError(f"reward_refresh_every refreshes a learned reward model: reward must "
                          f"be reward_model, got {cfg.reward!r}")
    if not cfg.gold_reward:
        raise ConfigError("reward_refresh_every needs gold_reward: the reward that labels the "
                          "policy's samples the reward model is refreshed on")
    scorer.close()
    options = {"device": cfg.device, **cfg.reward_refresh}
    return RefreshedReward(cfg.reward_options, cfg.gold_reward, cfg.reward_refresh_every,
                           Path(cfg.output_dir) / "reward_refresh", options)
