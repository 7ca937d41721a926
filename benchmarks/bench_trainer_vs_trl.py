"""rewardkit's GRPO trainer vs TRL's GRPOTrainer on identical work, in one run.

Same tiny policy (data/arithmetic/policy), prompts, reward (the `math` verifier, gsm8k preset;
TRL gets it through ``rewardkit.to_trl``), completions per step, group size, completion length,
learning rate, clipping (0.2 / 0.28), token-mean loss, group std scaling, no KL, and steps.
Each trainer runs in its own process so peak memory is its own. Prints wall time per step
(median after warm-up), peak resident memory, the reward curve of both (mean of the first and
last steps), held-out accuracy of both final policies measured by the same evaluator, and the
ratios.

    python benchmarks/bench_trainer_vs_trl.py [--steps 60] [--batch-size 64] [--json out.json]

A second configuration, ``--setup qwen32k``, measures the cost of one step on a model shaped
like the real ones where it matters for memory: a random Qwen2 with a 32,768-token vocabulary
and 128-token completions (no learning is expected from random weights; rewards and held-out
accuracy are not reported). Peak memory is reported twice: the process's peak RSS, and its
growth during training over the RSS just before the first step (imports and model loading
left out, so the two libraries' import footprints do not count).

    python benchmarks/bench_trainer_vs_trl.py --setup qwen32k [--steps 4] [--repeats 3]

On a GPU, ``--setup qwen2.5-0.5b`` and ``--setup qwen2.5-1.5b`` use random weights of those
models' shapes (151,936-token vocabulary; hidden 896 × 24 layers, 14/2 heads, MLP 4,864; hidden
1,536 × 28 layers, 12/2 heads, MLP 8,960), 8 prompts × 8 completions of 256 new tokens, HF
``generate`` on both sides, bf16 autocast with fp32 master weights on both sides (rewardkit's
``dtype: bfloat16``, TRL's ``bf16=True``), and run once with gradient checkpointing off and
once on (``--gradient-checkpointing off on``). Every run prints its time per step split into
generation, scoring and training (the rest of the step), generated tokens/s and peak GPU
memory (``torch.cuda.max_memory_allocated``; a run that runs out of memory says so). TRL's
split comes from timing its ``_generate`` and ``_calculate_rewards`` methods; both sides
synchronise the GPU around each step.

    python benchmarks/bench_trainer_vs_trl.py --setup qwen2.5-0.5b     # time and memory
    python benchmarks/bench_trainer_vs_trl.py --setup qwen2.5-1.5b     # memory: does it fit

``--shape tiny --device cpu`` runs any setup's path on a tiny model in seconds (no figures
worth quoting; ``benchmarks/gpu_checks.sh --tiny`` uses it so the GPU script cannot rot).

Needs the ``trl`` extra. Timings on a shared machine are noisy: compare ratios from one run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "arithmetic"


class PeakRSS:
    """Peak resident memory of this process while the block runs, sampled every 5 ms (the
    kernel's ``ru_maxrss`` cannot be reset, so it also counts imports and loading)."""

    def __enter__(self) -> "PeakRSS":
        self.start = self.peak = _rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss_mb())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb())


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


