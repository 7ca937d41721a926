"""The gold measurement's size changes nothing a run or its stop rule sees: with
``gold_eval_prompts`` the gold reward samples its own completions on a random stream of its own,
so the training rewards and the proxy and disagreement curves a gold-free stop reads are the
same, bit for bit, whether gold is measured on a few held-out prompts or on many."""
from __future__ import annotations

import json
import random

import pytest

from rewardkit.compose import ConfigError
from rewardkit.scorer import Scorer
from rewardkit.trainer.config import TrainConfig
from rewardkit.types import Sample, Score


class TextProxy(Scorer):
    """A proxy that reads the sampled text, so any change of a draw shows in its curve."""

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        return [Score(float(sum(map(ord, s.completion)) % 97)) for s in samples]


class TextSpread(Scorer):
    """A monitor whose members' disagreement depends on the sampled text."""

    name = "text_spread"

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        return [Score(0.0, uncertainty=float(len(s.completion) % 5)) for s in samples]


class CountingGold(Scorer):
    """A gold reward that records how many completions each call scored."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        self.batches.append(len(samples))
        return [Score(float(s.completion.strip() == str(s.reference))) for s in samples]


def _run(tmp_path, monkeypatch, gold_prompts: int) -> tuple[list[dict], CountingGold]:
    from rewardkit import registry
    from rewardkit.testing.arithmetic import DATA_DIR as ARITH, task_config
    from rewardkit.trainer.loop import Trainer

    monkeypatch.setattr(registry, "load", lambda spec, **o: TextSpread()
                        if spec == "text_spread" else pytest.fail(f"loaded {spec}"))
    out = tmp_path / f"gold{gold_prompts}"
    cfg = task_config(out, eval_data=str(ARITH / "test.jsonl"), eval_max_prompts=3,
                      eval_samples=2, eval_every=1, steps=2, batch_size=4, group_size=2,
                      monitor_reward="text_spread", gold_eval_prompts=gold_prompts,
                      learning_rate=1e-3)
    gold = CountingGold()
    Trainer(cfg, scorer=TextProxy(), gold_scorer=gold).train()
    return [json.loads(line) for line in (out / "metrics.jsonl").open()], gold


def test_a_larger_gold_measurement_leaves_training_and_the_stop_rules_inputs_unchanged(
        tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    small, small_gold = _run(tmp_path, monkeypatch, 2)
    large, large_gold = _run(tmp_path, monkeypatch, 12)
    seen = ("reward/mean", "reward/std", "grad_norm", "eval/reward_mean", "eval/disagreement",
            "eval/monitor_mean")
    assert [{k: r[k] for k in seen if k in r} for r in small] == \
        [{k: r[k] for k in seen if k in r} for r in large]
    assert any("eval/disagreement" in r for r in small) and any("reward/mean" in r for r in small)
    # and gold was measured on its own completions: gold_eval_prompts × eval_samples each time
    assert set(small_gold.batches) == {2 * 2} and set(large_gold.batches) == {12 * 2}
    assert all("eval/gold_mean" in r for r in large if "eval/reward_mean" in r)


def test_the_gold_size_is_checked_against_the_held_out_prompts_and_a_gold_reward():
    from rewardkit.trainer.evaluation import gold_prompts

    held_out = list(range(5))
    assert gold_prompts(held_out, None, CountingGold()) == []
    assert gold_prompts(held_out, 3, CountingGold()) == [0, 1, 2]
    with pytest.raises(ConfigError, match="eval_data has 5 prompts"):
        gold_prompts(held_out, 6, CountingGold())
    with pytest.raises(ConfigError, match="no gold reward"):
        gold_prompts(held_out, 3, None)
    with pytest.raises(ConfigError, match="set eval_data"):
        TrainConfig(model="m", data="d", reward="math", gold_eval_prompts=10).validate()
    with pytest.raises(ConfigError, match="at least 1"):
        TrainConfig(model="m", data="d", reward="math", eval_data="e",
                    gold_eval_prompts=0).validate()


def test_the_gold_stream_gives_every_generator_back_its_state():
    torch = pytest.importorskip("torch")
    import numpy as np

    from rewardkit.trainer.evaluation import own_random_stream

    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    with own_random_stream(7):
        inside = torch.rand(100)
    after = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(after[0], expected[0]) and after[1:] == expected[1:]
    with own_random_stream(7):
        assert torch.equal(torch.rand(100), inside)    # its own stream, the same every time
