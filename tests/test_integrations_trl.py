"""rewardkit rewards behind TRL's reward-function signature, and inside TRL's real GRPOTrainer."""
from __future__ import annotations

import math
import pickle

import pytest

import rewardkit
from rewardkit import FunctionScorer
from rewardkit.integrations.trl import TRLReward, to_trl


def test_named_reward_reads_reference_column_and_is_named_for_trl_logs():
    reward = to_trl("exact_match", reference_column="answer")
    assert reward.__name__ == "exact_match"
    out = reward(prompts=["2+3?", "4*5?"], completions=[" 5. ", "21"], answer=["5", "20"])
    assert out == [1.0, 0.0]


def test_package_level_to_trl_builds_the_same_adapter_with_options():
    reward = rewardkit.to_trl("exact_match", case_sensitive=True)
    assert isinstance(reward, TRLReward)
    assert reward(prompts=["p", "p"], completions=["Paris", "paris"],
                  reference=["Paris", "Paris"]) == [1.0, 0.0]


def test_chat_messages_are_scored_on_the_last_assistant_turn():
    prompts = [[{"role": "user", "content": "Capital of France?"}]] * 2
    completions = [[{"role": "assistant", "content": "Paris"}],
                   [{"role": "assistant", "content": "Paris"},
                    {"role": "tool", "content": "lookup ok"},
                    {"role": "assistant", "content": "Lyon"}]]
    reward = to_trl("exact_match")
    assert reward(prompts=prompts, completions=completions, reference=["Paris", "Paris"]) == [1.0, 0.0]


def test_metadata_holds_the_rows_other_columns_but_not_trl_extras():
    seen = []

    def record(prompt, completion, reference, metadata):
        seen.append((prompt, reference, metadata))
        return 1.0

    reward = to_trl(FunctionScorer(record, name="record"), reference_column="answer")
    reward(prompts=["a", "b"], completions=["x", "y"], answer=["1", "2"], level=[3, 5],
           completion_ids=[[1], [2]], trainer_state=object(), log_extra=print,
           some_future_trl_extra=7)
    assert seen == [("a", "1", {"level": 3}), ("b", "2", {"level": 5})]


def test_failed_samples_send_none_by_default_and_error_value_when_given():
    rows = dict(prompts=["p"] * 3, completions=["5", "5", 5], reference=["5", None, "5"])
    assert to_trl("exact_match")(**rows) == [1.0, None, None]
    assert to_trl("exact_match", error_value=-1.0)(**rows) == [1.0, -1.0, -1.0]


def test_missing_reference_column_names_the_columns_and_the_fix():
    reward = to_trl("exact_match", reference_column="answer")
    with pytest.raises(ValueError, match=r"'answer'.*\['gold', 'level'\].*reference_column"):
        reward(prompts=["p"], completions=["c"], gold=["c"], level=[1])


def test_reference_free_reward_needs_no_column():
    reward = to_trl("regex", reference_column=None, pattern=r"\\boxed\{")
    assert reward(prompts=["p", "p"], completions=["\\boxed{4}", "4"]) == [1.0, 0.0]


def test_component_means_and_error_rate_go_to_trl_log_metric():
    config = {"rewards": {"correct": {"reward": "exact_match"},
                          "digit": {"reward": "regex", "weight": 0.5,
                                    "options": {"pattern": r"\d"}}}}
    logged = {}
    reward = to_trl(config, name="mix")
    values = reward(prompts=["p"] * 4, completions=["4", "four", "4", "x"],
                    reference=["4", "4", "5", "x"],
                    log_metric=lambda name, value: logged.__setitem__(name, value))
    assert values == [1.5, 0.0, 0.5, 1.0]
    assert logged["mix/correct"] == pytest.approx(0.5)
    assert logged["mix/digit"] == pytest.approx(0.5)
    assert logged["mix/error_rate"] == 0.0


def test_adapter_pickles_with_its_scorer_and_name():
    reward = pickle.loads(pickle.dumps(to_trl("exact_match", name="em", reference_column="a")))
    assert reward.__name__ == "em"
    assert reward(prompts=["p"], completions=["yes"], a=["yes"]) == [1.0]