SHAPES: dict[str, dict[str, int]] = {
    "qwen32k": {"vocab_size": 32768, "hidden_size": 256, "intermediate_size": 512,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4},
    "qwen2.5-0.5b": {"vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
                     "num_hidden_layers": 24, "num_attention_heads": 14,
                     "num_key_value_heads": 2},
    "qwen2.5-1.5b": {"vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
                     "num_hidden_layers": 28, "num_attention_heads": 12,
                     "num_key_value_heads": 2},
    "tiny": {"vocab_size": 512, "hidden_size": 32, "intermediate_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1},
}
"""Random Qwen2 policies by name: the Qwen2.5 ones copy the released configs' sizes (tied
embeddings, grouped-query attention), so memory and time are those of the real models."""


def build_random_qwen(out: Path, shape: str, dtype: str = "float32") -> Path:
    """A random Qwen2 of ``SHAPES[shape]`` saved in ``dtype``, with a tokenizer of the same
    vocabulary: the arithmetic characters (so the shipped prompts tokenise as before) plus
    filler tokens up to the size; the model may sample any of them, as a real policy's head
    spans its whole vocabulary."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from rewardkit.runtime.device import resolve_dtype
    from rewardkit.testing.arithmetic import ALPHABET

    sizes = SHAPES[shape]
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for ch in ALPHABET + " ":
        vocab[ch] = len(vocab)
    while len(vocab) < sizes["vocab_size"]:
        vocab[f"<t{len(vocab)}>"] = len(vocab)
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                  unk_token="<unk>", padding_side="left")
    config = Qwen2Config(**sizes, max_position_embeddings=32768, rope_theta=1e6,
                         tie_word_embeddings=True, pad_token_id=0, eos_token_id=1,
                         bos_token_id=1)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = 0, 1
    model.to(resolve_dtype(dtype, torch.device("cpu"))).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def _held_out(model_dir: str, prompts: int, seed: int, max_new_tokens: int) -> dict[str, float]:
    import torch

    import rewardkit
    from rewardkit.trainer.data import load_prompts
    from rewardkit.trainer.evaluation import evaluate
    from rewardkit.trainer.generation import GenerationOptions
    from rewardkit.trainer.policy import load_tokenizer
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    tok = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    items = load_prompts(str(DATA / "test.jsonl"), tok)[:prompts]
    return evaluate(model, tok, items, rewardkit.load("math", preset="gsm8k"),
                    GenerationOptions(max_new_tokens=max_new_tokens), torch.device("cpu"),
                    samples=4)


def _sync(device: str) -> None:
    """Wait for the GPU's queued work, so a timer reads what a step really took."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _record() -> dict:
    """Per step: wall time, generation and scoring time, generated tokens, mean reward."""
    return {"times": [], "generate": [], "score": [], "tokens": [], "rewards": [],
            "oom": False}


def run_rewardkit(args: argparse.Namespace, out: Path) -> dict:
    import torch

    from rewardkit.testing.arithmetic import task_config
    from rewardkit.trainer.loop import Trainer

    cfg = task_config(out, model=args.model, reward="math", reward_options={"preset": "gsm8k"},
                      steps=args.steps, batch_size=args.batch_size, group_size=args.group_size,
                      max_new_tokens=args.max_new_tokens, learning_rate=args.lr,
                      clip_eps_low=0.2, clip_eps_high=0.28, loss_aggregation="token_mean",
                      std_scale="group", seed=args.seed, stop_without_signal=0,
                      chat_template=False, device=args.device, dtype=args.dtype,
                      gradient_checkpointing=args.gradient_checkpointing)
    trainer = Trainer(cfg)
    record = _record()
    with PeakRSS() as memory:
        try:
            for _ in range(args.steps):
                _sync(args.device)
                start = time.perf_counter()
                metrics = trainer.step()
                _sync(args.device)
                record["times"].append(time.perf_counter() - start)
                record["generate"].append(metrics["time/generate"])
                record["score"].append(metrics["time/score"])
                record["tokens"].append(metrics["completion/length"] * args.batch_size)
                record["rewards"].append(metrics["reward/mean"])
        except torch.OutOfMemoryError:
            record["oom"] = True
    if args.eval_prompts and not record["oom"]:
        trainer.policy.model.save_pretrained(out / "final")
        trainer.policy.tokenizer.save_pretrained(out / "final")
    return {**record, "model": str(out / "final"),
            "train_rss_growth_mb": memory.peak - memory.start}


def run_trl(args: argparse.Namespace, out: Path) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    import rewardkit
    from rewardkit.runtime.device import dtype_kwarg
    from rewardkit.trainer.policy import load_tokenizer

    rows = [json.loads(line) for line in open(DATA / "train.jsonl", encoding="utf-8")]
    dataset = Dataset.from_list(rows)
    config = GRPOConfig(
        output_dir=str(out), use_cpu=args.device == "cpu", bf16=args.dtype == "bfloat16",
        gradient_checkpointing=args.gradient_checkpointing, max_steps=args.steps,
        per_device_train_batch_size=args.batch_size, num_generations=args.group_size,
        steps_per_generation=1, gradient_accumulation_steps=1, num_iterations=1,
        max_completion_length=args.max_new_tokens, temperature=1.0, top_p=1.0, top_k=0,
        learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0, max_grad_norm=1.0,
        epsilon=0.2, epsilon_high=0.28, loss_type="dapo", scale_rewards="group", beta=0.0,
        logging_steps=1, save_strategy="no", report_to="none", seed=args.seed,
        disable_dropout=True,
    )
    record = _record()
    step = {"generate": 0.0, "score": 0.0, "tokens": 0}

    def timed(key: str, call: Any, *a: Any) -> Any:
        _sync(args.device)
        start = time.perf_counter()
        result = call(*a)
        _sync(args.device)
        step[key] += time.perf_counter() - start
        return result

    class TimedGRPOTrainer(GRPOTrainer):
        """TRL's trainer unchanged, its generation and reward calls timed."""

        def _generate(self, prompts: list) -> Any:
            result = timed("generate", super()._generate, prompts)
            step["tokens"] += sum(len(ids) for ids in result[1])
            return result

        def _calculate_rewards(self, *a: Any) -> Any:
            return timed("score", super()._calculate_rewards, *a)

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):  # noqa: ANN002, ANN003
            _sync(args.device)
            step.update(generate=0.0, score=0.0, tokens=0)
            self.start = time.perf_counter()

        def on_step_end(self, *a, **k):  # noqa: ANN002, ANN003
            _sync(args.device)
            record["times"].append(time.perf_counter() - self.start)
            for key in ("generate", "score", "tokens"):
                record[key].append(step[key])

    trainer = TimedGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(args.model, **dtype_kwarg(torch.float32)),
        processing_class=load_tokenizer(args.model),
        reward_funcs=[rewardkit.to_trl("math", reference_column="answer", preset="gsm8k")],
        args=config, train_dataset=dataset, callbacks=[Clock()])
    with PeakRSS() as memory:
        try:
            trainer.train()
        except torch.OutOfMemoryError:
            record["oom"] = True
    record["rewards"] = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    if args.eval_prompts and not record["oom"]:
        trainer.save_model(str(out / "final"))
    return {**record, "model": str(out / "final"),
            "train_rss_growth_mb": memory.peak - memory.start}


