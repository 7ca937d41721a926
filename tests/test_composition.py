import math

import pytest

import rewardkit
from rewardkit import ConfigError, Sample

CONFIG = {
    "rewards": {
        "correct": {"reward": "exact_match", "weight": 1.0},
        "format": {"reward": "regex", "weight": 0.5, "options": {"pattern": "^A:"}},
    },
    "gates": [{"component": "format", "min": 1.0, "penalty": -1.0}],
}


def test_weighted_sum_with_components_recorded():
    s = rewardkit.load(CONFIG).score([Sample("q", "A: 4", "a: 4")])[0]
    assert s.value == 1.5 and s.components == {"correct": 1.0, "format": 1.0}


def test_failed_gate_sets_the_penalty():
    s = rewardkit.load(CONFIG).score([Sample("q", "4", "4")])[0]
    assert s.value == -1.0 and s.info["gate_failed"] == "format"
    assert s.components["correct"] == 1.0


def test_clip_bounds_the_total():
    cfg = {**CONFIG, "clip": [-0.5, 1.0]}
    values = [s.value for s in rewardkit.load(cfg).score([Sample("q", "A: 4", "a: 4"),
                                                          Sample("q", "4", "4")])]
    assert values == [1.0, -0.5]


def test_group_normalisation_is_per_prompt():
    cfg = {"rewards": {"em": "exact_match"}, "normalize": "group"}
    batch = [Sample("p1", "a", "a"), Sample("p1", "b", "a"), Sample("p2", "a", "a"),
             Sample("p2", "a", "a")]
    v = [s.value for s in rewardkit.load(cfg).score(batch)]
    assert v[0] == pytest.approx(1.0, abs=1e-4) and v[1] == pytest.approx(-1.0, abs=1e-4)
    assert v[2] == v[3] == 0.0  # zero-variance group


def test_group_key_from_metadata_overrides_prompt():
    cfg = {"rewards": {"em": "exact_match"}, "normalize": {"method": "group", "scale": False}}
    batch = [Sample("x", "a", "a", {"group": 1}), Sample("y", "b", "a", {"group": 1})]
    assert [s.value for s in rewardkit.load(cfg).score(batch)] == [0.5, -0.5]


def test_batch_and_running_normalisation():
    batch = [Sample("p", c, "a") for c in "aabb"]
    v = [s.value for s in rewardkit.load({"rewards": {"em": "exact_match"},
                                          "normalize": "batch"}).score(batch)]
    assert sum(v) == pytest.approx(0.0) and v[0] == pytest.approx(1.0, abs=1e-4)
    running = rewardkit.load({"rewards": {"em": "exact_match"}, "normalize": "running"})
    running.score([Sample("p", "a", "a")] * 3)  # history of 1.0s
    after = running.score([Sample("p", "b", "a")])[0].value
    assert after < 0  # below the running mean of 0.75


def test_component_error_marks_the_sample_and_uses_error_value():
    cfg = {"rewards": {"em": "exact_match"}, "error_value": -2.0}
    s = rewardkit.load(cfg).score([Sample("q", "x")])[0]  # no reference
    assert s.value == -2.0 and s.info["error"].startswith("em:") and s.info["error_kind"] == "bad_input"


def test_errored_samples_do_not_enter_normalisation():
    cfg = {"rewards": {"em": "exact_match"}, "normalize": "batch"}
    out = rewardkit.load(cfg).score([Sample("q", "a", "a"), Sample("q", "b", "a"), Sample("q", "x")])
    assert out[2].value == 0.0 and not out[2].ok
    assert out[0].value == pytest.approx(1.0, abs=1e-4)


def test_nested_composition():
    cfg = {"rewards": {"inner": {"reward": {"rewards": {"em": "exact_match"}}, "weight": 2.0}}}
    s = rewardkit.load(cfg).score([Sample("q", "a", "a")])[0]
    assert s.value == 2.0 and s.components["inner.em"] == 1.0


@pytest.mark.parametrize("cfg, match", [
    ({"rewards": {}}, "at least one reward"),
    ({"rewards": {"a": {"reward": "exact_match", "wieght": 1}}}, r"unknown key.*wieght"),
    ({"rewards": {"a": {"reward": "nope"}}}, r"rewards\.a: unknown reward 'nope'"),
    ({"rewards": {"a": "exact_match"}, "gates": [{"component": "b"}]}, "not a component"),
    ({"rewards": {"a": "exact_match"}, "normalize": "zscore"}, "normalize method"),
    ({"rewards": {"a": "exact_match"}, "clip": [1, 0]}, "low <= high"),
    ({"rewards": {"a": {"reward": "exact_match", "weight": "x"}}}, "must be a number"),
])
def test_bad_configs_say_what_is_wrong(cfg, match):
    with pytest.raises(ConfigError, match=match):
        rewardkit.load(cfg)


def test_yaml_and_toml_files_load_the_same_composition(tmp_path):
    (tmp_path / "r.yaml").write_text(
        "reward:\n  rewards:\n    em: {reward: exact_match, weight: 2}\n  clip: [0, 1.5]\n"
        "train:\n  steps: 3\n")
    (tmp_path / "r.toml").write_text(
        "[reward]\nclip = [0, 1.5]\n[reward.rewards.em]\nreward = 'exact_match'\nweight = 2\n")
    for name in ("r.yaml", "r.toml"):
        s = rewardkit.load(str(tmp_path / name)).score([Sample("q", "a", "a")])[0]
        assert s.value == 1.5 and s.components == {"em": 1.0}


def test_unparsable_config_file_names_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rewards: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        rewardkit.load(str(bad))


def test_uncertainty_combines_in_quadrature():
    class Unc(rewardkit.Scorer):
        def score_one(self, sample):
            return rewardkit.Score(1.0, uncertainty=0.3)

    from rewardkit.compose import Component, Composition

    comp = Composition([Component("a", Unc(), 1.0), Component("b", Unc(), 2.0)])
    s = comp.score([Sample("q", "c")])[0]
    assert s.uncertainty == pytest.approx(math.sqrt(0.3**2 + 0.6**2))
