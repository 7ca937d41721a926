"""The loop's pieces on the shipped arithmetic policy: generation bookkeeping, scoring with
uncertainty penalty, dynamic sampling, evaluation metrics, and what a run leaves on disk."""
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rewardkit import Sample, Score, Scorer  # noqa: E402
from rewardkit.testing.arithmetic import DATA_DIR as ARITH, task_config  # noqa: E402
from rewardkit.trainer.evaluation import pass_at_k  # noqa: E402
from rewardkit.trainer.generation import Rollout, completion_mask, concat_rollouts  # noqa: E402
from rewardkit.trainer.loop import Trainer  # noqa: E402

def config(tmp_path, **changes):
    return task_config(tmp_path / "run", **changes)


class Uncertain(Scorer):
    name = "uncertain"

    def score_one(self, sample: Sample) -> Score:
        return Score(1.0, uncertainty=0.25)


class EvenGroupsVary(Scorer):
    """Groups of prompts with an even first operand get varied rewards; the rest all zero."""

    name = "even_groups_vary"

    def score_one(self, sample: Sample) -> Score:
        if int(sample.prompt_text.split("+")[0]) % 2:
            return Score(0.0)
        return Score(float(len(sample.completion_text) % 2 == 0 or sample.completion_text[-1:] in
                           "02468"))


def test_completion_mask_ends_at_first_eos_and_flags_truncation():
    ids = torch.tensor([[5, 1, 7, 1], [5, 6, 7, 8]])
    mask, ended = completion_mask(ids, eos_ids=[1])
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert ended.tolist() == [True, False]
    stopped = torch.tensor([False, True])
    ids2 = torch.tensor([[5, 1, 0, 0], [5, 6, 0, 0]])
    mask, ended = completion_mask(ids2, [1], stopped=stopped, pad_id=0)
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 0, 0]] and ended.tolist() == [True, True]


def test_concat_rollouts_repads_prompts_left_and_completions_right():
    a = Rollout(torch.tensor([[3, 4]]), torch.ones(1, 2, dtype=torch.long), torch.tensor([[7]]),
                torch.ones(1, 1, dtype=torch.long), torch.tensor([False]), ["a"])
    b = Rollout(torch.tensor([[2, 3, 4]]), torch.ones(1, 3, dtype=torch.long),
                torch.tensor([[8, 9]]), torch.ones(1, 2, dtype=torch.long), torch.tensor([True]),
                ["b"])
    c = concat_rollouts([a, b], pad_id=0)
    assert c.prompt_ids.tolist() == [[0, 3, 4], [2, 3, 4]]
    assert c.prompt_mask.tolist() == [[0, 1, 1], [1, 1, 1]]
    assert c.completion_ids.tolist() == [[7, 0], [8, 9]]
    assert c.completion_mask.tolist() == [[1, 0], [1, 1]] and c.texts == ["a", "b"]


