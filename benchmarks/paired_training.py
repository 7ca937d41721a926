"""The shared driver of the training-step benchmarks against a peer trainer: alternate who runs
first in each pair, print every pair and the ratio of the medians; and what both reward-model
benchmarks (``train rm``, ``train prm``) time the same way: rewardkit's steps, and a
``transformers`` Trainer's by a callback.

Options every such benchmark takes: ``--pairs --steps --warmup --batch-size``; ``--device cuda``
trains on the GPU in bf16 on both sides (fp32 master weights, bf16 autocast: rewardkit's
``dtype: bfloat16`` and the Trainer's ``bf16=True``), and prints the peak GPU memory of each
run; ``--hidden H --layers L`` replaces the shipped base with a random Qwen2 of that size (same
tokenizer and data), so that a GPU has work worth timing; ``--rows N`` trains both sides on the
data files' first N rows (the peers tokenise the whole file before their first step)."""
from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

DATA = Path(__file__).resolve().parents[1] / "data" / "learned"
"""The shipped arithmetic base model and its preference and stepwise data."""


@dataclass
class Setting:
    """What both sides of one run are given."""

    steps: int
    batch: int
    warmup: int
    workdir: str
    base: Path
    device: str
    data: Path = DATA
    """The folder with ``rm_train.jsonl`` and ``prm_train.jsonl`` both sides train on."""

    @property
    def bf16(self) -> bool:
        return self.device == "cuda"


@dataclass
class Timing:
    step_s: float
    """Median seconds per optimizer step after the warm-up."""
    peak_gib: float | None = None
    """Peak GPU memory allocated during the run (None on CPU)."""


Run = Callable[[Setting], Timing]


