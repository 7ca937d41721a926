"""``rewardkit train rm|prm`` from Python: :func:`train_reward_model` trains one model
(:class:`~rewardkit.models.reward_trainer.RewardTrainer`) or, with ``ensemble`` ≥ 2, an
ensemble (:mod:`rewardkit.models.train_ensemble`). Both build on
:mod:`rewardkit.models.reward_trainer`; this module sits on top of them, so nothing imports
back into it. The names it held before the trainer had a module of its own
(``PairExample``, ``StepExample``, ``PLOT_PANELS``) stay importable from here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .loading import SIDECAR
from .reward_trainer import PLOT_PANELS, PairExample, RewardTrainer, StepExample  # noqa: F401
from .train_config import RewardTrainConfig
from .train_ensemble import ensemble_trainer


def train_reward_model(cfg: RewardTrainConfig, resume: str | Path | None = None
                       ) -> dict[str, Any]:
    """Python API: train as the config says; returns the final held-out metrics, or with
    ``ensemble`` ≥ 2 the ensemble's report (see :mod:`rewardkit.models.train_ensemble`)."""
    if cfg.validate().ensemble > 1:
        return ensemble_trainer(cfg, resume=resume).train()
    return RewardTrainer(cfg, resume=resume).train()


__all__ = ["RewardTrainer", "train_reward_model", "SIDECAR"]