def test_rollout_groups_completions_per_prompt_and_logprobs_match_generate(tmp_path):
    trainer = Trainer(config(tmp_path))
    batch = trainer.collect()
    rollout = batch.rollout
    assert len(rollout) == 16
    # rows i*G..i*G+G-1 share one prompt
    prompts = rollout.prompt_ids.view(4, 4, -1)
    assert torch.equal(prompts, prompts[:, :1].expand_as(prompts))
    # log-probs from the training forward equal those of the sampling distribution
    model, tok = trainer.policy.model, trainer.policy.tokenizer
    torch.manual_seed(1)
    out = model.generate(input_ids=rollout.prompt_ids[:4], attention_mask=rollout.prompt_mask[:4],
                         do_sample=True, top_k=None, top_p=1.0, max_new_tokens=6,
                         output_logits=True, return_dict_in_generate=True,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    completion = out.sequences[:, rollout.prompt_ids.shape[1]:]
    expected = torch.stack(out.logits, 1).log_softmax(-1).gather(
        -1, completion.unsqueeze(-1)).squeeze(-1)
    cmask, ended = completion_mask(completion, [tok.eos_token_id])
    again = Rollout(rollout.prompt_ids[:4], rollout.prompt_mask[:4], completion, cmask, ~ended, [])
    logp, _, _ = trainer.forward(model, again)
    assert torch.allclose(logp * cmask, expected * cmask, atol=1e-4)


def test_short_budget_marks_truncation_and_mask_drops_it_from_the_loss(tmp_path):
    trainer = Trainer(config(tmp_path, max_new_tokens=1, truncation="mask"))
    batch = trainer.collect()
    assert batch.rollout.truncated.all()
    assert batch.stats["completion/truncated"] == 1.0
    assert not batch.loss_mask.any()
    assert trainer.step()["skipped"] == 1.0


def test_uncertainty_is_penalised(tmp_path):
    trainer = Trainer(config(tmp_path, uncertainty_penalty=2.0), scorer=Uncertain())
    assert torch.allclose(trainer.collect().rewards, torch.full((16,), 0.5))


def test_dynamic_sampling_refills_the_batch_with_varied_groups(tmp_path):
    trainer = Trainer(config(tmp_path, batch_size=32, group_size=4, group_filter="zero_variance",
                             resample_rounds=8), scorer=EvenGroupsVary())
    batch = trainer.collect()
    assert len(batch.rollout) == 32  # same shape every step, whatever the filter dropped
    groups = batch.rewards.view(-1, 4)
    varied = groups.max(1).values > groups.min(1).values
    trained = batch.loss_mask.any(-1).view(-1, 4)
    assert torch.equal(trained.all(1), varied) and torch.equal(trained.any(1), varied)
    assert varied.all() or batch.stats["resample_rounds"] == 8  # refilled unless rounds ran out
    assert batch.stats["groups/zero_variance"] > 0 and batch.stats["resample_rounds"] >= 1


def test_pass_at_k_unbiased_estimator():
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)   # 1 - C(3,2)/C(4,2)
    assert pass_at_k(4, 3, 2) == 1.0


def test_evaluation_reports_pass_at_k_greedy_and_gold(tmp_path):
    trainer = Trainer(config(tmp_path, eval_data=str(ARITH / "test.jsonl"), eval_max_prompts=8,
                             eval_samples=4, eval_k=[1, 4], gold_reward="regex"))
    trainer.gold = Uncertain()  # always 1.0: the gold curve must differ from the reward's
    metrics = trainer.evaluate()
    assert 0.0 <= metrics["eval/pass@1"] <= metrics["eval/pass@4"] <= 1.0
    assert metrics["eval/pass@1"] == pytest.approx(metrics["eval/mean@n"])
    assert metrics["eval/gold_mean"] == 1.0 and "eval/greedy" in metrics


