"""The adapters under the call shapes the trainers really use, and the silent wrong rewards seen
where users plug in: ragged verl metrics, Parquet's None-valued options, group normalisation of
groups of one, composition names, GSM8K golds."""
from __future__ import annotations

import math
import warnings

import pytest

import rewardkit
from rewardkit import Sample
from rewardkit.integrations.trl import to_trl
from rewardkit.integrations.verl import compute_score, compute_score_batch
from rewardkit.normalize import NormalizeWarning
from tests.test_integrations_verl import fresh_cache  # noqa: F401 - autouse: no config, no cache

COMPOSITION = {"rewards": {"correct": {"reward": "exact_match"},
                           "short": {"reward": "regex", "weight": 0.1,
                                     "options": {"pattern": r"^\S{1,8}$"}}}}


# -- verl: the call shapes of its reward managers ---------------------------------------------
def stack_like_reward_loop(results):
    """verl's RewardLoopManager: the keys of the batch's first row, then one array per key."""
    keys = list(results[0].keys())
    return {k: [r[k] for r in results] for k in keys}


def stack_like_batch_manager(results):
    """verl's batch/naive managers: every key of every row appended to a per-key list; the
    trainer later needs each list to have the batch's length."""
    lists: dict[str, list] = {}
    for r in results:
        for k, v in r.items():
            lists.setdefault(k, []).append(v)
    return lists


def test_mixed_batch_returns_the_same_keys_for_every_row():
    infos = [{"reward": "exact_match"}, {"reward": COMPOSITION}, {"reward": "regex",
             "reward_options": {"pattern": "^a"}}]
    out = compute_score_batch(data_sources=["a", "b", "c"], solution_strs=["a", "a", "a"],
                              ground_truths=["a", "a", "b"], extra_infos=infos)
    assert len({tuple(r) for r in out}) == 1
    lists = stack_like_batch_manager(out)
    assert all(len(v) == 3 for v in lists.values())
    assert stack_like_reward_loop(out)["score"] == [1.0, pytest.approx(1.1), 1.0]
    # a component the row's reward does not have is NaN (not applicable), never a made-up 0.0
    assert math.isnan(out[0]["correct"]) and out[1]["correct"] == 1.0
    assert [r["error"] for r in out] == ["", "", ""]


def test_reward_loop_call_shape_with_its_extra_keywords():
    """The reward loop calls compute_score per row with keywords, adding the reward router's
    address and the reward model's tokenizer when a reward model is configured."""
    results = [compute_score(data_source="openai/gsm8k", solution_str=s, ground_truth="72",
                             extra_info={"reward": "exact_match", "num_turns": None},
                             reward_router_address="127.0.0.1:1", reward_model_tokenizer=None)
               for s in ("72", "70")]
    stacked = stack_like_reward_loop(results)
    assert stacked["score"] == [1.0, 0.0] and stacked["error"] == ["", ""]


def test_reward_loop_with_mixed_compositions_can_report_score_and_error_only():
    rows = [({"reward": COMPOSITION}, "a"), ({"reward": "exact_match"}, "b")]
    results = [compute_score("x", s, s, info, components=False) for info, s in rows]
    assert [set(r) for r in results] == [{"score", "error"}] * 2
    stack_like_reward_loop(results)  # no KeyError


def test_batch_manager_call_shape_with_numpy_columns_and_reward_kwargs(tmp_path):
    np = pytest.importorskip("numpy")
    config = tmp_path / "r.yaml"
    config.write_text("reward: exact_match\n")
    out = compute_score_batch(data_sources=np.array(["x", "y"], dtype=object),
                              solution_strs=["a", "b"], ground_truths=[np.str_("a"), "c"],
                              extra_infos=np.array([{"index": 0}, {"index": 1}], dtype=object),
                              reward_config=str(config))
    assert [r["score"] for r in out] == [1.0, 0.0]


def test_none_valued_reward_options_from_parquet_are_dropped(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [{"extra_info": {"reward": "regex", "reward_options": {"pattern": "^4$",
                                                                   "case_sensitive": None}}},
            {"extra_info": {"reward": "exact_match",
                            "reward_options": {"case_sensitive": True}}}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    back = pq.read_table(tmp_path / "t.parquet").to_pylist()
    assert back[1]["extra_info"]["reward_options"]["pattern"] is None  # Parquet's union of keys
    infos = [r["extra_info"] for r in back]
    out = compute_score_batch(["a", "b"], ["4", "Paris"], ["", "Paris"], infos)
    assert [r["score"] for r in out] == [1.0, 1.0] and [r["error"] for r in out] == ["", ""]


# -- normalize: group ---------------------------------------------------------------------------
GROUPED = {"rewards": {"correct": {"reward": "exact_match"}}, "normalize": "group"}


def test_group_normalisation_warns_once_on_groups_of_one_and_keeps_the_raw_total():
    scorer = rewardkit.load(GROUPED)
    with pytest.warns(NormalizeWarning, match="alone in their group") as caught:
        first = scorer.score([Sample("p1", "a", "a"), Sample("p2", "b", "a")])
        scorer.score([Sample("p3", "a", "a")])
    assert len(caught) == 1
    assert [s.value for s in first] == [0.0, 0.0]  # what group normalisation gives a singleton
    assert [s.info["raw_total"] for s in first] == [1.0, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grouped = rewardkit.load(GROUPED).score([Sample("p", "a", "a"), Sample("p", "b", "a")])
    assert grouped[0].value > 0 > grouped[1].value
    assert [s.info["raw_total"] for s in grouped] == [1.0, 0.0]


def test_raw_total_reaches_verl_and_trl_logs():
    out = compute_score_batch(["x", "x"], ["a", "b"], ["a", "a"],
                              [{"reward": GROUPED, "question": "q"}] * 2)
    assert [r["raw_total"] for r in out] == [1.0, 0.0]
    logged = {}
    reward = to_trl(GROUPED, name="grouped")
    values = reward(prompts=["q", "q"], completions=["a", "b"], reference=["a", "a"],
                    log_metric=lambda k, v: logged.__setitem__(k, v))
    assert values[0] > 0 > values[1]
    assert logged["grouped/raw_total"] == 0.5


# -- TRL ------------------------------------------------------------------------------------------
def test_a_composition_file_is_logged_under_the_file_name(tmp_path):
    path = tmp_path / "math_and_format.yaml"
    path.write_text("reward:\n  rewards:\n    correct: exact_match\n"
                    "    fmt: {reward: regex, options: {pattern: 'a'}}\n")
    assert to_trl(str(path)).__name__ == "math_and_format"
    named = tmp_path / "other.yaml"
    named.write_text("reward:\n  name: my_reward\n  rewards: {correct: exact_match}\n")
    assert to_trl(str(named)).__name__ == "my_reward"


def test_gsm8k_gold_through_to_trl_with_the_answer_column():
    """The README's headline path: GSM8K's `answer` column is a worked solution ending in
    `#### 72`; a right completion must earn 1.0, and end tokens must not matter."""
    reward = to_trl("math", reference_column="answer")
    gold = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72"
    out = reward(prompts=["q"] * 3,
                 completions=["48 + 24 = 72, so the answer is \\boxed{72}.",
                              "She sold 72 clips.\n#### 72<|im_end|>",
                              "\\boxed{70}"],
                 answer=[gold, gold, gold])
    assert out == [1.0, 1.0, 0.0]
