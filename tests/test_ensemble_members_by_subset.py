"""`members_by_subset`: ensemble members (or heads) taught different kinds of wrong answer —
the pairs' `subset` values dealt out round-robin — instead of bootstrap resamples of the same
pairs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import numpy as np  # noqa: E402

from rewardkit.compose import ConfigError  # noqa: E402
from rewardkit.models import train_ensemble as te  # noqa: E402
from rewardkit.models.train_config import RewardTrainConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BASE = str(ROOT / "data" / "learned" / "base")
KINDS = ("carry", "units", "transposed", "dropped", "extra")


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """48 training pairs, each labelled with one of five kinds of wrong answer."""
    path = tmp_path_factory.mktemp("data") / "pairs.jsonl"
    with open(ROOT / "data" / "learned" / "rm_train.jsonl") as src:
        rows = [json.loads(next(src)) for _ in range(48)]
    path.write_text("".join(json.dumps({**r, "subset": KINDS[i % len(KINDS)]}) + "\n"
                            for i, r in enumerate(rows)))
    return str(path)


def _cfg(data, out, **changes):
    values = dict(model=BASE, data=data, output_dir=str(out), steps=2, batch_size=4,
                  learning_rate=1e-3, eval_every=0, eval_fraction=0.25, progress=False,
                  tensorboard=False, plots=False, device="cpu", max_length=64, ensemble=3,
                  members_by_subset=True)
    values.update(changes)
    return RewardTrainConfig(**values)


def test_subsets_are_sorted_and_dealt_round_robin():
    member = te.subset_members(["b", "a", "c", "d", "a", "e"], 2)
    # sorted a, b, c, d, e -> members 0, 1, 0, 1, 0
    assert member.tolist() == [1, 0, 0, 1, 0, 0]
    with pytest.raises(ConfigError, match="2 distinct subset value.*for 3 members"):
        te.subset_members(["a", "b", "a"], 3)


def test_each_member_trains_only_on_its_own_kinds_and_all_share_the_heldout(labelled,
                                                                            tmp_path):
    ens = te.ModelsEnsembleTrainer(_cfg(labelled, tmp_path / "run"))
    members = [ens.member_trainer(i) for i in range(3)]
    seen = []
    for i, m in enumerate(members):
        kinds = {r.subset for r in m.train_rows}
        expected = {k for j, k in enumerate(sorted(KINDS)) if j % 3 == i}
        assert kinds == expected
        seen.append({(r.prompt, r.chosen, r.rejected) for r in m.train_rows})
        assert [(r.prompt, r.chosen) for r in m.eval_rows] == [
            (r.prompt, r.chosen) for r in members[0].eval_rows]
    assert not (seen[0] & seen[1] or seen[1] & seen[2] or seen[0] & seen[2])  # disjoint
    assert sum(len(s) for s in seen) == members[0].pool_size      # and every pair used


def test_heads_weigh_only_the_pairs_of_their_own_kinds(labelled, tmp_path):
    heads = te.HeadsEnsembleTrainer(_cfg(labelled, tmp_path / "heads", ensemble_form="heads"))
    member = te.subset_members(heads.train_subsets, 3)
    assert (heads.counts.sum(1) == 1).all()                      # each pair: one head
    assert (np.argmax(heads.counts, 1) == member).all()


def test_a_finished_run_records_the_option_and_errors_say_what_to_do(labelled, tmp_path):
    report = te.ensemble_trainer(_cfg(labelled, tmp_path / "run", ensemble=2)).train()
    assert report["members_by_subset"] is True
    with pytest.raises(ConfigError, match="set ensemble to 2 or more"):
        _cfg(labelled, tmp_path, ensemble=1).validate()
    unlabelled = tmp_path / "unlabelled.jsonl"                  # every pair: subset "all"
    unlabelled.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items()
                                              if k != "subset"}) + "\n"
                                  for line in open(labelled)))
    with pytest.raises(ConfigError, match="1 distinct subset value"):
        te.ModelsEnsembleTrainer(_cfg(str(unlabelled), tmp_path / "u")).member_trainer(0)