def child(args: argparse.Namespace) -> None:
    import torch

    args.gradient_checkpointing = args.gradient_checkpointing == ["on"]
    out = Path(args.workdir) / args.child
    result = (run_trl if args.child == "trl" else run_rewardkit)(args, out)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.device.startswith("cuda"):  # the process's own peak: one run per process
        result["peak_gpu_gib"] = torch.cuda.max_memory_allocated() / 2**30
        result["peak_gpu_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    result["held_out"] = (_held_out(result["model"], args.eval_prompts, args.seed,
                                    args.max_new_tokens)
                          if args.eval_prompts and not result["oom"] else {})
    print("RESULT " + json.dumps(result))


def _summary(result: dict, warmup: int) -> dict:
    """Medians over the steps after the warm-up (all steps when there are no more); a run
    that ran out of memory has its memory figures and ``fits`` 0."""
    out = {"fits": float(not result["oom"]), "peak_rss_mb": result["peak_rss_mb"],
           "train_rss_growth_mb": result["train_rss_growth_mb"]}
    for key in ("peak_gpu_gib", "peak_gpu_reserved_gib"):
        if key in result:
            out[key] = result[key]
    kept = slice(warmup, None) if len(result["times"]) > warmup else slice(None)
    times = result["times"][kept]
    if times:
        generate, score = result["generate"][kept], result["score"][kept]
        out.update({"step_s": statistics.median(times),
                    "generate_s": statistics.median(generate),
                    "score_s": statistics.median(score),
                    "train_s": statistics.median(t - g - s for t, g, s in
                                                 zip(times, generate, score)),
                    "tokens_per_s": statistics.median(n / t for n, t in
                                                      zip(result["tokens"][kept], times)),
                    "step_times": times, "generate_times": generate})
    rewards = result["rewards"]
    if result["held_out"]:
        k = max(1, len(rewards) // 5)
        out.update({"reward_first": sum(rewards[:k]) / k, "reward_last": sum(rewards[-k:]) / k,
                    "held_out_pass@1": result["held_out"]["eval/pass@1"],
                    "held_out_greedy": result["held_out"]["eval/greedy"]})
    return out


def _describe(name: str, s: dict) -> str:
    """One run on one line: time per step and its split, tokens/s, peak memory."""
    if "step_s" in s:
        text = (f"{name} {s['step_s']:.3f} s/step (generate {s['generate_s']:.3f}, score "
                f"{s['score_s']:.3f}, train {s['train_s']:.3f}), {s['tokens_per_s']:,.0f} tok/s; "
                f"each timed step {', '.join(f'{t:.2f}' for t in s['step_times'])} s (generate "
                f"{', '.join(f'{t:.2f}' for t in s['generate_times'])})")
    else:
        text = f"{name} no step finished"
    if "peak_gpu_gib" in s:
        text += f", peak GPU {s['peak_gpu_gib']:.2f} GiB (reserved {s['peak_gpu_reserved_gib']:.2f})"
    text += f", peak RSS {s['peak_rss_mb']:.0f} MB (training +{s['train_rss_growth_mb']:.0f})"
    return text + ("" if s["fits"] else ", OUT OF MEMORY")


def _launch(name: str, args: argparse.Namespace, workdir: str, seed: int,
            checkpointing: str) -> dict:
    skip = ("child", "workdir", "json", "repeats", "seed", "setup", "shape",
            "gradient_checkpointing")
    cmd = [sys.executable, __file__, "--child", name, "--workdir", workdir, f"--seed={seed}",
           f"--gradient-checkpointing={checkpointing}",
           *[f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
             if k not in skip and v is not None]]
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        sys.exit(f"{name} run failed:\n{proc.stderr[-4000:]}")
    return json.loads(line[-1][len("RESULT "):])


def _best(results: list[dict], warmup: int) -> dict:
    """Fastest median step time over the repeats (the least disturbed by other load); peaks
    the highest; the other figures averaged."""
    summaries = [_summary(r, warmup) for r in results]
    keys = {k for k in set.intersection(*(set(s) for s in summaries))
            if not isinstance(summaries[0][k], list)}  # each step's times: per run only
    out = {k: sum(s[k] for s in summaries) / len(summaries) for k in keys}
    for key, pick in (("step_s", min), ("peak_rss_mb", max), ("train_rss_growth_mb", max),
                      ("peak_gpu_gib", max), ("peak_gpu_reserved_gib", max), ("fits", min)):
        if key in out:
            out[key] = pick(s[key] for s in summaries)
    return out


SETUPS: dict[str, dict[str, Any]] = {
    "arithmetic": {},
    "qwen32k": {"shape": "qwen32k", "steps": 4, "batch_size": 16, "group_size": 4,
                "max_new_tokens": 128, "eval_prompts": 0, "warmup": 1, "lr": 1e-5},
    "qwen2.5-0.5b": {"shape": "qwen2.5-0.5b", "steps": 3, "warmup": 1, "batch_size": 64,
                     "group_size": 8, "max_new_tokens": 256, "eval_prompts": 0, "lr": 1e-6,
                     "repeats": 1, "device": "cuda", "dtype": "bfloat16",
                     "gradient_checkpointing": ["off", "on"]},
    "qwen2.5-1.5b": {"shape": "qwen2.5-1.5b", "steps": 2, "warmup": 1, "batch_size": 64,
                     "group_size": 8, "max_new_tokens": 256, "eval_prompts": 0, "lr": 1e-6,
                     "repeats": 1, "device": "cuda", "dtype": "bfloat16",
                     "gradient_checkpointing": ["off", "on"]},
}
"""Defaults each ``--setup`` changes (flags given explicitly still win). The 1.5B setup takes
two steps, so the optimizer state exists during the second step's passes: its peak."""

ROWS = (("step_s", "time per step (s)"), ("generate_s", "  generation (s)"),
        ("score_s", "  scoring (s)"), ("train_s", "  training (s)"),
        ("tokens_per_s", "generated tokens/s"), ("peak_gpu_gib", "peak GPU GiB"),
        ("peak_gpu_reserved_gib", "  reserved GiB"), ("fits", "fits (1 yes, 0 OOM)"),
        ("peak_rss_mb", "peak RSS (MB)"), ("train_rss_growth_mb", "RSS growth, train MB"),
        ("reward_first", "reward, first 20%"), ("reward_last", "reward, last 20%"),
        ("held_out_pass@1", "held-out pass@1"), ("held_out_greedy", "held-out greedy acc"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", choices=sorted(SETUPS), default="arithmetic",
                        help="arithmetic: the shipped 2 MB policy, learning curves; qwen32k: a "
                             "random Qwen2 with a 32k vocabulary and 128-token completions, "
                             "step time and memory; qwen2.5-0.5b / qwen2.5-1.5b: random "
                             "weights of those shapes on a GPU, bf16")
    parser.add_argument("--shape", choices=sorted(SHAPES),
                        help="the random policy's shape (default: the setup's); tiny runs a "
                             "setup's path in seconds")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--model", default=str(DATA / "policy"),
                        help="policy for both (default: the warm-started arithmetic policy, or "
                             "the setup's random shape); any local causal LM works")
    parser.add_argument("--batch-size", type=int, default=64, help="completions per step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=6)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-prompts", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=3, help="steps left out of the timing")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each, alternating, with seeds seed, seed+1, ...")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="bfloat16: autocast with fp32 master weights on both sides")
    parser.add_argument("--gradient-checkpointing", nargs="+", choices=["off", "on"],
                        default=["off"], help="run every repeat with each of these")
    parser.add_argument("--json", help="also write all figures and curves here")
    parser.add_argument("--child", choices=["trl", "rewardkit"], help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.set_defaults(**SETUPS[_setup_of(sys.argv[1:])])
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    workdir = tempfile.mkdtemp(prefix="bench_trainer_")
    try:
        compare(args, workdir)
    finally:  # the random policies of the large shapes take gigabytes
        shutil.rmtree(workdir, ignore_errors=True)


def compare(args: argparse.Namespace, workdir: str) -> None:
    """Alternate the two trainers' runs, print every pair and the summary per setting."""
    if args.shape and args.model == str(DATA / "policy"):
        args.model = str(build_random_qwen(Path(workdir) / args.shape, args.shape, args.dtype))
    runs: dict[str, dict[str, list[dict]]] = {gc: {"trl": [], "rewardkit": []}
                                              for gc in args.gradient_checkpointing}
    order = ["trl", "rewardkit"]
    print("every pair, in run order:")
    pair = 0
    for repeat in range(args.repeats):
        for gc in args.gradient_checkpointing:
            first = order if pair % 2 == 0 else order[::-1]  # both see the same noise
            for name in first:
                runs[gc][name].append(_launch(name, args, f"{workdir}/{pair}",
                                              args.seed + repeat, gc))
            cells = [_describe(n, _summary(runs[gc][n][-1], args.warmup)) for n in first]
            pair += 1
            print(f"  pair {pair}, gradient checkpointing {gc}:\n    " + "\n    ".join(cells),
                  flush=True)
    precision = ("bf16 autocast, fp32 master weights" if args.dtype == "bfloat16"
                 else args.dtype)
    print(f"model {args.model} ({args.shape or 'as given'})")
    print(f"GRPO, {args.steps} steps ({args.warmup} warm-up) x {args.batch_size} completions "
          f"(group {args.group_size}, <= {args.max_new_tokens} new tokens), {args.device}, "
          f"{precision}, HF generate, torch threads {_threads()}, best of {args.repeats} "
          f"alternating runs (time), mean over their seeds (rewards, accuracy)")
    summary = {}
    for gc in args.gradient_checkpointing:
        trl, ours = (_best(runs[gc][n], args.warmup) for n in ("trl", "rewardkit"))
        summary[gc] = {"trl": trl, "rewardkit": ours}
        print(f"gradient checkpointing {gc}:")
        print(f"{'':24}{'TRL':>12}{'rewardkit':>12}{'ratio rk/TRL':>14}")
        for key, label in ROWS:
            if key not in trl or key not in ours:
                continue
            ratio = ours[key] / trl[key] if trl[key] else float("nan")
            print(f"{label:24}{trl[key]:12.4g}{ours[key]:12.4g}{ratio:14.3f}")
    if args.json:
        first = runs[args.gradient_checkpointing[0]]
        Path(args.json).write_text(json.dumps({"args": vars(args), "summary": summary, "curves": {
            n: {k: r[0][k] for k in ("rewards", "times", "generate", "score", "tokens")}
            for n, r in first.items()}}, indent=1))


def _setup_of(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg.startswith("--setup="):
            return arg.split("=", 1)[1]
        if arg == "--setup" and i + 1 < len(argv):
            return argv[i + 1]
    return "arithmetic"


def _threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    main()
