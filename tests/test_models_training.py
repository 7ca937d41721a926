"""`train rm|prm`: the losses as the papers write them, labels where TRL puts them, config
validation, exact resume, LoRA, the CLI, and a trained reward model driving GRPO."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch.nn.functional as F  # noqa: E402

import rewardkit  # noqa: E402
from rewardkit.cli import main  # noqa: E402
from rewardkit.compose import ConfigError  # noqa: E402
from rewardkit.models.train import RewardTrainer  # noqa: E402
from rewardkit.models.train_config import RewardTrainConfig  # noqa: E402
from rewardkit.testing import make_tiny_causal_lm  # noqa: E402


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return str(make_tiny_causal_lm(tmp_path_factory.mktemp("base"), hidden_size=32, num_layers=1))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    pairs = [{"prompt": f"What is {i}+1?", "chosen": f"It is {i + 1}.",
              "rejected": f"It is {i + 2}.", "margin": 0.5 * (i % 2), "subset": f"s{i % 2}"}
             for i in range(24)]
    steps = [{"prompt": f"Add {i} and 2.", "completions": [f"{i}+2", f"= {i + 2 + (i % 3 == 0)}"],
              "labels": [True, i % 3 != 0]} for i in range(24)]
    for name, rows in (("pairs.jsonl", pairs), ("steps.jsonl", steps)):
        with open(root / name, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    return root


def _cfg(base, root, tmp_path, **changes):
    values = dict(model=base, data=str(root / "pairs.jsonl"), output_dir=str(tmp_path / "run"),
                  steps=4, batch_size=4, learning_rate=1e-3, eval_every=2, progress=False,
                  tensorboard=False, plots=False, device="cpu", max_length=64)
    values.update(changes)
    return RewardTrainConfig(**values)


def test_bradley_terry_loss_with_margin_and_centering(base, data, tmp_path):
    trainer = RewardTrainer(_cfg(base, data, tmp_path, center_rewards_coefficient=0.01))
    examples = trainer.train_examples[:4]
    loss, stats = trainer.loss(examples, denominator=4.0)
    model = trainer.model.eval()
    with torch.no_grad():
        def reward(ids):
            return model(input_ids=torch.tensor([ids])).logits[0, 0]
        rc = torch.stack([reward(e.chosen) for e in examples])
        rr = torch.stack([reward(e.rejected) for e in examples])
    m = torch.tensor([e.margin for e in examples])
    expected = (-F.logsigmoid(rc - rr - m) + 0.01 * (rc + rr) ** 2).mean()
    assert any(e.margin for e in examples)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)
    assert stats["correct"] == (rc > rr).sum().item()


def test_prm_labels_sit_on_the_separator_tokens_only(base, data, tmp_path):
    trainer = RewardTrainer(_cfg(base, data, tmp_path, task="prm",
                                 data=str(data / "steps.jsonl")))
    tok = trainer.tokenizer
    sep = tok("\n", add_special_tokens=False).input_ids
    for e in trainer.train_examples:
        marked = [i for i, y in enumerate(e.labels) if y != -100]
        assert len(marked) == 2
        assert all(e.ids[i] == sep[-1] for i in marked)
        assert [e.labels[i] for i in marked] in ([1, 1], [1, 0])


@pytest.mark.parametrize("changes, message", [
    ({"task": "dpo"}, "task must be one of"),
    ({"batch_size": "many"}, "batch_size must be an integer"),
    ({"micro_batch_size": 3}, "must divide batch_size"),
    ({"learning_rate": 0}, "learning_rate must be > 0"),
    ({"threshold": 1.5}, "threshold must be in"),
])
def test_config_errors_name_the_option(base, data, tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message):
        _cfg(base, data, tmp_path, **changes).validate()
    with pytest.raises(ConfigError, match="did you mean 'learning_rate'"):
        RewardTrainConfig.from_dict({"learning_rte": 1e-3})


def test_numbers_written_as_strings_are_read_as_numbers(base, data, tmp_path):
    cfg = _cfg(base, data, tmp_path, learning_rate="1e-5", steps="3").validate()
    assert cfg.learning_rate == 1e-5 and cfg.steps == 3


def test_resume_continues_exactly_and_refuses_changed_options(base, data, tmp_path):
    def cfg(where, steps):  # a constant schedule: the length of the run does not shape it
        return _cfg(base, data, tmp_path / where, steps=steps, micro_batch_size=2,
                    lr_schedule="constant", warmup_steps=1)

    straight = RewardTrainer(cfg("a", 4))
    straight.train()
    RewardTrainer(cfg("b", 2)).train()
    resumed = RewardTrainer(cfg("b", 4), resume=str(tmp_path / "b" / "run"))
    assert resumed.step_count == 2
    resumed.train()
    for (name, a), (_, b) in zip(straight.model.state_dict().items(),
                                 resumed.model.state_dict().items()):
        assert torch.equal(a, b), name
    with pytest.raises(ConfigError, match="learning_rate"):
        RewardTrainer(_cfg(base, data, tmp_path / "b", steps=6, micro_batch_size=2,
                           lr_schedule="constant", warmup_steps=1, learning_rate=5e-3),
                      resume=str(tmp_path / "b" / "run"))


def test_lora_run_saves_a_model_reward_model_loads(base, data, tmp_path):
    cfg = _cfg(base, data, tmp_path, lora=True, lora_r=4, steps=2)
    RewardTrainer(cfg).train()
    final = tmp_path / "run" / "final"
    assert (final / "adapter").is_dir() and (final / "rewardkit.json").is_file()
    scorer = rewardkit.load("reward_model", model=str(final))
    (score,) = scorer.score([rewardkit.Sample("What is 1+1?", "It is 2.")])
    assert score.ok and isinstance(score.value, float)


def test_cli_trains_an_rm_and_evaluates_it_with_a_json_report(base, data, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["train", "rm", "--model", base, "--data", str(data / "pairs.jsonl"),
                 "--output", str(out), "--steps", "2", "--batch-size", "4", "--quiet",
                 "--set", "device=cpu", "--set", "tensorboard=false",
                 "--set", "eval_fraction=0.25"]) == 0
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert rows[-1]["step"] == 2 and "eval/accuracy" in rows[-1]
    report_path = tmp_path / "report.json"
    assert main(["eval", "rm", "--model", str(out / "final"), "--data",
                 str(data / "pairs.jsonl"), "--output", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    assert report["n"] == 24 and set(report["subsets"]) == {"s0", "s1"}
    assert 0 <= report["overall"]["accuracy"] <= 1 and len(report["overall"]["ci95"]) == 2
    assert "pairwise accuracy" in capsys.readouterr().out


def test_cli_reports_a_bad_option_and_a_bad_model(base, data, tmp_path, capsys):
    assert main(["train", "rm", "--model", base, "--data", str(data / "pairs.jsonl"),
                 "--set", "margn_field=x"]) == 2
    assert "did you mean 'margin_field'" in capsys.readouterr().err
    assert main(["eval", "rm", "--model", base, "--data", str(data / "pairs.jsonl"),
                 "--reward", "reward_model"]) == 2
    assert "not a sequence classifier" in capsys.readouterr().err


def test_prm_training_runs_from_the_cli_and_eval_prm_reads_it(base, data, tmp_path, capsys):
    out = tmp_path / "prm"
    assert main(["train", "prm", "--model", base, "--data", str(data / "steps.jsonl"),
                 "--output", str(out), "--steps", "2", "--batch-size", "4", "--quiet",
                 "--set", "device=cpu", "--set", "tensorboard=false",
                 "--set", "layout=step_token", "--set", "eval_fraction=0.25"]) == 0
    scorer = rewardkit.load("process_reward", model=str(out / "final"))
    assert scorer.layout == "step_token"
    assert main(["eval", "prm", "--model", str(out / "final"), "--data",
                 str(data / "steps.jsonl")]) == 0
    assert "ProcessBench F1" in capsys.readouterr().out


def test_ctrl_c_finishes_the_step_saves_and_resumes(base, data, tmp_path):
    import os
    import signal

    trainer = RewardTrainer(_cfg(base, data, tmp_path, steps=5, lr_schedule="constant"))
    step = trainer.step

    def step_then_interrupt():
        out = step()
        if trainer.step_count == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return out

    trainer.step = step_then_interrupt
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert trainer.step_count == 2 and trainer.interrupt_checkpoint.name == "step-2"
    resumed = RewardTrainer(_cfg(base, data, tmp_path, steps=5, lr_schedule="constant"),
                            resume=str(tmp_path / "run"))
    assert resumed.step_count == 2
    resumed.train()
    assert (tmp_path / "run" / "final" / "config.json").is_file()


def _weight_change(base, data, tmp_path, dtype):
    trainer = RewardTrainer(_cfg(base, data, tmp_path / dtype, dtype=dtype, learning_rate=1e-6,
                                 steps=1, eval_every=0))
    before = {n: p.detach().float().clone() for n, p in trainer.model.named_parameters()}
    trainer.step()
    changed = total = 0
    for n, p in trainer.model.named_parameters():
        delta = (p.detach().float() - before[n]).abs()
        changed += int((delta > 0).sum())
        total += delta.numel()
    return changed / total, trainer


def test_bf16_training_keeps_fp32_master_weights_and_moves_them_like_fp32(base, data, tmp_path):
    fp32_share, _ = _weight_change(base, data, tmp_path, "float32")
    bf16_share, trainer = _weight_change(base, data, tmp_path, "bfloat16")
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    assert trainer.compute_dtype == torch.bfloat16
    # with bf16 weights, AdamW at lr 1e-6 changes about 1% of them; fp32 master weights change
    # every weight that gets a gradient (unused embedding rows get none), as in fp32
    assert fp32_share > 0.2 and bf16_share > 0.9 * fp32_share


@pytest.mark.gpu
def test_rm_trains_and_scores_in_bf16_on_cuda(base, data, tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    torch.cuda.reset_peak_memory_stats()
    trainer = RewardTrainer(_cfg(base, data, tmp_path, device="cuda", dtype="auto", steps=4))
    assert trainer.compute_dtype == torch.bfloat16
    trainer.train()
    final = trainer.save_final()
    scorer = rewardkit.load("reward_model", model=str(final), device="auto", dtype="auto")
    on_gpu = scorer.score([rewardkit.Sample("What is 2+1?", "It is 3.")])[0]
    on_cpu = rewardkit.load("reward_model", model=str(final), device="cpu").score(
        [rewardkit.Sample("What is 2+1?", "It is 3.")])[0]
    assert on_gpu.ok and abs(on_gpu.value - on_cpu.value) < 0.05 * (1 + abs(on_cpu.value))
    print(f"peak CUDA memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")


def test_periodic_evaluation_is_printed_with_where_it_went(base, data, tmp_path, capsys):
    RewardTrainer(_cfg(base, data, tmp_path, steps=4, eval_every=2)).train()
    err = capsys.readouterr().err
    assert "eval at step 2: " in err and "eval at step 4: " in err
    assert str(tmp_path / "run" / "metrics.jsonl") in err
