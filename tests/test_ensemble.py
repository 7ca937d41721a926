"""The `ensemble` reward: combine rules against hand-computed values, uncertainty as the members'
std, normalisation, members that fail, config files, and the K-head shared-trunk form."""
from __future__ import annotations

import math

import pytest

import rewardkit
from rewardkit import Sample
from rewardkit.compose import ConfigError
from rewardkit.scorer import FunctionScorer


def _member(j, fail_on=()):
    """Member j returns metadata["r"][j]; raises on the samples whose "id" is in fail_on."""

    def fn(prompt, completion, reference, metadata):
        if metadata.get("id") in fail_on:
            raise RuntimeError(f"member {j} cannot score this")
        return metadata["r"][j]

    return FunctionScorer(fn, name=f"m{j}")


def _sample(values, sid=0):
    return Sample("p", "c", metadata={"r": list(values), "id": sid})


def _ensemble(k=3, fail=None, **options):
    fail = fail or {}
    return rewardkit.load("ensemble", members=[_member(j, fail.get(j, ())) for j in range(k)],
                          normalize=options.pop("normalize", False), **options)


# Values 1, 2, 6: mean 3, population variance ((−2)² + (−1)² + 3²)/3 = 14/3, std √(14/3).
@pytest.mark.parametrize("combine, lam, expected", [
    ("mean", 1.0, 3.0),
    ("min", 1.0, 1.0),
    ("uwo", 0.5, 3.0 - 0.5 * 14 / 3),
    ("mean_minus_std", 2.0, 3.0 - 2.0 * math.sqrt(14 / 3)),
    ("std", 2.0, math.sqrt(14 / 3)),
])
def test_each_combine_rule_matches_the_hand_computed_value(combine, lam, expected):
    (score,) = _ensemble(combine=combine, lam=lam).score([_sample([1.0, 2.0, 6.0])])
    assert score.ok
    assert score.value == pytest.approx(expected, abs=1e-12)


def test_uncertainty_is_the_population_std_of_the_members_and_components_their_values():
    values = [0.5, -1.5, 4.0, 2.0]
    (score,) = _ensemble(k=4, combine="uwo", lam=0.1).score([_sample(values)])
    mean = sum(values) / 4
    assert score.uncertainty == pytest.approx(
        math.sqrt(sum((v - mean) ** 2 for v in values) / 4), abs=1e-12)
    assert score.components == {f"member_{j}": v for j, v in enumerate(values)}


def test_combine_rules_agree_with_numpy_on_random_members():
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    for _ in range(20):
        values = rng.normal(size=5) * 3
        lam = float(rng.uniform(0, 2))
        batch = [_sample(values.tolist())]
        expected = {"mean": values.mean(), "min": values.min(),
                    "uwo": values.mean() - lam * values.var(),
                    "mean_minus_std": values.mean() - lam * values.std(),
                    "std": values.std()}
        for combine, want in expected.items():
            (score,) = _ensemble(k=5, combine=combine, lam=lam).score(batch)
            assert score.value == pytest.approx(float(want), abs=1e-9)
            assert score.uncertainty == pytest.approx(float(values.std()), abs=1e-9)


def test_std_subtracted_in_a_composition_penalises_one_reward_by_the_members_disagreement():
    """The gain from one reward, the penalty from members that err differently: a sample the
    proxy prefers but the members disagree on falls below one they agree on."""
    proxy = FunctionScorer(lambda prompt, completion, reference, metadata: metadata["proxy"],
                           name="proxy")
    members = [_member(j) for j in range(3)]
    scorer = rewardkit.load({"rewards": {
        "proxy": {"reward": "ensemble", "weight": 1.0, "options": {  # one member: the proxy
            "members": [proxy], "normalize": False}},
        "disagreement": {"reward": "ensemble", "weight": -2.0, "options": {
            "members": members, "combine": "std", "normalize": False}}}})
    agreed = Sample("p", "c", metadata={"proxy": 1.0, "r": [0.0, 0.0, 0.0]})
    disputed = Sample("p", "c", metadata={"proxy": 1.5, "r": [1.0, 2.0, 6.0]})
    a, d = scorer.score([agreed, disputed])
    assert a.value == pytest.approx(1.0)
    assert d.value == pytest.approx(1.5 - 2.0 * math.sqrt(14 / 3))
    assert d.value < a.value


def test_agreeing_members_have_no_uncertainty_and_no_penalty():
    (score,) = _ensemble(combine="mean_minus_std", lam=3.0).score([_sample([2.0, 2.0, 2.0])])
    assert score.uncertainty == 0.0 and score.value == 2.0