def test_a_run_logs_metrics_plots_and_a_loadable_final_model(tmp_path):
    from transformers import AutoModelForCausalLM

    cfg = config(tmp_path, steps=3, plots=True, tensorboard=True, save_every=1, kl_coef=0.05,
                 entropy_coef=0.01, top_entropy_ratio=0.5, eval_data=str(ARITH / "test.jsonl"),
                 eval_max_prompts=4)
    Trainer(cfg).train()
    run = Path(cfg.output_dir)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "reward/mean" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    for key in ("reward/std", "groups/zero_variance", "advantage/std", "kl", "entropy",
                "clip_fraction", "completion/length", "completion/truncated", "tokens_per_s",
                "time/step", "grad_norm", "lr"):
        assert key in steps[0], key
    assert steps[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # policy == reference at step 1
    assert steps[-1]["kl"] > 0.0
    assert {r["step"] for r in rows if "eval/pass@1" in r} == {0, 3}
    assert (run / "plots" / "reward.png").exists()
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-2", "step-3"]
    model = AutoModelForCausalLM.from_pretrained(run / "final")
    assert model.config.model_type == "qwen2"


@pytest.mark.skipif(int(__import__("transformers").__version__.split(".")[0]) < 5,
                    reason="transformers 4.x's StopStringCriteria probes the tokenizer with the "
                           "letter 'a', which the digits-only arithmetic tokenizer cannot spell")
def test_stop_string_ends_the_completion_and_its_mask(tmp_path):
    trainer = Trainer(config(tmp_path, stop=["1"], batch_size=32))
    rollout = trainer.collect().rollout
    tok = trainer.policy.tokenizer
    with_stop = [i for i, t in enumerate(rollout.texts) if "1" in t]
    assert with_stop, "expected some completions to contain the stop string"
    for i in with_stop:
        assert rollout.texts[i].endswith("1") and rollout.texts[i].count("1") == 1
        kept = rollout.completion_ids[i][rollout.completion_mask[i].bool()]
        assert tok.decode(kept, skip_special_tokens=True) == rollout.texts[i]
        assert not rollout.truncated[i]


def test_gradient_checkpointing_gives_the_same_update(tmp_path):
    plain = Trainer(config(tmp_path / "a", seed=3))
    start = {k: v.clone() for k, v in plain.policy.model.state_dict().items()}
    plain.step()
    checkpointed = Trainer(config(tmp_path / "b", seed=3, gradient_checkpointing=True))
    checkpointed.step()
    a = plain.policy.model.state_dict()
    b = checkpointed.policy.model.state_dict()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert any(not torch.equal(a[k], start[k]) for k in a)


def test_kl_in_reward_lowers_the_sequence_reward_by_beta_times_summed_kl(tmp_path):
    trainer = Trainer(config(tmp_path, kl_coef=0.5, kl_in="reward", kl_estimator="k1",
                             std_scale="none"))
    with torch.no_grad():  # move the policy away from the reference
        for p in trainer.policy.model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    batch = trainer.collect()
    rollout = batch.rollout
    logp, _, _ = trainer.forward(trainer.policy.model, rollout)
    ref, _, _ = trainer.forward(trainer.policy.reference, rollout)
    mask = rollout.completion_mask.float()
    penalised = batch.rewards - 0.5 * ((logp - ref) * mask).sum(-1)
    expected = penalised.view(-1, 4) - penalised.view(-1, 4).mean(1, keepdim=True)
    assert torch.allclose(batch.advantages, expected.reshape(-1), atol=1e-4)
    assert not torch.allclose(batch.advantages, (batch.rewards.view(-1, 4) - batch.rewards.view(
        -1, 4).mean(1, keepdim=True)).reshape(-1), atol=1e-4)


def test_chat_prompts_go_through_the_chat_template(tmp_path):
    import json as json_

    from rewardkit.testing import make_tiny_causal_lm
    from rewardkit.trainer.data import load_prompts
    from rewardkit.trainer.policy import load_tokenizer

    model_dir = make_tiny_causal_lm(tmp_path / "lm")
    data = tmp_path / "chat.jsonl"
    messages = [{"role": "user", "content": "What is 2 + 3?"}]
    data.write_text(json_.dumps({"messages": messages, "gold": "5"}) + "\n")
    tok = load_tokenizer(str(model_dir))
    (prompt,) = load_prompts(str(data), tok, prompt_field="messages", reference_field="gold")
    expected = tok(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                   add_special_tokens=False).input_ids
    assert prompt.ids == list(expected) and prompt.reference == "5"


def test_missing_prompt_column_names_the_columns_seen(tmp_path):
    from rewardkit.compose import ConfigError
    from rewardkit.trainer.data import read_prompt_rows

    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "1+1=", "answer": "2"}\n')
    with pytest.raises(ConfigError, match=r"no 'prompt' field \(columns: \['answer', 'question'\]"):
        read_prompt_rows(str(data))


def test_rewardkit_train_command_runs_and_writes_the_final_model(tmp_path):
    from rewardkit.cli import main

    out = tmp_path / "cli"
    code = main(["train", "grpo", "--model", str(ARITH / "policy"), "--data",
                 str(ARITH / "train.jsonl"), "--reward", "exact_match", "--steps", "2",
                 "--batch-size", "8", "--group-size", "4", "--max-new-tokens", "6",
                 "--output", str(out), "--device", "cpu", "-q", "--set", "plots=false"])
    assert code == 0
    assert (out / "final" / "model.safetensors").exists()
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2


def test_dropout_is_disabled_so_training_scores_match_sampling(tmp_path):
    from rewardkit.testing import make_tiny_causal_lm

    model_dir = make_tiny_causal_lm(tmp_path / "lm", arch="llama")
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(model_dir)
    cfg.attention_dropout = 0.5
    cfg.save_pretrained(model_dir)
    trainer = Trainer(config(tmp_path, model=str(model_dir)))
    batch = trainer.collect()
    trainer.policy.model.train()
    first, _, _ = trainer.forward(trainer.policy.model, batch.rollout)
    second, _, _ = trainer.forward(trainer.policy.model, batch.rollout)
    assert torch.equal(first, second)


def _weights_after_one_step(tmp_path, **changes):
    return _one_step(tmp_path, **changes)[0]