def scaled_base(hidden: int, layers: int, out: Path) -> Path:
    """A random Qwen2 shaped ``hidden`` × ``layers`` (64-wide attention heads, SwiGLU width
    8/3 · hidden) with the shipped base's tokenizer, saved to ``out``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(DATA / "base")
    heads = max(1, hidden // 64)
    config.update({"hidden_size": hidden, "num_hidden_layers": layers,
                   "num_attention_heads": heads, "num_key_value_heads": heads,
                   "intermediate_size": (hidden * 8 // 3 + 63) // 64 * 64,
                   "layer_types": ["full_attention"] * layers})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(out)
    AutoTokenizer.from_pretrained(DATA / "base").save_pretrained(out)
    return out


def first_rows(rows: int, out: Path) -> Path:
    """A folder with the first ``rows`` rows of each training file."""
    out.mkdir()
    for name in ("rm_train.jsonl", "prm_train.jsonl"):
        with open(DATA / name, encoding="utf-8") as src:
            (out / name).write_text("".join(itertools.islice(src, rows)), encoding="utf-8")
    return out


def compare(description: str, peer: str, run_peer: Run, run_rewardkit: Run, what: str,
            unit: str, tokens_per_item: Callable[[Path], float]) -> None:
    """Parse the options, run the pairs and print them, with samples/s, tokens/s (real tokens,
    ``tokens_per_item(base)`` per batch item) and, on a GPU, peak memory."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: both sides train on the GPU in bf16 autocast")
    parser.add_argument("--hidden", type=int, default=0,
                        help="a random Qwen2 of this width instead of the shipped base")
    parser.add_argument("--layers", type=int, default=12, help="its depth (with --hidden)")
    parser.add_argument("--rows", type=int, help="train on the first ROWS rows of the data "
                                                  "(default: all; at least steps × batch size)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = scaled_base(args.hidden, args.layers, Path(tmp) / "base") if args.hidden \
            else DATA / "base"
        data = first_rows(args.rows, Path(tmp) / "data") if args.rows else DATA
        per_item = tokens_per_item(base)
        ours: list[Timing] = []
        theirs: list[Timing] = []
        for i in range(args.pairs):
            order = (peer, "rewardkit") if i % 2 == 0 else ("rewardkit", peer)
            for who in order:
                with tempfile.TemporaryDirectory() as workdir:
                    run = run_peer if who == peer else run_rewardkit
                    setting = Setting(args.steps, args.batch_size, args.warmup, workdir, base,
                                      args.device, data)
                    (theirs if who == peer else ours).append(measured(run, setting))
            print(f"pair {i + 1} ({' then '.join(order)}): {peer} {describe(theirs[-1])}, "
                  f"rewardkit {describe(ours[-1])}, ratio "
                  f"{ours[-1].step_s / theirs[-1].step_s:.2f}", flush=True)
    t = statistics.median(x.step_s for x in theirs)
    o = statistics.median(x.step_s for x in ours)
    size = f"{args.hidden}x{args.layers} random Qwen2" if args.hidden else "shipped base"
    precision = "bf16 autocast on cuda" if args.device == "cuda" else "fp32 on cpu"
    print(f"\n{what} training step, {size}, {precision}, batch {args.batch_size} {unit} "
          f"({per_item:.0f} real tokens per {unit[:-1]}), median of {args.pairs} runs:")
    for name, s in ((peer, t), ("rewardkit", o)):
        peaks = [x.peak_gib for x in (theirs if name == peer else ours) if x.peak_gib is not None]
        memory = f", peak GPU memory {max(peaks):.2f} GiB" if peaks else ""
        print(f"  {name}: {s * 1000:.1f} ms/step, {args.batch_size / s:.0f} {unit}/s, "
              f"{args.batch_size * per_item / s:,.0f} tokens/s{memory}")
    print(f"  ratio rewardkit/{peer} {o / t:.2f}x (target <= 1.0)")


def measured(run: Run, setting: Setting) -> Timing:
    """``run(setting)``, with the GPU's peak memory of that run alone: what earlier runs in
    this process still hold (collected first, and what survives subtracted) is not counted."""
    if setting.device != "cuda":
        return run(setting)
    import gc

    import torch

    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    held_before = torch.cuda.memory_allocated()
    timing = run(setting)
    torch.cuda.synchronize()
    timing.peak_gib = (torch.cuda.max_memory_allocated() - held_before) / 2**30
    return timing


def describe(timing: Timing) -> str:
    memory = f" (peak {timing.peak_gib:.2f} GiB)" if timing.peak_gib is not None else ""
    return f"{timing.step_s * 1000:.1f} ms/step{memory}"


def reward_config(task: str, setting: Setting, steps: int | None = None) -> Any:
    """``train rm|prm`` options of both reward-model benchmarks: the base and its training
    data, no held-out split, constant learning rate 1e-4, fp32 on CPU or bf16 autocast on a
    GPU, no output beyond the checkpoint folder."""
    from rewardkit.models.train_config import RewardTrainConfig

    return RewardTrainConfig(task=task, model=str(setting.base),
                             data=str(setting.data / f"{task}_train.jsonl"), eval_fraction=0.0,
                             output_dir=setting.workdir, steps=steps or setting.steps,
                             batch_size=setting.batch, learning_rate=1e-4,
                             lr_schedule="constant", progress=False, tensorboard=False,
                             plots=False, device=setting.device,
                             dtype="bfloat16" if setting.bf16 else "float32", eval_every=0)


def time_reward_steps(task: str, setting: Setting) -> Timing:
    """rewardkit's side: median seconds of ``RewardTrainer.step()`` after the warm-up (on a GPU
    each step is synchronised, as the Trainer's callback sees a finished step only after its
    loss has been read back)."""
    from rewardkit.models.train import RewardTrainer

    trainer = RewardTrainer(reward_config(task, setting))
    sync = cuda_sync(setting.device)
    times = []
    for _ in range(setting.steps):
        start = time.perf_counter()
        trainer.step()
        sync()
        times.append(time.perf_counter() - start)
    return Timing(statistics.median(times[setting.warmup:]))


def cuda_sync(device: str) -> Callable[[], None]:
    if device != "cuda":
        return lambda: None
    import torch

    return torch.cuda.synchronize


def step_clock(times: list[float], device: str = "cpu") -> Any:
    """A ``transformers`` callback appending to ``times`` the time from one step's end to the
    next: the whole iteration, batch collation included (rewardkit's ``step()`` also builds its
    batch; ``on_step_begin`` fires after the fetch). On a GPU each step end is synchronised."""
    from transformers import TrainerCallback

    sync = cuda_sync(device)

    class Clock(TrainerCallback):
        last: float | None = None

        def on_step_end(self, *a, **k):  # noqa: ANN002, ANN003
            sync()
            now = time.perf_counter()
            if self.last is not None:
                times.append(now - self.last)
            self.last = now

    return Clock()