def test_a_failing_member_is_left_out_and_named_in_info():
    ens = _ensemble(fail={1: {7}}, combine="mean", min_members=2)
    good, bad = ens.score([_sample([1.0, 2.0, 6.0], 0), _sample([1.0, 2.0, 6.0], 7)])
    assert good.value == 3.0 and good.info["members_used"] == 3
    assert bad.ok and bad.value == pytest.approx(3.5)  # mean of 1 and 6
    assert bad.info["members_used"] == 2
    assert "member 1 cannot score this" in bad.info["member_errors"]["member_1"]
    assert set(bad.components) == {"member_0", "member_2"}
    assert bad.uncertainty == pytest.approx(2.5)


@pytest.mark.parametrize("combine", ["min", "uwo"])
def test_a_failing_member_does_not_silently_drop_out_of_min_or_uwo(combine):
    """By default every member must score: the failing member may be the pessimistic one, and
    dropping it would drop the penalty it carries."""
    ens = _ensemble(fail={0: {7}}, combine=combine)
    good, bad = ens.score([_sample([-5.0, 2.0, 6.0], 0), _sample([-5.0, 2.0, 6.0], 7)])
    assert good.ok and good.info["members_used"] == 3 and good.info["members_total"] == 3
    assert not bad.ok and bad.info["error_kind"] == "ensemble_members"
    assert "2 of 3 members" in bad.error and "member_0" in bad.info["member_errors"]


def test_fewer_members_than_the_minimum_is_an_error_score_and_the_batch_survives():
    ens = _ensemble(fail={0: {7}, 1: {7}}, combine="mean", min_members=2, error_value=-1.0)
    good, bad = ens.score([_sample([1.0, 2.0, 6.0], 0), _sample([1.0, 2.0, 6.0], 7)])
    assert good.ok and good.value == 3.0
    assert not bad.ok and bad.value == -1.0
    assert "1 of 3 members" in bad.error and "min_members=2" in bad.error
    assert bad.info["error_kind"] == "ensemble_members"
    assert set(bad.info["member_errors"]) == {"member_0", "member_1"}


def test_members_are_normalised_with_a_reference_set():
    # member 1 is member 0 scaled by 100 and shifted by 50: after standardisation they agree.
    ref = [{"prompt": "p", "completion": "c", "metadata": {"r": [x, 100 * x + 50]}}
           for x in (0.0, 1.0, 2.0, 3.0)]
    ens = rewardkit.load("ensemble", members=[_member(0), _member(1)], combine="uwo",
                         reference=ref)
    (score,) = ens.score([_sample([2.5, 300.0])])
    mean, std = 1.5, math.sqrt(1.25)  # of 0, 1, 2, 3
    assert score.components["member_0"] == pytest.approx((2.5 - mean) / std)
    assert score.components["member_1"] == pytest.approx((2.5 - mean) / std)
    assert score.uncertainty == pytest.approx(0.0, abs=1e-9)
    assert score.info["raw"] == {"member_0": 2.5, "member_1": 300.0}
    # fixed statistics: scoring again gives the same value
    assert ens.score([_sample([2.5, 300.0])])[0].value == pytest.approx(score.value)


def test_the_reference_set_can_be_a_jsonl_file(tmp_path):
    import json

    path = tmp_path / "ref.jsonl"
    path.write_text("".join(json.dumps({"prompt": "p", "completion": c}) + "\n"
                            for c in ("ab", "abcd", "abcdef")))  # lengths 2, 4, 6
    ens = rewardkit.load("ensemble", members=["tests.plugin_rewards:plugin_len"] * 2,
                         reference=str(path), min_members=1)
    (score,) = ens.score([Sample("p", "abcdefgh")])  # length 8: (8 - 4) / sqrt(8/3)
    assert score.components["member_0"] == pytest.approx(4 / math.sqrt(8 / 3))
    assert score.value == pytest.approx(4 / math.sqrt(8 / 3))


def test_running_normalisation_uses_the_statistics_seen_so_far():
    ens = rewardkit.load("ensemble", members=[_member(0), _member(1)], combine="mean")
    ens.score([_sample([0.0, 10.0]), _sample([2.0, 30.0])])  # means 1, 20; stds 1, 10
    (score,) = ens.score([_sample([1.0, 20.0])])  # now n=3: means 1, 20; stds √(2/3), √(200/3)
    assert score.components == {"member_0": pytest.approx(0.0), "member_1": pytest.approx(0.0)}
    (score,) = ens.score([_sample([4.0, 20.0])])
    # after 4 values 0, 2, 1, 4: mean 1.75, var 2.1875
    assert score.components["member_0"] == pytest.approx((4 - 1.75) / math.sqrt(2.1875))


def test_members_can_be_reward_names_and_specs_with_names():
    ens = rewardkit.load("ensemble", normalize=False, members=[
        "tests.plugin_rewards:plugin_len",
        {"reward": "tests.plugin_rewards:slow_len", "options": {"delay": 0.0}, "name": "slow"}])
    (score,) = ens.score([Sample("p", "four")])
    assert score.components == {"member_0": 4.0, "slow": 4.0} and score.value == 4.0


