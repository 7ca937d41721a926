"""Data parallel on CPU, two gloo processes under one ``torchrun`` launch (the launch, imports
and process-group start are most of the cost, so both strategies share it):

- ``ddp``: the ranks stay identical, each samples its own prompts, and only rank 0 writes
  metrics and the final model;
- ``fsdp`` (torch FSDP2): from the same seed, losses, gradient norms and the weights after two
  steps agree with ``ddp``, and the sharded run writes full, loadable checkpoints that resume.
"""
import json
import textwrap

import pytest

from tests.conftest import run_two_processes

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = textwrap.dedent("""
    import json, sys, torch, torch.distributed as dist
    from transformers import AutoModelForCausalLM
    from rewardkit.testing.arithmetic import task_config
    from rewardkit.trainer.loop import Trainer

    out = sys.argv[1]

    def flat(params):
        return torch.cat([(p.full_tensor() if hasattr(p, "full_tensor") else p).detach()
                          .flatten().clone() for p in params])

    def config(strategy, steps=2):
        return task_config(f"{out}/{strategy}", batch_size=16, group_size=4, steps=steps,
                           micro_batch_size=4, learning_rate=1e-3, distributed=strategy)

    # ddp through the whole run (train(): logging, checkpoint, final model)
    trainer = Trainer(config("ddp"))
    start = flat(trainer.policy.model.parameters())
    trainer.train()
    ddp = flat(trainer.policy.model.parameters())
    assert trainer.dist.world_size == 2
    gathered = [torch.zeros_like(ddp) for _ in range(2)]
    dist.all_gather(gathered, ddp)
    prompts = [None, None]
    dist.all_gather_object(prompts, [p for p in trainer.sampler.order[:4]])
    ddp_sharded = any(hasattr(p, "full_tensor") for p in trainer.policy.model.parameters())
    ddp_local = sum(p.numel() for p in trainer.policy.model.parameters())

    # fsdp step by step, from the same seed
    trainer = Trainer(config("fsdp"))
    fsdp_stats = [trainer.dist.mean_metrics(trainer.step()) for _ in range(2)]
    params = list(trainer.policy.model.parameters())
    fsdp_sharded = any(hasattr(p, "full_tensor") for p in params)
    fsdp_local = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel()
                     for p in params)
    fsdp = flat(params)
    saved = trainer.save()
    # resuming the sharded run restores its weights, step and this process's prompt order
    order = list(trainer.sampler.order), trainer.sampler.position
    resumed = Trainer(config("fsdp", steps=3), resume=f"{out}/fsdp")
    back = flat(resumed.policy.model.parameters())
    resumed_ok = [None, None]
    dist.all_gather_object(resumed_ok, bool(torch.equal(back, fsdp)
                           and resumed.step_count == 2
                           and (resumed.sampler.order, resumed.sampler.position) == order))
    dist.barrier()
    if dist.get_rank() == 0:
        ddp_stats = [json.loads(r) for r in open(f"{out}/ddp/metrics.jsonl")]
        loaded = AutoModelForCausalLM.from_pretrained(saved)
        result = {
            "rank_gap": float((gathered[0] - gathered[1]).abs().max()),
            "moved": float((ddp - start).abs().max()),
            "different_prompts": prompts[0] != prompts[1],
            "ddp_sharded": ddp_sharded, "fsdp_sharded": fsdp_sharded,
            "share": fsdp_local / ddp_local,
            "loss_gap": max(abs(a["loss/policy"] - b["loss/policy"])
                            for a, b in zip(ddp_stats, fsdp_stats)),
            "norm_gap": max(abs(a["grad_norm"] - b["grad_norm"]) / a["grad_norm"]
                            for a, b in zip(ddp_stats, fsdp_stats)),
            "weight_gap": float((ddp - fsdp).abs().max()),
            "saved_gap": float((flat(loaded.parameters()) - fsdp).abs().max()),
            "resumed": all(resumed_ok)}
        print("RESULT", json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()
""")


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The script's result and its output folder, from one two-process launch."""
    tmp = tmp_path_factory.mktemp("distributed")
    proc = run_two_processes(SCRIPT, tmp)
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT"))
    return json.loads(line.split(" ", 1)[1]), tmp / "run"


def test_two_processes_stay_in_sync(launched):
    result, out = launched
    assert result["rank_gap"] == 0.0         # gradients were averaged: identical weights
    assert result["moved"] > 0.0             # and they did train
    assert result["different_prompts"]       # each rank sampled its own prompts
    rows = [json.loads(r) for r in (out / "ddp" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]   # rank 0 alone logs
    assert (out / "ddp" / "final" / "config.json").exists()


def test_fsdp_two_processes_match_ddp(launched):
    result, _ = launched
    assert not result["ddp_sharded"] and result["fsdp_sharded"]
    assert result["share"] < 0.6             # each process holds about half the weights
    assert result["loss_gap"] < 1e-6         # same losses ...
    assert result["norm_gap"] < 1e-4         # ... same gradients ...
    assert result["weight_gap"] < 1e-4      # ... same weights after two Adam steps (lr 1e-3)
    assert result["saved_gap"] == 0.0        # the checkpoint holds the full, gathered weights
    assert result["resumed"]                 # and --resume re-shards it on every process
