"""Scoring time and memory of the shared forms of an ensemble against K separate reward models.

Two comparisons, K = 4 and 8, every scorer through the `ensemble` reward with the same combine
rule and normalisation off, the same samples, order alternating per pair:

* **K heads, one trunk** (``model=DIR``, one trunk pass for all K heads) against K
  `reward_model` members (the same trunk and heads written out as K single-head models by
  ``split_heads``, so both compute the same K values — checked). One single-head model is
  timed too, for the "≈ 1× of one model" comparison.
* **K LoRA adapters on one base** (``model=BASE, adapters=[...]``: one base model in memory,
  K forward passes, one per adapter) against K `reward_model` members that are the same
  adapters merged into the base (peft ``merge_and_unload``) and saved as K full models, so both
  compute the same K values (checked, the largest difference printed). One merged model is
  timed too. Memory: the parameter bytes each form holds (Σ numel × element size over the
  distinct parameters of its loaded torch modules) and, in a fresh subprocess per form, the
  process RSS growth while the form loads.

The models are tiny random Qwen2 classifiers built here (no downloads); each adapter is a peft
``SEQ_CLS`` LoRA (``q_proj``, ``v_proj``, ``up_proj``) whose LoRA matrices and head are
perturbed with its own seed, so the members differ.

    python benchmarks/bench_ensemble.py --ks 4 8 --pairs 3 --samples 64
    python benchmarks/bench_ensemble.py --forms lora --no-rss    # LoRA comparison only
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Iterable

import rewardkit
from rewardkit import Sample
from rewardkit.models.loading import resolve_device_dtype
from rewardkit.models.multihead import split_heads
from rewardkit.testing import make_random_lora_adapter, make_tiny_causal_lm, make_tiny_reward_model

LORA_TARGETS = ["q_proj", "v_proj", "up_proj"]


def samples(n: int) -> list[Sample]:
    words = "the sum of these numbers is found by adding one step per line".split()
    return [Sample(f"Problem {i}: " + " ".join(words[: 3 + i % 8]),
                   " ".join(words * (1 + i % 6))) for i in range(n)]


def timed(scorer, batch) -> tuple[float, list]:
    start = time.perf_counter()
    out = scorer.score(batch)
    return time.perf_counter() - start, out


def max_difference(a, b) -> float:
    """Largest |difference| between the K member values two ensembles give the same samples."""
    return max(abs(x - y) for s, t in zip(a, b)
               for x, y in zip(s.components.values(), t.components.values()))


def run_pairs(scorers: list[tuple[str, Any]], batch, pairs: int) -> list[list[float]]:
    """Time each scorer on ``batch`` once per pair, order reversed on odd pairs; the times
    (seconds) per scorer, in the order given."""
    times: list[list[float]] = [[] for _ in scorers]
    for pair in range(pairs):
        order = list(enumerate(scorers))
        if pair % 2:
            order.reverse()
        for i, (_, scorer) in order:
            times[i].append(timed(scorer, batch)[0])
    return times


def compare(k: int, label: str, shared: Any, separate: Any, one: Any, batch, pairs: int
            ) -> None:
    """Warm up, check that ``shared`` and ``separate`` give the same K values, then time the
    three scorers in alternating pairs and print every pair and the medians."""
    for scorer in (shared, separate, one):  # warm-up
        scorer.score(batch[:4])
    worst = max_difference(shared.score(batch), separate.score(batch))
    assert worst < 1e-4, f"{label}: the shared form and the {k} separate models disagree by " \
        f"{worst}"
    times = run_pairs([("shared", shared), ("separate", separate), ("one", one)], batch, pairs)
    for pair, (t_sh, t_sep, t_one) in enumerate(zip(*times)):
        print(f"K={k} {label} pair {pair + 1}: shared {t_sh * 1e3:.1f} ms, {k} separate "
              f"{t_sep * 1e3:.1f} ms (separate/shared {t_sep / t_sh:.2f}x), one model "
              f"{t_one * 1e3:.1f} ms (shared/one {t_sh / t_one:.2f}x)")
    ms, mp, mo = (statistics.median(x) for x in times)
    print(f"K={k} {label} medians: shared {ms * 1e3:.1f} ms, separate {mp * 1e3:.1f} ms, one "
          f"{mo * 1e3:.1f} ms; separate/shared {mp / ms:.2f}x, shared/one {ms / mo:.2f}x "
          f"(max |difference| of the K values {worst:.1e})")


# -- the K-head comparison ------------------------------------------------------------------
def bench_heads(k: int, args, batch, tmp: Path) -> None:
    multi = make_tiny_reward_model(tmp / f"multi{k}", num_labels=k,
                                   hidden_size=args.hidden, num_layers=args.layers)
    singles = split_heads(multi, tmp / f"singles{k}")
    shared = rewardkit.load("ensemble", model=str(multi), normalize=False)
    separate = rewardkit.load("ensemble", normalize=False, members=[
        {"reward": "reward_model", "options": {"model": str(p)}} for p in singles])
    one = rewardkit.load("reward_model", model=str(singles[0]))
    compare(k, "heads", shared, separate, one, batch, args.pairs)
    for scorer in (shared, separate, one):
        scorer.close()


# -- the LoRA comparison --------------------------------------------------------------------
def make_adapter(base: Path, out: Path, seed: int, rank: int) -> Path:
    """A peft SEQ_CLS LoRA adapter of ``base``; its LoRA matrices and head are perturbed with
    ``seed`` (a fresh LoRA is the identity, so unperturbed members would not differ)."""
    return make_random_lora_adapter(base, out, seed=seed, noise_seed=1000 + seed, rank=rank,
                                    target_modules=LORA_TARGETS, scale=0.1)


def merge_adapter(base: Path, adapter: Path, out: Path) -> Path:
    """``adapter`` merged into ``base`` (``merge_and_unload``), saved with the base's tokenizer
    as a full single-output reward model."""
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base))
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    merged.config.pad_token_id = tokenizer.pad_token_id
    merged.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


def torch_modules(scorer) -> list[Any]:
    """The torch modules a reward or ensemble holds (the shared model, or each member's)."""
    if getattr(scorer, "shared", None) is not None:
        return [scorer.shared.model]
    if hasattr(scorer, "members"):
        return [m for member in scorer.members for m in torch_modules(member)]
    return [scorer.model]


def parameter_bytes(modules: Iterable[Any]) -> int:
    """Σ numel × element size over the distinct parameters (by storage) of ``modules``."""
    seen: set[int] = set()
    total = 0
    for module in modules:
        for p in module.parameters():
            if p.data_ptr() not in seen:
                seen.add(p.data_ptr())
                total += p.numel() * p.element_size()
    return total


RSS_PROBE = """
import gc, json, sys
import psutil, peft, rewardkit, torch, transformers
from peft import PeftModel
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from transformers.models.qwen2 import modeling_qwen2
import rewardkit.models.ensemble, rewardkit.models.lora_members, rewardkit.models.reward_model
transformers.utils.logging.set_verbosity_error()
gc.collect()
proc = psutil.Process()
before = proc.memory_info().rss
scorer = rewardkit.load("ensemble", **json.loads(sys.argv[1]))
gc.collect()
print(json.dumps({"rss_growth": proc.memory_info().rss - before}))
"""


def rss_growth(options: dict[str, Any]) -> int | None:
    """Process RSS growth (bytes) while ``ensemble`` loads with ``options``, in a fresh Python
    process whose libraries are imported before the measurement; None when psutil is
    missing or the probe fails."""
    try:
        import psutil  # noqa: F401
    except ImportError:
        return None
    done = subprocess.run([sys.executable, "-c", RSS_PROBE, json.dumps(options)],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        print(f"RSS probe failed: {done.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])["rss_growth"]


def bench_lora(k: int, args, batch, tmp: Path, base: Path) -> None:
    adapters = [make_adapter(base, tmp / f"lora{k}" / f"adapter_{i}", seed=i, rank=args.rank)
                for i in range(k)]
    merged = [merge_adapter(base, a, tmp / f"lora{k}" / f"merged_{i}")
              for i, a in enumerate(adapters)]
    lora_options = {"model": str(base), "adapters": [str(a) for a in adapters],
                    "normalize": False}
    merged_options = {"normalize": False, "members": [
        {"reward": "reward_model", "options": {"model": str(p)}} for p in merged]}
    lora = rewardkit.load("ensemble", **lora_options)
    separate = rewardkit.load("ensemble", **merged_options)
    one = rewardkit.load("reward_model", model=str(merged[0]))
    compare(k, "LoRA", lora, separate, one, batch, args.pairs)
    b_lora, b_sep, b_one = (parameter_bytes(torch_modules(s)) for s in (lora, separate, one))
    print(f"K={k} LoRA parameter bytes: one base + {k} adapters {b_lora / 2**20:.2f} MiB, "
          f"{k} merged models {b_sep / 2**20:.2f} MiB, one model {b_one / 2**20:.2f} MiB; "
          f"merged/LoRA {b_sep / b_lora:.2f}x, LoRA/one {b_lora / b_one:.2f}x")
    for scorer in (lora, separate, one):
        scorer.close()
    del lora, separate, one
    gc.collect()
    if args.rss:
        r_lora, r_sep = rss_growth(lora_options), rss_growth(merged_options)
        if r_lora is not None and r_sep is not None:
            print(f"K={k} LoRA RSS growth while loading (fresh process each): one base + {k} "
                  f"adapters {r_lora / 2**20:.1f} MiB, {k} merged models "
                  f"{r_sep / 2**20:.1f} MiB (merged/LoRA {r_sep / max(r_lora, 1):.2f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--forms", nargs="+", choices=["heads", "lora"], default=["heads", "lora"],
                    help="which comparisons to run (default both)")
    ap.add_argument("--rank", type=int, default=8, help="LoRA rank of the adapters")
    ap.add_argument("--no-rss", dest="rss", action="store_false",
                    help="skip the RSS-growth subprocesses of the LoRA comparison")
    args = ap.parse_args()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()  # the base's fresh classification head is expected
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing")
    batch = samples(args.samples)
    print(f"{args.samples} samples; tiny random Qwen2 classifiers, hidden {args.hidden}, "
          f"{args.layers} layers; device and dtype {resolve_device_dtype('auto', 'auto')}")
    with tempfile.TemporaryDirectory() as tmp:
        if "heads" in args.forms:
            for k in args.ks:
                bench_heads(k, args, batch, Path(tmp))
        if "lora" in args.forms:
            base = make_tiny_causal_lm(Path(tmp) / "base", hidden_size=args.hidden,
                                       num_layers=args.layers)
            print(f"LoRA: rank {args.rank} on {', '.join(LORA_TARGETS)} of a tiny random "
                  "Qwen2 base (same size)")
            for k in args.ks:
                bench_lora(k, args, batch, Path(tmp), base)


if __name__ == "__main__":
    main()
