"""A dataset row is data, not code: what it may choose, and what it can never make run."""
from __future__ import annotations

import sys

import pytest

import rewardkit
from rewardkit.integrations.verl import clear_cache, compute_score
from rewardkit.registry import OPERATOR_OPTIONS, UntrustedRewardError, load_untrusted


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def tripwire(tmp_path, monkeypatch):
    """A module that leaves a file behind when it is imported, and one when its attribute is
    called: an import path naming it shows whether data got anything imported or run."""
    module = tmp_path / "rk_tripwire.py"
    module.write_text(
        "import pathlib\n"
        f"pathlib.Path({str(tmp_path / 'imported')!r}).touch()\n"
        "def run(**options):\n"
        f"    pathlib.Path({str(tmp_path / 'called')!r}).touch()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("rk_tripwire", None)


def _untouched(where) -> bool:
    return not (where / "imported").exists() and not (where / "called").exists()


def test_a_row_naming_an_import_path_runs_nothing(tripwire):
    with pytest.raises(UntrustedRewardError, match="import path"):
        compute_score("x", "a", "a", {"reward": "rk_tripwire:run",
                                      "reward_options": {"args": ["true"]}})
    assert _untouched(tripwire)


def test_a_row_naming_subprocess_run_runs_no_command(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(UntrustedRewardError):
        compute_score("x", "a", "a", {"reward": "subprocess:run",
                                      "reward_options": {"args": ["touch", str(marker)]}})
    assert not marker.exists()


@pytest.mark.parametrize("row_reward", [
    {"rewards": {"ok": {"reward": "exact_match"}, "evil": {"reward": "rk_tripwire:run"}}},
    {"reward": "rk_tripwire:run"},
    {"rewards": {"nested": {"reward": {"rewards": {"deep": {"reward": "rk_tripwire:run"}}}}}},
])
def test_a_composition_in_a_row_cannot_name_an_import_path(tripwire, row_reward):
    with pytest.raises(ValueError, match="chosen by data is an import path"):
        compute_score("x", "a", "a", {"reward": row_reward})
    assert _untouched(tripwire)


@pytest.mark.parametrize("reward, options", [
    ("cosine_length", {"reward": "rk_tripwire:run", "unit": "chars"}),
    ("ensemble", {"members": ["exact_match", "rk_tripwire:run"]}),
    ("shaped", {"reward": "rk_tripwire:run"}),
])
def test_an_option_that_loads_a_reward_cannot_name_an_import_path(tripwire, reward, options):
    with pytest.raises(ValueError, match="chosen by data is an import path"):
        compute_score("x", "a", "a", {"reward": reward, "reward_options": options})
    assert _untouched(tripwire)


def test_a_row_cannot_name_a_config_file(tmp_path):
    config = tmp_path / "r.yaml"
    config.write_text("reward: exact_match\n")
    with pytest.raises(UntrustedRewardError, match="file path"):
        compute_score("x", "a", "a", {"reward": str(config)})


@pytest.mark.parametrize("option", ["trust_remote_code", "model", "judge", "url", "isolation"])
def test_a_row_cannot_set_an_operator_option(option):
    assert option in OPERATOR_OPTIONS
    with pytest.raises(UntrustedRewardError, match=option):
        compute_score("x", "a", "a", {"reward": "exact_match",
                                      "reward_options": {option: True}})


def test_a_row_still_picks_a_registered_reward_with_plain_options():
    out = compute_score("x", "Paris", "paris", {"reward": "exact_match",
                                                "reward_options": {"case_sensitive": True}})
    assert out["score"] == 0.0 and out["error"] == ""
    assert compute_score("x", "Paris", "paris", {"reward": "exact_match"})["score"] == 1.0


def test_the_operator_config_may_still_use_an_import_path(tmp_path, monkeypatch):
    module = tmp_path / "rk_operator_reward.py"
    module.write_text("def reward(prompt, completion, reference, **kw):\n"
                      "    return 0.5\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "verl.yaml"
    config.write_text("data_sources:\n  mine: rk_operator_reward:reward\n")
    try:
        assert compute_score("mine", "a", "b", reward_config=str(config))["score"] == 0.5
    finally:
        sys.modules.pop("rk_operator_reward", None)


def test_load_refuses_a_target_that_is_not_a_reward_before_calling_it(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(TypeError, match="not a reward"):
        rewardkit.load("subprocess:Popen", args=["touch", str(marker)])
    with pytest.raises(TypeError, match="not a reward"):
        rewardkit.load("os:system", command=f"touch {marker}")
    assert not marker.exists()


def test_load_untrusted_takes_only_names_and_mappings(tmp_path):
    with pytest.raises(UntrustedRewardError):
        load_untrusted(tmp_path / "r.yaml")
    assert load_untrusted("exact_match").name == "exact_match"
