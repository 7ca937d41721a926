"""A training step reads its figures back from the device once, after its optimizer step. On a
GPU every read (``.item()``, ``float(tensor)``) waits for all the work queued before it; a read
between a forward pass and its backward keeps the host from queueing the backward while the
GPU runs the forward (``rewardkit.runtime.device.host_values``). Checked on the CPU by
recording every read of a tensor the trainer itself makes (reads inside the model's own forward
are the model library's, the same under any trainer) and where it falls in the step."""
from __future__ import annotations

import contextlib
import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

READS = ("item", "tolist", "__float__", "__int__")


@contextlib.contextmanager
def recorded(model, optimizer):
    """Events in order: ``forward`` (each top-level pass of ``model``), ``optimizer.step`` and
    every host read of a tensor made outside the model's forward."""
    events: list[str] = []
    depth = [0]
    originals = {name: getattr(torch.Tensor, name) for name in READS}

    def reader(name):
        original = originals[name]

        def read(self, *args, **kwargs):
            if depth[0] == 0:
                events.append(name)
            return original(self, *args, **kwargs)
        return read

    def enter(*_):
        if depth[0] == 0:
            events.append("forward")
        depth[0] += 1

    def leave(*_):
        depth[0] -= 1

    hooks = [model.register_forward_pre_hook(enter), model.register_forward_hook(leave),
             optimizer.register_step_pre_hook(lambda *_: events.append("optimizer.step"))]
    for name in READS:
        setattr(torch.Tensor, name, reader(name))
    try:
        yield events
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
        for hook in hooks:
            hook.remove()


def reads_inside_the_passes(events: list[str]) -> list[str]:
    """Reads between the step's first forward pass and its last optimizer step."""
    first = events.index("forward")
    last = len(events) - 1 - events[::-1].index("optimizer.step")
    return [e for e in events[first:last] if e in READS]


def write_rows(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("task, changes", [("rm", {"micro_batch_size": 2}),
                                           ("rm", {"objective": "likelihood"}),
                                           ("prm", {})])
def test_a_reward_model_step_reads_nothing_back_until_its_optimizer_step(tmp_path, task,
                                                                         changes):
    from rewardkit.models.train import RewardTrainer
    from rewardkit.models.train_config import RewardTrainConfig
    from rewardkit.testing import make_tiny_causal_lm

    base = make_tiny_causal_lm(tmp_path / "base", hidden_size=32, num_layers=1)
    if task == "rm":
        data = write_rows(tmp_path / "pairs.jsonl", [
            {"prompt": f"What is {i}+1?", "chosen": f"It is {i + 1}.",
             "rejected": f"It is {i + 2}."} for i in range(8)])
    else:
        data = write_rows(tmp_path / "steps.jsonl", [
            {"prompt": f"Add {i} and 2.", "completions": [f"{i}+2", f"= {i + 2 + i % 2}"],
             "labels": [True, i % 2 == 0]} for i in range(8)])
    trainer = RewardTrainer(RewardTrainConfig(
        task=task, model=str(base), data=data, output_dir=str(tmp_path / "out"), steps=2,
        batch_size=4, learning_rate=1e-3, eval_every=0, progress=False, plots=False,
        tensorboard=False, device="cpu", max_length=64, **changes))
    with recorded(trainer.model, trainer.optimizer) as events:
        figures = trainer.step()
    passes = 2 if changes.get("micro_batch_size") else 1
    assert events.count("forward") == passes and events.count("optimizer.step") == 1
    assert reads_inside_the_passes(events) == [], events
    assert math.isfinite(figures["loss"]) and figures["grad_norm"] > 0


def test_a_policy_update_reads_nothing_back_between_its_passes(tmp_path):
    from rewardkit.testing.arithmetic import task_config
    from rewardkit.trainer.loop import Trainer

    trainer = Trainer(task_config(tmp_path, batch_size=8, group_size=4, micro_batch_size=4,
                                  max_new_tokens=4))
    update = trainer.update
    seen: dict[str, list[str]] = {}

    def watched(batch):
        with recorded(trainer.model, trainer.optimizer) as events:
            out = update(batch)
        seen["events"] = events
        return out

    trainer.update = watched
    metrics = trainer.step()
    events = seen["events"]
    assert events.count("forward") == 2 and events.count("optimizer.step") == 1
    assert reads_inside_the_passes(events) == [], events
    assert math.isfinite(metrics["loss/policy"]) and 0.0 <= metrics["clip_fraction"] <= 1.0
