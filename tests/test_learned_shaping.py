"""The `shaped` reward: PAR, centring and clipping against a reference completion's reward,
checked against hand-computed values; references scored once per (prompt, reference); errors
per sample; the `shape:` option of a composition component."""
from __future__ import annotations

import math

import pytest

import rewardkit
from rewardkit import Sample, Score
from rewardkit.compose import ConfigError, Composition
from rewardkit.models.learned_shaping import ShapedReward
from rewardkit.scorer import Scorer


class Length(Scorer):
    """r = len(completion) / 10 (+ an uncertainty of 0.5); counts every completion it scores;
    fails on completions containing "boom"."""

    name = "length"

    def __init__(self, uncertainty=None):
        self.seen: list[str] = []
        self.calls = 0
        self.uncertainty = uncertainty

    def score_batch(self, samples):
        self.calls += 1
        out = []
        for s in samples:
            self.seen.append(s.completion)
            if "boom" in s.completion:
                out.append(Score.from_error("cannot score boom", kind="boom"))
            else:
                out.append(Score(len(s.completion) / 10, {"chars": len(s.completion)},
                                 uncertainty=self.uncertainty, info={"inner": True}))
        return out


def sig(x):
    return 1 / (1 + math.exp(-x))


def _s(prompt, completion, ref="ref", **meta):
    return Sample(prompt, completion, metadata={"reference_completion": ref, **meta}
                  if ref is not None else meta)


def test_par_is_the_sigmoid_of_the_difference_and_keeps_the_inner_score():
    shaped = ShapedReward(Length(), method="par")
    a, b = shaped.score([_s("p", "abcdefgh", ref="abc"), _s("p", "a", ref="abcdef")])
    assert a.value == pytest.approx(sig(0.8 - 0.3), abs=1e-12)
    assert b.value == pytest.approx(sig(0.1 - 0.6), abs=1e-12)
    assert a.info["r"] == pytest.approx(0.8) and a.info["r_ref"] == pytest.approx(0.3)
    assert a.components == {"chars": 8} and a.info["inner"] is True
    assert 0 < b.value < 0.5 < a.value < 1


def test_par_temperature_divides_the_difference():
    (s,) = ShapedReward(Length(), method="par", temperature=4.0).score(
        [_s("p", "abcdefghij", ref="ab")])
    assert s.value == pytest.approx(sig((1.0 - 0.2) / 4.0), abs=1e-12)


def test_center_is_the_difference_and_clip_bounds_it_last():
    inner = Length()
    centred = ShapedReward(inner, method="center")
    (s,) = centred.score([_s("p", "x" * 30, ref="x" * 5)])
    assert s.value == pytest.approx(3.0 - 0.5)
    clipped = ShapedReward(Length(), method="center", clip=[-1.0, 1.0])
    hi, lo, mid = clipped.score([_s("p", "x" * 30, ref="x" * 5), _s("p", "x", ref="x" * 40),
                                 _s("p", "x" * 7, ref="x" * 5)])
    assert hi.value == 1.0 and hi.info["clipped_from"] == pytest.approx(2.5)
    assert lo.value == -1.0 and lo.info["clipped_from"] == pytest.approx(-3.9)
    assert mid.value == pytest.approx(0.2) and "clipped_from" not in mid.info
    (p,) = ShapedReward(Length(), method="par", clip=[0.2, 0.6]).score(
        [_s("p", "x" * 30, ref="x")])
    assert p.value == 0.6  # σ(2.9) ≈ 0.95, clipped after the sigmoid


def test_none_only_clips_and_needs_no_reference():
    (s,) = ShapedReward(Length(), method="none", clip=[0, 0.5]).score(
        [Sample("p", "x" * 9)])
    assert s.value == 0.5 and "r_ref" not in s.info


def test_uncertainty_is_propagated_to_the_difference_and_through_the_sigmoid():
    (c,) = ShapedReward(Length(uncertainty=0.5), method="center").score(
        [_s("p", "x" * 12, ref="x" * 2)])
    assert c.uncertainty == pytest.approx(math.sqrt(0.5 ** 2 + 0.5 ** 2))
    (p,) = ShapedReward(Length(uncertainty=0.5), method="par", temperature=2.0).score(
        [_s("p", "x" * 12, ref="x" * 2)])
    q = sig(1.0 / 2.0)
    assert p.uncertainty == pytest.approx(q * (1 - q) * math.sqrt(0.5) / 2.0)


def test_the_reference_is_scored_once_per_distinct_prompt_and_reference_in_one_call():
    inner = Length()
    shaped = ShapedReward(inner, method="par")
    group_a = [_s("prompt A", c, ref="gold A") for c in ("one", "two", "three", "four")]
    group_b = [_s("prompt B", c, ref="gold B") for c in ("five", "six")]
    other_prompt_same_ref = [_s("prompt C", "seven", ref="gold A")]
    shaped.score(group_a + group_b + other_prompt_same_ref)
    assert inner.calls == 1  # completions and references in one call of the inner reward
    assert inner.seen.count("gold A") == 2  # prompts A and C: two distinct pairs
    assert inner.seen.count("gold B") == 1
    assert len(inner.seen) == 7 + 3


