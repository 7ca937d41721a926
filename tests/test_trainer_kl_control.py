"""Adaptive KL (Ziegler et al. 2019): β grows while the KL is above the target, shrinks below
it down to its starting value, by at most 0.2·K_β per step; without a target β stays fixed."""
from __future__ import annotations

import json

import pytest

from rewardkit.compose import ConfigError
from rewardkit.trainer.config import TrainConfig
from rewardkit.trainer.kl_control import KLController


def test_beta_follows_the_proportional_rule_and_its_clip():
    c = KLController(0.1, target=0.5, rate=0.5)
    c.update(0.6)                                   # 20% over: × (1 + 0.5 · 0.2)
    assert c.value == pytest.approx(0.11)
    c.update(5.0)                                   # far over: the error is clipped at 0.2
    assert c.value == pytest.approx(0.11 * 1.1)
    c.update(0.25)                                  # half the target: clipped at −0.2
    assert c.value == pytest.approx(0.11 * 1.1 * 0.9)
    c.update(None)                                  # no KL measured: unchanged
    assert c.value == pytest.approx(0.11 * 1.1 * 0.9)
    for _ in range(20):                             # far below: shrinks, but not below kl_coef
        c.update(0.0)
    assert c.value == 0.1


def test_without_a_target_beta_is_fixed_and_state_round_trips():
    c = KLController(0.02)
    for kl in (0.0, 1.0, 10.0):
        c.update(kl)
    assert c.value == 0.02
    a = KLController(0.1, target=0.5)
    a.update(1.0)
    b = KLController(0.1, target=0.5)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert b.value == a.value != 0.1


def test_a_target_needs_a_starting_beta():
    with pytest.raises(ConfigError, match="kl_coef > 0"):
        TrainConfig(model="m", data="d", reward="math", kl_target=0.1).validate()
    with pytest.raises(ConfigError, match="kl_coef > 0"):
        KLController(0.0, target=0.1)


def test_the_trainer_raises_beta_while_the_policy_is_beyond_the_target(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from rewardkit.testing.arithmetic import task_config
    from rewardkit.trainer.loop import Trainer

    cfg = task_config(tmp_path / "run", steps=4, batch_size=8, group_size=4, kl_coef=0.01,
                      kl_target=1e-9, kl_adapt_rate=1.0, learning_rate=1e-3)
    trainer = Trainer(cfg)
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    betas = [r["kl_coef"] for r in rows if "kl_coef" in r]
    assert betas[0] == 0.01
    # once the policy has moved (KL > 0 from step 2 on), β grows 20% a step
    assert betas[-1] == pytest.approx(betas[-2] * 1.2) and betas[-1] > 0.01
