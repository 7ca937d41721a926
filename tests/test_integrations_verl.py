"""verl's custom reward function: reward chosen by data source, extra_info or config file."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import rewardkit
from rewardkit.compose import ConfigError
from rewardkit.integrations import verl
from rewardkit.integrations.verl import (
    CONFIG_ENV, UnmappedDataSourceError, compute_score, compute_score_batch, reward_spec,
)
from rewardkit.registry import unregister


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    verl.clear_cache()
    yield
    verl.clear_cache()


@pytest.fixture
def counting_reward():
    """A registered test reward that counts how often it is built and records its samples."""
    built, seen = [], []

    @rewardkit.reward("verl_probe", override=True)
    def verl_probe(prompt, completion, reference, metadata, bonus=0.0):
        seen.append((prompt, completion, reference, metadata))
        return float(completion.strip() == str(reference)) + bonus

    factory = verl_probe.scorer

    def counted(**options):
        built.append(options)
        return factory(**options)

    rewardkit.register("verl_probe", override=True)(counted)
    yield built, seen
    unregister("verl_probe")


def test_extra_info_reward_name_and_options_choose_the_reward():
    info = {"reward": "exact_match", "reward_options": {"case_sensitive": True}}
    assert compute_score("anything", "Paris", "Paris", info) == {"score": 1.0, "error": ""}
    assert compute_score("anything", "paris", "Paris", info)["score"] == 0.0
    assert compute_score("anything", "paris", "Paris", {"reward": "exact_match"})["score"] == 1.0


def test_extra_info_config_mapping_reports_components_as_floats():
    config = {"rewards": {"correct": {"reward": "exact_match"},
                          "boxed": {"reward": "regex", "weight": 0.5,
                                    "options": {"pattern": r"^\\boxed"}}}}
    out = compute_score("x", "\\boxed{4}", "\\boxed{4}", {"reward": config})
    assert out == {"score": 1.5, "correct": 1.0, "boxed": 1.0, "error": ""}


def test_scorers_are_built_once_per_process_and_see_the_row(counting_reward):
    built, seen = counting_reward
    info = {"reward": "verl_probe", "reward_options": {"bonus": 0.5}, "question": "2+2?",
            "index": 7}
    assert compute_score("src", "4", "4", info)["score"] == 1.5
    assert compute_score("src", "5", "4", info)["score"] == 0.5
    assert built == [{"bonus": 0.5}]
    prompt, completion, reference, metadata = seen[0]
    assert (prompt, completion, reference) == ("2+2?", "4", "4")
    assert metadata["data_source"] == "src" and metadata["index"] == 7


def test_unknown_data_source_error_lists_the_mapping_and_the_fixes():
    with pytest.raises(UnmappedDataSourceError) as err:
        compute_score("my/private_set", "a", "a")
    message = str(err.value)
    assert "'my/private_set'" in message
    assert "openai/gsm8k -> math {'preset': 'gsm8k'}" in message
    assert "codecontests -> code" in message
    assert "extra_info['reward']" in message and CONFIG_ENV in message
    assert "reward_kwargs.reward_config" in message


@pytest.mark.parametrize("source, reward", [
    ("openai/gsm8k", "math"), ("lighteval/MATH", "math"),
    ("DigitalLearningGmbH/MATH-lighteval", "math"), ("aime_2024", "math"),
    ("numina_olympiads", "math"), ("codecontests", "code"), ("apps", "code"),
    ("likaixin/TACO-verified", "code"), ("openai_humaneval", "code"),
])
def test_builtin_mapping_follows_verl_data_source_names(source, reward):
    assert reward_spec(source)["reward"] == reward


def test_gsm8k_uses_the_math_gsm8k_preset_and_math_lighteval_the_default():
    assert reward_spec("openai/gsm8k") == {"reward": "math", "options": {"preset": "gsm8k"}}
    assert reward_spec("lighteval/MATH") == {"reward": "math"}


def test_env_config_maps_data_sources_and_gives_a_default(tmp_path, monkeypatch):
    path = tmp_path / "verl_rewards.yaml"
    path.write_text(
        "data_sources:\n"
        "  'my/*': {reward: regex, options: {pattern: '^ok'}}\n"
        "  openai/gsm8k: exact_match\n"
        "reward: {reward: exact_match, options: {case_sensitive: true}}\n"
    )
    monkeypatch.setenv(CONFIG_ENV, str(path))
    assert compute_score("my/set", "ok then", "unused")["score"] == 1.0
    assert compute_score("openai/gsm8k", "72", "72")["score"] == 1.0  # overrides built-in math
    assert compute_score("elsewhere", "Yes", "yes")["score"] == 0.0  # file's default reward
    # a per-row choice still wins over the file
    assert compute_score("my/set", "nope", "nope", {"reward": "exact_match"})["score"] == 1.0


def test_env_config_toml_single_reward_scores_every_row(tmp_path, monkeypatch):
    path = tmp_path / "reward.toml"
    path.write_text('reward = "exact_match"\n')
    monkeypatch.setenv(CONFIG_ENV, str(path))
    assert compute_score("unmapped/source", "a", "a")["score"] == 1.0


def test_env_config_without_a_reward_is_a_clear_error(tmp_path, monkeypatch):
    path = tmp_path / "empty.yaml"
    path.write_text("train: {steps: 3}\n")
    monkeypatch.setenv(CONFIG_ENV, str(path))
    with pytest.raises(ConfigError, match=r"empty\.yaml: the file names no reward"):
        compute_score("x", "a", "a")


def test_reward_config_from_verl_reward_kwargs_overrides_the_env_file(tmp_path, monkeypatch):
    env_file = tmp_path / "env.yaml"
    env_file.write_text("reward: exact_match\n")
    kw_file = tmp_path / "kw.yaml"
    kw_file.write_text("reward: regex\noptions: {pattern: '^4$'}\n")
    monkeypatch.setenv(CONFIG_ENV, str(env_file))
    assert compute_score("x", "4", "5")["score"] == 0.0  # exact_match from the env file
    # verl merges custom_reward_function.reward_kwargs into every call
    assert compute_score("x", "4", "5", None, reward_config=str(kw_file))["score"] == 1.0
    out = compute_score_batch(["x", "y"], ["4", "5"], ["0", "0"], reward_config=str(kw_file))
    assert [r["score"] for r in out] == [1.0, 0.0]


def test_bad_sample_gets_an_error_and_keeps_the_same_keys():
    info = {"reward": "exact_match"}
    ok = compute_score("x", "a", "a", info)
    bad = compute_score("x", "a", None, info)
    assert bad["score"] == 0.0 and "needs a reference" in bad["error"]
    assert set(ok) == set(bad)


def test_batch_groups_rows_by_reward_and_keeps_order(counting_reward):
    built, seen = counting_reward
    out = compute_score_batch(
        ["a", "b", "a", "b"], ["1", "x", "2", "y"], ["1", "x", "3", "z"],
        [{"reward": "verl_probe"}, {"reward": "exact_match"}, {"reward": "verl_probe"},
         {"reward": "exact_match"}],
    )
    assert [r["score"] for r in out] == [1.0, 1.0, 0.0, 0.0]
    assert len(built) == 1 and [s[1] for s in seen] == ["1", "2"]
    with pytest.raises(ValueError, match="must align"):
        compute_score_batch(["a"], ["1", "2"], ["1"])


def test_numpy_ground_truth_from_parquet_is_passed_as_plain_values():
    np = pytest.importorskip("numpy")
    out = compute_score("x", "b", np.array(["a", "b"]), {"reward": "exact_match"})
    assert out["score"] == 1.0


def test_module_works_when_loaded_by_file_path_as_verl_does():
    # verl's custom_reward_function.path: the file is executed as a stand-alone module
    spec = importlib.util.spec_from_file_location("custom_module", Path(verl.__file__))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, "compute_score")
    assert fn(data_source="x", solution_str="a", ground_truth="a",
              extra_info={"reward": "exact_match"}) == {"score": 1.0, "error": ""}


def test_gsm8k_rows_are_scored_by_the_math_reward_when_installed():
    try:
        rewardkit.load("math")
    except (ImportError, AttributeError):
        pytest.skip("the math reward is not available in this install")
    right = compute_score("openai/gsm8k", "48 + 24 = 72 clips in total.\n#### 72", "72")
    wrong = compute_score("openai/gsm8k", "48 + 24 = 70 clips in total.\n#### 70", "72")
    assert right["score"] == 1.0 and right["error"] == ""
    assert wrong["score"] == 0.0


def test_code_contest_rows_are_scored_by_the_code_reward_when_installed():
    try:
        rewardkit.load("code").close()
    except (ImportError, AttributeError):
        pytest.skip("the code reward is not available in this install")
    # verl's code datasets keep the tests as a JSON string in reward_model.ground_truth
    tests = '{"inputs": ["1 2\\n", "3 4\\n"], "outputs": ["3\\n", "7\\n"]}'
    program = "```python\na, b = map(int, input().split())\nprint(a {} b)\n```"
    assert compute_score("codecontests", program.format("+"), tests)["score"] == 1.0
    assert compute_score("apps", program.format("-"), tests)["score"] == 0.0