def test_composition_file_with_running_normalisation_pickles_and_scores_alike(tmp_path,
                                                                              monkeypatch):
    # a running normaliser holds a lock, which pickle refuses: the adapter pickles its spec
    (tmp_path / "mix.yaml").write_text(
        "rewards:\n  correct: {reward: exact_match}\n"
        "  digits: {reward: regex, weight: 0.5, options: {pattern: '^[0-9]+$'}}\n"
        "gates: [{component: digits, min: 1.0, penalty: -1.0}]\n"
    )
    monkeypatch.chdir(tmp_path)
    reward = to_trl("mix.yaml", reference_column="answer", error_value=-2.0)
    monkeypatch.chdir("/")  # the unpickled copy finds the file from another directory
    copy = pickle.loads(pickle.dumps(reward))
    args = dict(prompts=[[{"role": "user", "content": "1+1="}]] * 3,
                completions=[[{"role": "assistant", "content": c}] for c in ("2", "3", "x")],
                answer=["2", "2", "2"])
    assert copy(**args) == reward(**args) == [1.5, 0.5, -1.0]
    assert (copy.__name__, copy.reference_column, copy.error_value) == \
        (reward.__name__, "answer", -2.0)
    running = to_trl({"rewards": {"em": {"reward": "exact_match"}}, "normalize": "running"})
    assert pickle.loads(pickle.dumps(running)).__name__ == running.__name__


def test_options_for_a_built_scorer_are_refused():
    with pytest.raises(TypeError, match="already built Scorer"):
        to_trl(rewardkit.load("exact_match"), case_sensitive=True)


def test_grpo_trainer_trains_two_steps_with_a_rewardkit_reward(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("torch")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from rewardkit.testing import make_tiny_causal_lm

    model_dir = make_tiny_causal_lm(tmp_path / "model")
    gold = {"What is 2 + 3?": "5", "What is 4 * 5?": "20"}
    calls: list[tuple[str, str, dict]] = []
    returned: list[list[float | None]] = []

    def judge(prompt, completion, reference, metadata):
        calls.append((prompt, reference, dict(metadata)))
        if metadata["topic"] == "broken":
            raise ValueError("cannot judge this row")
        return float(len(completion) % 3)

    inner = to_trl(FunctionScorer(judge, name="judge"), reference_column="answer")

    def recording_judge(prompts, completions, **kwargs):
        out = inner(prompts, completions, **kwargs)
        returned.append(out)
        return out

    recording_judge.__name__ = inner.__name__
    dataset = Dataset.from_dict({
        "prompt": [[{"role": "user", "content": q}] for q in gold],
        "answer": list(gold.values()),
        "topic": ["add", "broken"],
    })
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, fp16=False,
        per_device_train_batch_size=4, num_generations=2, max_completion_length=8,
        max_steps=2, logging_steps=1, learning_rate=1e-3, report_to="none",
        save_strategy="no", seed=0,
    )
    trainer = GRPOTrainer(model=str(model_dir), args=args, train_dataset=dataset,
                          reward_funcs=[recording_judge,
                                        to_trl("exact_match", reference_column="answer")])
    trainer.train()

    assert trainer.state.global_step == 2
    assert len(calls) == 2 * 4  # 2 steps x (2 prompts x 2 generations)
    assert {(p, r) for p, r, _ in calls} == set(gold.items())
    assert all(m == {"topic": "add" if p == "What is 2 + 3?" else "broken"} for p, _, m in calls)
    step_logs = [h for h in trainer.state.log_history if "rewards/judge/mean" in h]
    assert len(step_logs) == 2
    for log, values in zip(step_logs, returned):
        assert None in values  # the broken row reached TRL as "no reward"
        scored = [v for v in values if v is not None]
        assert log["rewards/judge/mean"] == pytest.approx(sum(scored) / len(scored))
        assert log["judge/error_rate"] == pytest.approx(0.5)
        assert "rewards/exact_match/mean" in log
        assert not math.isnan(log["reward"])
