"""Refreshing the reward model on the policy's own gold-labelled samples (iterated RLHF)."""
from __future__ import annotations

import json

import pytest

from rewardkit.compose import ConfigError
from rewardkit.scorer import Scorer
from rewardkit.trainer.reward_refresh import RefreshedReward
from rewardkit.types import Sample, Score


class Table(Scorer):
    """Scores a completion from a table (a fake reward model: which one is in ``model``)."""

    def __init__(self, model: str = "m0", **_: object) -> None:
        self.model = model
        self.closed = False

    def score_batch(self, samples):
        return [Score(float(len(s.completion)) if self.model == "m0" else
                      float(s.completion == s.reference)) for s in samples]

    def close(self) -> None:
        self.closed = True


class Gold(Scorer):
    def score_batch(self, samples):
        return [Score(float(s.completion == s.reference)) for s in samples]


def _loader(name, **options):
    assert name == "reward_model"
    return Table(**options)


def _batch(step, answers, ref="7", eval_=False):
    meta = {} if eval_ else {"step": step}
    return [Sample("3+4=", a, ref, {**meta, "group": 0}) for a in answers]


def test_the_model_is_refreshed_every_n_steps_on_gold_labelled_pairs_of_training_batches(
        tmp_path):
    trained = []

    def fake_train(model, pairs, out, options):
        trained.append((model, [json.loads(line) for line in open(pairs)]))
        return tmp_path / f"m{len(trained)}"

    r = RefreshedReward({"model": "m0"}, Gold(), every=2, output_dir=tmp_path,
                        train=fake_train, load_reward=_loader)
    first = r.score(_batch(0, ["7", "17", "70"]))
    assert [s.value for s in first] == [1.0, 2.0, 2.0]   # the fixed model prefers long answers
    r.score(_batch(None, ["99999"], eval_=True))           # an evaluation batch: never learned
    r.score(_batch(1, ["7", "8"]))
    assert not trained                                     # step 1: no refresh yet
    after = r.score(_batch(2, ["7", "17"]))                # step 2: refresh before scoring
    assert len(trained) == 1 and trained[0][0] == "m0"
    pairs = trained[0][1]
    assert pairs and all(p["chosen"] == "7" for p in pairs)
    assert {p["rejected"] for p in pairs} == {"17", "70", "8"}   # not the eval answer
    assert [s.value for s in after] == [1.0, 0.0]           # the refreshed model now scores
    assert all(s.info["reward_refresh_round"] == 1 for s in after)
    r.score(_batch(2, ["7"]))                               # same step again: no second refresh
    r.score(_batch(4, ["7", "9"]))
    assert len(trained) == 2 and trained[1][0] == str(tmp_path / "m1")


def test_refresh_needs_a_reward_model_and_known_options(tmp_path):
    with pytest.raises(ConfigError, match="reward_model"):
        RefreshedReward({}, Gold(), 2, tmp_path, load_reward=_loader)
    with pytest.raises(ConfigError, match="unknown option"):
        RefreshedReward({"model": "m0"}, Gold(), 2, tmp_path, {"stepz": 3}, load_reward=_loader)


def test_the_trainer_refuses_a_refresh_without_gold_or_of_a_verifier():
    from rewardkit.trainer.reward_refresh import refreshed_reward
    from rewardkit.trainer.config import TrainConfig

    cfg = TrainConfig(model="m", data="d", reward="math", reward_refresh_every=5)
    with pytest.raises(ConfigError, match="reward must be reward_model"):
        refreshed_reward(cfg, Table())
    cfg = TrainConfig(model="m", data="d", reward="reward_model", reward_refresh_every=5,
                      reward_options={"model": "m0"})
    with pytest.raises(ConfigError, match="needs gold_reward"):
        refreshed_reward(cfg, Table())


def test_new_weight_repeats_each_new_pair_and_leaves_the_fixed_data_once(tmp_path):
    fixed = tmp_path / "fixed.jsonl"
    fixed.write_text(json.dumps({"prompt": "1+1=", "chosen": "2", "rejected": "12"}) + "\n")
    trained = []

    def fake_train(model, pairs, out, options):
        trained.append([json.loads(line) for line in open(pairs)])
        return tmp_path / "m1"

    r = RefreshedReward({"model": "m0"}, Gold(), every=1, output_dir=tmp_path,
                        options={"new_weight": 3, "data": str(fixed)}, train=fake_train,
                        load_reward=_loader)
    r.score(_batch(0, ["7", "17"]))
    r.score(_batch(1, ["7"]))
    rows = trained[0]
    new = {"prompt": "3+4=", "chosen": "7", "rejected": "17"}
    assert rows.count(new) == 3 and len(rows) == 4
    assert sum(row["prompt"] == "1+1=" for row in rows) == 1
    with pytest.raises(ConfigError, match="new_weight"):
        RefreshedReward({"model": "m0"}, Gold(), 2, tmp_path, {"new_weight": 0},
                        load_reward=_loader)
