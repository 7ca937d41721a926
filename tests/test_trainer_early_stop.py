"""The gold-free stop: the training reward and a reward ensemble's disagreement rising together
on held-out samples stop the run, and the gold reward is never read."""
from __future__ import annotations

import json

import pytest

from rewardkit.compose import ConfigError
from rewardkit.trainer.config import TrainConfig
from rewardkit.trainer.early_stop import DisagreementStop, mean_disagreement
from rewardkit.trainer.overoptimisation import Overoptimised
from rewardkit.types import Sample, Score
from rewardkit.scorer import Scorer


def _eval(proxy, spread):
    return {"eval/reward_mean": proxy, "eval/disagreement": spread}


def test_only_a_run_of_evaluations_with_both_rising_above_the_margin_stops():
    stop = DisagreementStop(patience=2, margin=0.5)
    stop.update(_eval(0.0, 1.0))
    stop.update(_eval(0.5, 1.2))           # both rise, but within the margin: not counted
    assert stop.streak == 0
    stop.update(_eval(1.0, 1.6))           # both rise above 1.5 × the first: 1
    stop.update(_eval(0.9, 1.8))           # the proxy fell: reset
    assert stop.streak == 0
    stop.update(_eval(1.2, 1.9))
    stop.raise_if_diverging()              # 1 < patience: goes on
    stop.update(_eval(1.5, 2.0))
    with pytest.raises(Overoptimised, match="disagreement"):
        stop.raise_if_diverging()


def test_patience_zero_never_stops_and_state_round_trips():
    stop = DisagreementStop(patience=0)
    for i in range(5):
        stop.update(_eval(float(i), float(i + 1)))
    stop.raise_if_diverging()
    again = DisagreementStop(patience=3)
    again.load_state_dict(json.loads(json.dumps(stop.state_dict())))
    assert (again.first, again.previous, again.streak) == (1.0, (4.0, 5.0), 4)


def test_a_monitor_without_uncertainty_is_an_error_not_a_silent_zero():
    assert mean_disagreement([Score(1.0, uncertainty=0.2), Score(0.0, uncertainty=0.4)]) == \
        pytest.approx(0.3)
    with pytest.raises(ConfigError, match="uncertainty"):
        mean_disagreement([Score(1.0, uncertainty=0.2), Score(0.0)])


def test_the_stop_needs_a_monitor_reward_and_evaluation():
    cfg = TrainConfig(model="m", data="d", reward="math", stop_on_disagreement=2)
    with pytest.raises(ConfigError, match="monitor_reward"):
        cfg.validate()
    TrainConfig(model="m", data="d", reward="math", stop_on_disagreement=2, eval_data="e",
                eval_every=5, monitor_reward="ensemble").validate()


class RisingProxy(Scorer):
    """Pays more with every call."""

    calls = 0

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        RisingProxy.calls += 1
        return [Score(float(RisingProxy.calls) + (i % 2)) for i, _ in enumerate(samples)]


class GrowingDisagreement(Scorer):
    """An ensemble whose members disagree more on every call."""

    name = "growing_disagreement"
    calls = 0

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        GrowingDisagreement.calls += 1
        return [Score(0.0, uncertainty=float(GrowingDisagreement.calls)) for _ in samples]


class Gold(Scorer):
    """Gold that would never stop a run; it must not be needed by this rule either."""

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        return [Score(1.0) for _ in samples]


def test_trainer_logs_the_disagreement_and_stops_without_reading_gold(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from rewardkit import registry
    from rewardkit.testing.arithmetic import DATA_DIR as ARITH, task_config
    from rewardkit.trainer.loop import Trainer

    monkeypatch.setattr(registry, "load", lambda spec, **o: GrowingDisagreement()
                        if spec == "growing" else pytest.fail(f"loaded {spec}"))
    cfg = task_config(tmp_path / "run", eval_data=str(ARITH / "test.jsonl"), eval_max_prompts=2,
                      eval_samples=1, eval_every=1, steps=8, batch_size=4, group_size=2,
                      monitor_reward="growing", stop_on_disagreement=2, tensorboard=False)
    trainer = Trainer(cfg, scorer=RisingProxy(), gold_scorer=Gold())
    with pytest.raises(Overoptimised, match="disagreement"):
        trainer.train()
    assert trainer.step_count == 2   # evaluations at steps 0, 1, 2: both rose twice
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    spreads = [r["eval/disagreement"] for r in rows if "eval/disagreement" in r]
    assert spreads == [1.0, 2.0, 3.0]
    assert all(r["eval/monitor_mean"] == 0.0 for r in rows if "eval/disagreement" in r)
    assert (tmp_path / "run" / "checkpoints" / "step-2").exists()


def test_keep_before_stop_saves_the_policy_of_the_evaluation_before_the_stop(tmp_path,
                                                                            monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM

    from rewardkit import registry
    from rewardkit.testing.arithmetic import DATA_DIR as ARITH, task_config
    from rewardkit.trainer.loop import Trainer

    monkeypatch.setattr(registry, "load", lambda spec, **o: GrowingDisagreement()
                        if spec == "growing" else pytest.fail(f"loaded {spec}"))
    cfg = task_config(tmp_path / "run", eval_data=str(ARITH / "test.jsonl"), eval_max_prompts=2,
                      eval_samples=1, eval_every=1, save_every=1, steps=8, batch_size=4,
                      group_size=2, monitor_reward="growing", stop_on_disagreement=2,
                      keep_before_stop=True, tensorboard=False, learning_rate=1e-3)
    trainer = Trainer(cfg, scorer=RisingProxy(), gold_scorer=Gold())
    with pytest.raises(Overoptimised):
        trainer.train()
    assert trainer.step_count == 2
    kept = tmp_path / "run" / "before_stop" / "final"
    assert (tmp_path / "run" / "before_stop" / "step.txt").read_text().strip() == "1"
    before = AutoModelForCausalLM.from_pretrained(kept).state_dict()
    step1 = AutoModelForCausalLM.from_pretrained(
        tmp_path / "run" / "checkpoints" / "step-1").state_dict()
    step2 = AutoModelForCausalLM.from_pretrained(
        tmp_path / "run" / "checkpoints" / "step-2").state_dict()
    assert all(torch.equal(before[k], step1[k]) for k in step1)     # the step-1 policy
    assert not all(torch.equal(step1[k], step2[k]) for k in step1)  # which differs from the stop


def test_keep_before_stop_needs_the_stop():
    with pytest.raises(ConfigError, match="keep_before_stop"):
        TrainConfig(model="m", data="d", reward="math", keep_before_stop=True).validate()