def _one_step(tmp_path, **changes):
    trainer = Trainer(config(tmp_path, **changes))
    metrics = trainer.step()
    return trainer.policy.model.state_dict(), metrics


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean", "constant"])
def test_gradient_accumulation_equals_one_big_batch(tmp_path, aggregation):
    whole, m_whole = _one_step(tmp_path / "a", loss_aggregation=aggregation, seed=5)
    micro, m_micro = _one_step(tmp_path / "b", loss_aggregation=aggregation, seed=5,
                               micro_batch_size=4)
    # the gradient itself (its norm, before clipping), not only Adam's scale-free first step
    assert m_micro["grad_norm"] == pytest.approx(m_whole["grad_norm"], rel=1e-5)
    assert all(torch.allclose(whole[k], micro[k], atol=1e-6) for k in whole)


def test_same_seed_same_run_other_seed_other_run(tmp_path):
    a = _weights_after_one_step(tmp_path / "a", seed=1)
    b = _weights_after_one_step(tmp_path / "b", seed=1)
    c = _weights_after_one_step(tmp_path / "c", seed=2)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


@pytest.mark.parametrize("advantage", ["grpo", "rloo", "reinforce_pp"])
def test_the_configured_estimator_computes_the_advantages(tmp_path, advantage):
    from rewardkit.trainer import advantages as adv

    trainer = Trainer(config(tmp_path, advantage=advantage, std_scale="batch"))
    batch = trainer.collect()
    expected = {"grpo": lambda r: adv.grpo_advantages(r, 4, "batch"),
                "rloo": lambda r: adv.rloo_advantages(r, 4),
                "reinforce_pp": lambda r: adv.reinforce_pp_advantages(r, 4)}[advantage]
    assert torch.allclose(batch.advantages, expected(batch.rewards))


def test_logged_loss_does_not_depend_on_micro_batching(tmp_path):
    _, whole = _one_step(tmp_path / "a", algorithm="ppo", seed=4)
    _, micro = _one_step(tmp_path / "b", algorithm="ppo", seed=4, micro_batch_size=4)
    for key in ("loss/policy", "loss/value"):
        assert micro[key] == pytest.approx(whole[key], rel=1e-4, abs=1e-6)


def test_a_composition_config_file_is_the_reward_unchanged(tmp_path):
    reward = tmp_path / "reward.yaml"
    reward.write_text("rewards:\n  correct: {reward: exact_match, weight: 1.0}\n"
                      "  short: {reward: regex, weight: 0.5, options: {pattern: '^\\d{1,2}$'}}\n")
    trainer = Trainer(config(tmp_path, reward=str(reward)))
    metrics = trainer.step()
    assert {"reward/correct", "reward/short"} <= set(metrics)
    assert metrics["reward/mean"] == pytest.approx(
        metrics["reward/correct"] + 0.5 * metrics["reward/short"])


class FirstGroupFails(Scorer):
    """Raises on the first group's samples; the others report two components."""

    name = "first_group_fails"

    def score_one(self, sample: Sample) -> Score:
        if sample.metadata["group"] == 0:
            raise ValueError("cannot score this one")
        return Score(1.0, components={"correct": 1.0, "format": float(len(sample.completion_text) % 2)})


def test_reward_errors_are_counted_and_components_survive_an_errored_first_sample(tmp_path):
    trainer = Trainer(config(tmp_path / "value", batch_size=8, group_size=4,
                             reward_errors="value"), scorer=FirstGroupFails())
    metrics = trainer.step()
    assert metrics["reward/errors"] == 0.5
    assert metrics["reward/mean"] == 0.5  # errored samples train with the error value, 0.0
    assert metrics["reward/correct"] == 1.0 and metrics["reward/correct/std"] == 0.0
    assert "reward/format" in metrics and "reward/format/std" in metrics
    skipping = Trainer(config(tmp_path / "skip", batch_size=8, group_size=4),
                       scorer=FirstGroupFails())
    metrics = skipping.step()
    assert metrics["reward/errors"] == 0.5 and metrics["reward/mean"] == 1.0  # scored ones


class HalfOfEachGroupFails(Scorer):
    """Completions 0 and 1 of each group of 4 cannot be scored; 2 scores 1.0 and 3 scores 0.0."""

    name = "half_fails"

    def score_batch(self, samples):
        out = []
        for k, _ in enumerate(samples):
            if k % 4 < 2:
                out.append(Score.from_error("the judge timed out", 0.0))
            else:
                out.append(Score(1.0 if k % 4 == 2 else 0.0))
        return out