@pytest.mark.parametrize("options, message", [
    ({"combine": "median"}, "combine must be one of"),
    ({"lam": -1.0}, "lam must be"),
    ({"min_members": 4}, "min_members must be between 1 and 3"),
    ({"names": ["a", "a", "b"]}, "distinct names"),
])
def test_bad_options_are_refused_with_what_to_write(options, message):
    with pytest.raises(ConfigError, match=message):
        _ensemble(**options)


def test_members_or_model_is_required():
    with pytest.raises(ConfigError, match="either members"):
        rewardkit.load("ensemble")
    with pytest.raises(ConfigError, match="members\\[0\\]"):
        rewardkit.load("ensemble", members=[{"options": {}}])


# -- learned members and the K-head form ------------------------------------------------------

@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from rewardkit.models.multihead import split_heads
    from rewardkit.testing import make_tiny_reward_model

    root = tmp_path_factory.mktemp("ensemble-models")
    multi = make_tiny_reward_model(root / "multi", num_labels=3)
    singles = split_heads(multi, root / "singles")
    return {"multi": multi, "singles": singles, "root": root}


SAMPLES = [Sample("What is 2+2?", "4"), Sample("hello", "a longer answer to the prompt"),
           Sample([{"role": "user", "content": "hi"}], "there")]


def test_k_heads_score_as_k_single_head_models_on_the_same_trunk(heads):
    shared = rewardkit.load("ensemble", model=str(heads["multi"]), heads=3, normalize=False)
    separate = [rewardkit.load("reward_model", model=str(p)) for p in heads["singles"]]
    together = shared.score(SAMPLES)
    for j, scorer in enumerate(separate):
        alone = scorer.score(SAMPLES)
        for t, a in zip(together, alone):
            assert t.components[f"head_{j}"] == pytest.approx(a.value, abs=1e-5)
    # the heads differ, so there is an uncertainty to read
    assert all(s.uncertainty > 0 for s in together)


def test_stacked_heads_round_trip_and_refuse_different_trunks(heads, tmp_path):
    from rewardkit.models.loading import ModelLoadError
    from rewardkit.models.multihead import stack_heads
    from rewardkit.testing import make_tiny_reward_model

    stacked = stack_heads(heads["singles"], tmp_path / "stacked", head_names=["a", "b", "c"])
    ens = rewardkit.load("ensemble", model=str(stacked), normalize=False)
    ref = rewardkit.load("ensemble", model=str(heads["multi"]), normalize=False)
    for s, r in zip(ens.score(SAMPLES), ref.score(SAMPLES)):
        assert list(s.components) == ["a", "b", "c"]
        assert list(s.components.values()) == pytest.approx(list(r.components.values()),
                                                           abs=1e-5)
    other = make_tiny_reward_model(tmp_path / "other", seed=5)
    with pytest.raises(ModelLoadError, match="do not share one trunk"):
        stack_heads([heads["singles"][0], other], tmp_path / "bad")
    with pytest.raises(ModelLoadError, match="has 3 heads, not heads=2"):
        rewardkit.load("ensemble", model=str(heads["multi"]), heads=2)


def test_ensemble_of_reward_models_in_a_composition_config_file(heads, tmp_path):
    import yaml

    singles = [str(p) for p in heads["singles"]]
    config = {"reward": {"rewards": {"rm": {"reward": "ensemble", "weight": 2.0, "options": {
        "members": [{"reward": "reward_model", "options": {"model": p}} for p in singles],
        "combine": "mean_minus_std", "lam": 0.5, "normalize": False}}}}}
    path = tmp_path / "ens.yaml"
    path.write_text(yaml.safe_dump(config))
    scorer = rewardkit.load(str(path))
    direct = [rewardkit.load("reward_model", model=p) for p in singles]
    got = scorer.score(SAMPLES)
    for i, s in enumerate(got):
        values = [d.score([SAMPLES[i]])[0].value for d in direct]
        mean = sum(values) / 3
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / 3)
        assert s.components["rm"] == pytest.approx(mean - 0.5 * std, abs=1e-5)
        assert s.value == pytest.approx(2.0 * (mean - 0.5 * std), abs=1e-5)
        assert s.uncertainty == pytest.approx(2.0 * std, abs=1e-5)  # weight scales the spread


def test_a_head_that_returns_nan_is_left_out_of_that_sample(heads, monkeypatch):
    ens = rewardkit.load("ensemble", model=str(heads["multi"]), normalize=False,
                          min_members=2)
    real = ens.multihead.forward_logits

    def one_nan_head(rows):
        out = real(rows).clone()
        out[:, 1] = float("nan")
        return out

    monkeypatch.setattr(ens.multihead, "forward_logits", one_nan_head)
    (score,) = ens.score(SAMPLES[:1])
    assert score.ok and score.info["members_used"] == 2
    assert "head_1" in score.info["member_errors"] and set(score.components) == {"head_0",
                                                                                 "head_2"}
    assert score.value == pytest.approx((score.components["head_0"]
                                         + score.components["head_2"]) / 2)
