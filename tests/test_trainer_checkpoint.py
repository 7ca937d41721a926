"""Checkpoints: --resume continues exactly, Ctrl-C saves, LoRA uses the adapter-disabled base as
reference and its final model loads with from_pretrained."""
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from rewardkit import Score, Scorer  # noqa: E402
from rewardkit.trainer import checkpoint as ckpt  # noqa: E402
from rewardkit.trainer.loop import Trainer  # noqa: E402
from rewardkit.testing.arithmetic import task_config  # noqa: E402


def config(tmp_path, **changes):
    return task_config(tmp_path / "run", **changes)


def _weights(trainer):
    return {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_resume_continues_exactly(tmp_path, algorithm):
    opts = dict(algorithm=algorithm, steps=4, mini_batch_size=8, lr_schedule="cosine",
                warmup_steps=1)
    # one run, saved half-way (as save_every does) and carried on: the checkpoint is taken
    # from it, and the resumed run must end where it ends
    straight = Trainer(config(tmp_path, **opts))
    for _ in range(2):
        straight.step()
    saved = straight.save()
    assert saved.name == "step-2"
    for _ in range(2):
        straight.step()
    resumed = Trainer(config(tmp_path / "b", **opts), resume=tmp_path / "run")
    assert resumed.step_count == 2
    for _ in range(2):
        resumed.step()
    a, b = _weights(straight), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.scheduler.get_last_lr() == straight.scheduler.get_last_lr()
    if algorithm == "ppo":
        assert torch.equal(straight.value_head.linear.weight, resumed.value_head.linear.weight)


class StopAtThirdCall(Scorer):
    name = "stop"

    def __init__(self):
        self.calls = 0

    def score_batch(self, samples):
        self.calls += 1
        if self.calls == 3:
            raise KeyboardInterrupt
        return [Score(float(s.completion_text == s.reference)) for s in samples]


def test_ctrl_c_saves_a_checkpoint_to_resume_from(tmp_path):
    cfg = config(tmp_path, steps=5)
    trainer = Trainer(cfg, scorer=StopAtThirdCall())
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    found = ckpt.find_checkpoint(cfg.output_dir)
    assert found.name == "step-2"
    assert Trainer(cfg, resume=cfg.output_dir).step_count == 2


def test_resume_from_nothing_is_a_clear_error(tmp_path):
    from rewardkit.compose import ConfigError

    with pytest.raises(ConfigError, match="no checkpoint there"):
        ckpt.find_checkpoint(tmp_path)


def test_lora_reference_is_the_base_with_adapter_disabled_and_final_model_loads(tmp_path):
    from transformers import AutoModelForCausalLM

    cfg = config(tmp_path, lora=True, lora_r=4, kl_coef=0.1, steps=3, learning_rate=1e-2,
                 lora_target_modules=["q_proj", "v_proj"])
    trainer = Trainer(cfg)
    assert trainer.policy.reference is None  # no second copy of the model
    base = AutoModelForCausalLM.from_pretrained(cfg.model)
    trainer.train()
    batch = trainer.collect()
    with trainer.policy.reference_model() as ref:
        ref_logp, _, _ = trainer.forward(ref, batch.rollout)
    base_logp, _, _ = trainer.forward(base, batch.rollout)
    policy_logp, _, _ = trainer.forward(trainer.policy.model, batch.rollout)
    mask = batch.rollout.completion_mask.bool()
    assert torch.allclose(ref_logp[mask], base_logp[mask], atol=1e-5)
    assert not torch.allclose(policy_logp[mask], base_logp[mask], atol=1e-3)
    final = AutoModelForCausalLM.from_pretrained(Path(cfg.output_dir) / "final")
    merged_logp, _, _ = trainer.forward(final, batch.rollout)
    assert torch.allclose(merged_logp[mask], policy_logp[mask], atol=1e-4)
    assert (Path(cfg.output_dir) / "final" / "adapter" / "adapter_config.json").exists()


class ExactMatch(Scorer):
    """Exact match that, on its ``at``-th call, either sends SIGINT to this process (a real
    Ctrl-C) or raises KeyboardInterrupt from inside the reward."""

    name = "exact"

    def __init__(self, at=None, how="signal"):
        self.calls, self.at, self.how = 0, at, how

    def score_batch(self, samples):
        self.calls += 1
        if self.calls == self.at:
            if self.how == "signal":
                import os
                import signal

                os.kill(os.getpid(), signal.SIGINT)
            else:
                raise KeyboardInterrupt
        return [Score(float(s.completion_text == s.reference)) for s in samples]


@pytest.fixture(scope="module")
def straight_weights(tmp_path_factory):
    """The weights after three uninterrupted steps: the run every interrupted one that resumes
    must reach (built once; a Trainer seeds everything it draws from when it starts)."""
    trainer = Trainer(config(tmp_path_factory.mktemp("straight"), steps=3), scorer=ExactMatch())
    for _ in range(3):
        trainer.step()
    return _weights(trainer)


@pytest.mark.parametrize("how, saved_step", [("signal", 2), ("raise", 1)])
def test_interrupted_run_resumes_exactly(tmp_path, how, saved_step, straight_weights):
    # A real SIGINT during step 2 lets step 2 finish, then saves; a KeyboardInterrupt raised
    # while step 2 collects saves the state step 2 started from (prompts and RNG rewound).
    cfg = config(tmp_path / "run", steps=3)
    trainer = Trainer(cfg, scorer=ExactMatch(at=2, how=how))
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert trainer.interrupt_checkpoint.name == f"step-{saved_step}"
    resumed = Trainer(cfg, scorer=ExactMatch(), resume=cfg.output_dir)
    assert resumed.step_count == saved_step
    for _ in range(3 - saved_step):
        resumed.step()
    assert all(torch.equal(straight_weights[k], v) for k, v in _weights(resumed).items())


def test_interrupt_during_the_update_saves_no_half_updated_step(tmp_path):
    cfg = config(tmp_path, steps=3, mini_batch_size=8)
    trainer = Trainer(cfg, scorer=ExactMatch())
    trainer.step()
    trainer.save()
    calls = {"n": 0}
    step = trainer.optimizer.step

    def interrupted_second_time(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # the first mini-batch of step 2 has already moved the weights
            raise KeyboardInterrupt
        return step(*args, **kwargs)

    trainer.optimizer.step = interrupted_second_time
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert trainer.interrupt_checkpoint is None
    assert ckpt.find_checkpoint(cfg.output_dir).name == "step-1"


def test_resume_with_other_training_options_is_refused(tmp_path):
    from rewardkit.compose import ConfigError

    cfg = config(tmp_path, steps=2)
    Trainer(cfg).save()
    with pytest.raises(ConfigError, match=r"group_size: 4 in the checkpoint, 8 now.*"
                                          r"learning_rate: 0.0003 in the checkpoint, 0.001 now"):
        Trainer(config(tmp_path, steps=2, group_size=8, learning_rate=1e-3),
                resume=cfg.output_dir)
    longer = Trainer(config(tmp_path, steps=5, save_every=1, eval_every=2),
                     resume=cfg.output_dir)
    assert longer.step_count == 0 and longer.cfg.steps == 5


def test_lora_target_modules_matching_nothing_is_a_config_error_listing_the_layers(tmp_path):
    from rewardkit.compose import ConfigError

    with pytest.raises(ConfigError, match=r"lora_target_modules \['nonexistent'\] match no "
                                          r"module.*'q_proj'"):
        Trainer(config(tmp_path, lora=True, lora_target_modules=["nonexistent"]))