def test_a_missing_reference_is_an_error_for_that_sample_only():
    shaped = ShapedReward(Length(), method="center", error_value=-9.0)
    good, missing, nested = shaped.score([
        _s("p", "abcd", ref="ab"), _s("p", "abcd", ref=None, other="x"),
        Sample("p", "abcd", metadata={"refs": {"chosen": "a"}})])
    assert good.ok and good.value == pytest.approx(0.2)
    assert not missing.ok and missing.value == -9.0
    assert missing.info["error_kind"] == "bad_input"
    assert "reference_completion" in missing.error and "reference_field" in missing.error
    assert not nested.ok  # the default field is not there either
    (dotted,) = ShapedReward(Length(), method="center", reference_field="refs.chosen").score(
        [Sample("p", "abcd", metadata={"refs": {"chosen": "a"}})])
    assert dotted.value == pytest.approx(0.3)


def test_an_inner_error_on_the_sample_or_its_reference_errs_that_sample_only():
    shaped = ShapedReward(Length(), method="par", error_value=-1.0)
    ok, own, ref = shaped.score([_s("p", "abc", ref="a"), _s("p", "boom", ref="a"),
                                 _s("q", "abc", ref="boom ref")])
    assert ok.ok and ok.value == pytest.approx(sig(0.2))
    assert not own.ok and own.value == -1.0 and "cannot score boom" in own.error
    assert not ref.ok and ref.value == -1.0
    assert "reference completion could not be scored" in ref.error
    assert ref.info["error_kind"] == "boom"


def test_load_by_name_with_a_reward_and_its_options():
    shaped = rewardkit.load("shaped", reward="tests.plugin_rewards:plugin_len",
                            method="center", clip=[-5, 5])
    a, b = shaped.score([_s("p", "abcdef", ref="ab"), _s("p", "a", ref="abcdefghijkl")])
    assert a.value == pytest.approx(4.0) and b.value == -5.0  # 1 - 12 = -11, clipped


def test_shape_in_a_composition_component():
    config = {"rewards": {
        "rm": {"reward": "tests.plugin_rewards:plugin_len", "weight": 2.0,
               "shape": {"method": "par", "temperature": 2.0, "reference_field": "ref"}},
        "raw": {"reward": "tests.plugin_rewards:plugin_len", "weight": 0.0}}}
    scorer = rewardkit.load(config)
    assert isinstance(scorer, Composition)
    (s,) = scorer.score([Sample("p", "abcdef", metadata={"ref": "ab"})])
    assert s.components["rm"] == pytest.approx(sig((6 - 2) / 2.0))
    assert s.value == pytest.approx(2.0 * sig(2.0))
    assert s.info["rm"]["r"] == 6.0 and s.info["rm"]["r_ref"] == 2.0
    assert s.components["raw"] == 6.0


def test_shape_in_a_config_file(tmp_path):
    import yaml

    path = tmp_path / "shaped.yaml"
    path.write_text(yaml.safe_dump({"reward": {"rewards": {"rm": {
        "reward": "tests.plugin_rewards:plugin_len",
        "shape": {"method": "center", "clip": [-1, 1]}}}}}))
    (s,) = rewardkit.load(str(path)).score([_s("p", "abcdef", ref="abcd")])
    assert s.value == 1.0 and s.info["rm"]["clipped_from"] == 2.0


@pytest.mark.parametrize("shape, message", [
    ({"method": "ratio"}, "method must be one of par, center, none"),
    ({"metod": "par"}, r"unknown key\(s\) \['metod'\]"),
    ({"clip": [1, -1]}, r"clip must be \[low, high\]"),
    ({"clip": 5}, r"clip must be \[low, high\]"),
    ({"temperature": 0}, "temperature must be a number > 0"),
    ({"reference_field": ""}, "reference_field must be"),
    ("par", "shape must be a mapping"),
])
def test_bad_shape_options_are_config_errors_naming_the_component(shape, message):
    config = {"rewards": {"rm": {"reward": "tests.plugin_rewards:plugin_len", "shape": shape}}}
    with pytest.raises(ConfigError, match=message) as err:
        rewardkit.load(config)
    assert "rewards.rm" in str(err.value)


def test_bad_direct_options_are_config_errors():
    with pytest.raises(ConfigError, match="not both or neither"):
        ShapedReward()
    with pytest.raises(ConfigError, match="not both or neither"):
        ShapedReward(Length(), reward="tests.plugin_rewards:plugin_len")
    with pytest.raises(ConfigError, match="temperature"):
        ShapedReward(Length(), temperature=-1)


def test_par_on_a_tiny_reward_model(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from rewardkit.testing import make_tiny_reward_model

    model = str(make_tiny_reward_model(tmp_path / "rm"))
    rm = rewardkit.load("reward_model", model=model)
    shaped = rewardkit.load("shaped", reward="reward_model", options={"model": model},
                            method="par", clip=[0.05, 0.95])
    samples = [_s("What is 2+2?", "4", ref="four"), _s("What is 2+2?", "5", ref="four"),
               _s("hello", "a longer answer", ref="hi")]
    got = shaped.score(samples)
    own = rm.score(samples)
    refs = rm.score([Sample(s.prompt, s.metadata["reference_completion"]) for s in samples])
    for g, o, r in zip(got, own, refs):
        assert g.ok
        assert g.info["r"] == pytest.approx(o.value, abs=1e-5)
        assert g.info["r_ref"] == pytest.approx(r.value, abs=1e-5)
        want = min(max(sig(o.value - r.value), 0.05), 0.95)
        assert g.value == pytest.approx(want, abs=1e-5)
        assert g.info["logit"] == pytest.approx(o.value, abs=1e-5)  # inner info kept
