"""The CUDA paths: GRPO and PPO in bf16 autocast with generation on the GPU, and the K-head
ensemble scoring on the GPU as on the CPU. Marked ``gpu``: run with ``pytest -m gpu`` on a
machine with CUDA (skipped without it)."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import rewardkit  # noqa: E402
from rewardkit import Sample  # noqa: E402
from rewardkit.testing import make_tiny_reward_model  # noqa: E402
from rewardkit.testing.arithmetic import task_config  # noqa: E402
from rewardkit.trainer.loop import Trainer  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_policy_trains_on_cuda_in_bf16_autocast_with_fp32_master_weights(algorithm, tmp_path):
    trainer = Trainer(task_config(tmp_path, algorithm=algorithm, device="cuda",
                                  dtype="bfloat16", steps=3, batch_size=32, group_size=4))
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}
    trainer.train()
    assert trainer.step_count == 3
    params = dict(trainer.policy.model.named_parameters())
    assert all(p.device.type == "cuda" and p.dtype == torch.float32 for p in params.values())
    assert any(not torch.equal(before[n], p.detach()) for n, p in params.items())
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if "memory/peak_gib" in x]
    assert len(steps) == 3 and all(0 < x["memory/peak_gib"] < 80 for x in steps)


def test_k_head_ensemble_scores_on_cuda_as_on_cpu(tmp_path):
    model = make_tiny_reward_model(tmp_path / "heads", num_labels=4, hidden_size=64,
                                   num_layers=2)
    batch = [Sample(f"Problem {i}", "the sum is found by adding " * (1 + i % 7))
             for i in range(24)]
    on = {device: rewardkit.load("ensemble", model=str(model), normalize=False,
                                 model_options={"device": device, "dtype": "float32"}
                                 ).score(batch) for device in ("cpu", "cuda")}
    assert all(s.ok for s in on["cuda"])
    for cpu, gpu in zip(on["cpu"], on["cuda"]):
        assert len(gpu.components) == 4
        for key, value in cpu.components.items():
            assert abs(gpu.components[key] - value) < 1e-3