def test_unscored_completions_stay_out_of_the_loss_and_move_no_baseline(tmp_path):
    """reward_errors: skip — an error Score is no reward: its completion gets no gradient and
    the group's baseline is the scored completions' mean, not pulled toward error_value."""
    trainer = Trainer(config(tmp_path, batch_size=8, group_size=4), scorer=HalfOfEachGroupFails())
    assert trainer.cfg.advantage == "grpo"
    prompts = trainer.sampler.next(2)
    rollout = trainer.generate([p.ids for p in prompts])
    rewards, stats, trains = trainer.score(prompts, rollout)
    assert trains.tolist() == [False, False, True, True] * 2
    assert rewards.tolist() == [0.5, 0.5, 1.0, 0.0] * 2  # stand-ins: the scored mean
    batch = trainer.make_batch(rollout, rewards, stats, trains)
    assert (batch.loss_mask[~trains] == 0).all() and batch.loss_mask[trains].any()
    adv = batch.advantages.view(2, 4)
    assert adv[:, 2].gt(0).all() and adv[:, 3].lt(0).all()
    assert torch.allclose(adv[:, 2], -adv[:, 3])  # centred on the scored completions alone
    # with `value`, the errors count as 0.0 rewards: the 0.0-scored completion looks average
    valued = Trainer(config(tmp_path / "v", batch_size=8, group_size=4, reward_errors="value"),
                     scorer=HalfOfEachGroupFails())
    rewards, _, trains = valued.score(prompts, rollout)
    assert trains.all() and rewards.tolist() == [0.0, 0.0, 1.0, 0.0] * 2


class RecordsMetadata(Scorer):
    name = "records_metadata"

    def __init__(self) -> None:
        self.seen: list[dict] = []

    def score_one(self, sample: Sample) -> Score:
        self.seen.append(dict(sample.metadata))
        return Score(float(len(sample.completion_text) % 2))


def test_rewards_see_the_group_and_the_training_step(tmp_path):
    scorer = RecordsMetadata()
    trainer = Trainer(config(tmp_path, batch_size=8, group_size=4, steps=5), scorer=scorer)
    trainer.step()
    trainer.step()
    steps = sorted({m["step"] for m in scorer.seen})
    assert steps == [0, 1]
    assert {m["total_steps"] for m in scorer.seen} == {5}
    assert sorted({m["group"] for m in scorer.seen}) == [0, 1]


def test_rewards_see_the_rows_other_columns_in_training_and_evaluation(tmp_path):
    # a reward shaped against a reference completion (shape: par) reads it from the row
    rows = [{"prompt": f"{a}+1=", "answer": str(a + 1), "reference_completion": str(a + 2)}
            for a in range(8)]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scorer = RecordsMetadata()
    trainer = Trainer(config(tmp_path, data=str(data), eval_data=str(data), batch_size=8,
                             group_size=4, steps=2), scorer=scorer)
    trainer.step()
    assert scorer.seen and all(m["reference_completion"] == str(int(m["answer"]) + 1)
                               for m in scorer.seen)
    assert {m["step"] for m in scorer.seen} == {0}   # the loop's own keys win
    scorer.seen.clear()
    trainer.evaluate()
    assert scorer.seen and all("reference_completion" in m and "group" in m for m in scorer.seen)


def test_a_reward_shaped_against_the_rows_reference_completion_trains(tmp_path):
    # `shape: center` reads each row's reference_completion: exact_match(completion) minus
    # exact_match(the reference completion), which is right in every row, so 1 is subtracted
    rows = [{"prompt": f"{a}+1=", "answer": str(a + 1), "reference_completion": str(a + 1)}
            for a in range(8)]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reward = {"rewards": {"correct": {"reward": "exact_match",
                                      "shape": {"method": "center"}}}}
    trainer = Trainer(config(tmp_path, data=str(data), reward=reward, batch_size=8,
                             group_size=4, steps=1))
    trainer.step()
    samples = [Sample(r["prompt"], c, r["answer"], {"reference_completion": r["answer"]})
               for r in rows[:2] for c in (r["answer"], "0")]
    assert [s.value for s in trainer.scorer.score(samples)] == [0.0, -1.0, 0.0, -1.0]
    (missing,) = trainer.scorer.score([Sample("1+1=", "2", "2")])   # no reference completion
    assert not missing.ok and "reference_completion" in missing.error
