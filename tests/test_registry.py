import pytest

import rewardkit
from rewardkit import Sample, Scorer
from rewardkit.registry import UnknownRewardError, unregister


def test_list_rewards_has_builtins_with_descriptions():
    listed = rewardkit.list_rewards()
    for name in ("exact_match", "regex", "math", "code"):
        assert listed[name]


def test_unknown_reward_suggests_and_lists_available():
    with pytest.raises(UnknownRewardError) as err:
        rewardkit.load("exact_mach")
    assert "Did you mean 'exact_match'" in str(err.value) and "regex" in str(err.value)


def test_bad_option_names_the_accepted_ones():
    with pytest.raises(TypeError, match="Accepted options: .*case_sensitive"):
        rewardkit.load("exact_match", casesensitive=True)


def test_reward_decorator_makes_a_loadable_scorer_with_options():
    @rewardkit.reward("length_bonus_test", description="longer is better")
    def length_bonus(prompt, completion, reference, scale=1.0):
        return scale * len(completion)

    try:
        assert length_bonus("p", "abc", None) == 3  # still a plain function
        scorer = rewardkit.load("length_bonus_test", scale=2.0)
        assert scorer.name == "length_bonus_test"
        assert scorer.score([Sample("p", "abcd")])[0].value == 8.0
        assert rewardkit.list_rewards()["length_bonus_test"] == "longer is better"
    finally:
        unregister("length_bonus_test")


def test_registering_a_taken_name_fails_unless_override():
    with pytest.raises(ValueError, match="already registered"):
        rewardkit.register("exact_match")(type("X", (Scorer,), {}))


def test_function_reward_can_return_value_with_info():
    @rewardkit.reward("with_info_test")
    def with_info(prompt, completion, reference):
        return {"value": 0.5, "why": "half"}

    try:
        s = rewardkit.load("with_info_test").score([Sample("p", "c")])[0]
        assert (s.value, s.info) == (0.5, {"why": "half"})
    finally:
        unregister("with_info_test")


def test_entry_point_rewards_are_discovered(monkeypatch):
    from importlib import metadata

    from rewardkit import registry

    ep = metadata.EntryPoint("plugin_len", "tests.plugin_rewards:plugin_len",
                             registry.ENTRY_POINT_GROUP)

    def fake(group=None):
        return [ep] if group == registry.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(registry.importlib_metadata, "entry_points", fake)
    assert "plugin_len" in rewardkit.list_rewards()
    assert rewardkit.load("plugin_len").score([Sample("p", "abc")])[0].value == 3.0


def test_import_path_loads_a_function_reward():
    scorer = rewardkit.load("tests.plugin_rewards:plugin_len")
    assert scorer.score([Sample("p", "ab")])[0].value == 2.0


def test_function_reward_rejects_unknown_options_at_load():
    with pytest.raises(TypeError, match="its options are: delay"):
        rewardkit.load("tests.plugin_rewards:slow_len", dealy=1)
