"""``benchmarks/gpu_checks.sh --tiny``: every part of the GPU script runs on the CPU with tiny
shapes and leaves a log with its figures, so the script cannot rot between the rare times a GPU
is at hand (there it runs the same benchmarks with the real shapes). And what its GRPO
comparison relies on: gradient checkpointing leaves generation its KV cache."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_checks.sh"
NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?"

FIGURES = {
    "environment": r"torch \S+ cuda \S+ transformers \S+ trl \S+",
    "grpo_0.5b": (rf"gradient checkpointing off:\n.*\ntime per step \(s\)\s+{NUMBER}\s+{NUMBER}"
                  rf"\s+{NUMBER}\n  generation \(s\)\s+{NUMBER}\s+{NUMBER}[\s\S]*\n"
                  rf"generated tokens/s\s+{NUMBER}\s+{NUMBER}[\s\S]*\nfits \(1 yes, 0 OOM\)\s+1\s+1\s"),
    "grpo_1.5b": (rf"gradient checkpointing on:[\s\S]*\ngenerated tokens/s\s+{NUMBER}\s+{NUMBER}"
                  rf"[\s\S]*\nfits \(1 yes, 0 OOM\)\s+1\s+1\s"),
    "server": rf"2c\. large batches[\s\S]*median ratio over 1 pairs: {NUMBER}x",
    "rm_train": rf"ratio rewardkit/TRL RewardTrainer {NUMBER}x",
    "prm_train": rf"ratio rewardkit/PRMTrainer-equivalent {NUMBER}x",
    "batch_sizes": rf"batch +4: 2-head ensemble time / one model time {NUMBER}x",
    "tests": r"\d+ (?:passed|skipped)",
}
"""Each part's log and a line of figures it must hold."""


def run_tiny(script: Path, logs: Path) -> str:
    """The script's own report of a ``--tiny`` run into ``logs``."""
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(script), "--tiny", str(logs)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    return done.stdout + done.stderr


def missing_figures(logs: Path, report: str) -> dict[str, str]:
    """Parts that failed, or whose log lacks its figures, with why."""
    problems = {}
    codes = dict(re.findall(r"^== (\S+) .*\n   rc=(\d+)", report, re.M))
    for part, pattern in FIGURES.items():
        log = logs / f"{part}.log"
        if part != "environment" and codes.get(part) != "0":
            problems[part] = f"exit status {codes.get(part, 'not reported')}"
        elif not log.is_file() or not re.search(pattern, log.read_text()):
            problems[part] = "no figures in its log"
    return problems


@pytest.mark.integration
def test_every_part_of_the_gpu_script_runs_tiny_on_cpu_with_its_figures(tmp_path):
    report = run_tiny(SCRIPT, tmp_path)
    problems = missing_figures(tmp_path, report)
    assert not problems, f"{problems}\n{report[-6000:]}"


def test_generation_keeps_its_kv_cache_with_gradient_checkpointing_on(tmp_path):
    """Checkpointing turns the model's ``use_cache`` off for training; were generation to lose
    its cache too, each new token would re-read the whole sequence (at 256 tokens, most of a
    GRPO step) and the comparison with TRL would measure that instead."""
    from rewardkit.testing.arithmetic import task_config
    from rewardkit.trainer.loop import Trainer

    trainer = Trainer(task_config(tmp_path, gradient_checkpointing=True, max_new_tokens=5))
    fed: list[int] = []
    trainer.policy.model.model.register_forward_pre_hook(
        lambda module, args, kwargs: fed.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    prompt = trainer.sampler.next(1)[0].ids
    rollout = trainer.generate([prompt])
    steps = rollout.completion_ids.shape[1]
    assert steps > 1 and fed[0] == len(prompt) and fed[1:steps] == [1] * (steps - 1)


def test_parts_selects_the_named_parts_in_the_scripts_order_and_refuses_unknown_names(tmp_path):
    """The parts together outlast one 10-minute command, so a GPU session runs a named subset:
    ``--list`` says what would run, with each limit scaled, and a misspelt part is refused before
    anything starts rather than silently skipped."""
    listed = subprocess.run(["bash", str(SCRIPT), "--parts", "tests,server", "--list",
                             str(tmp_path), "0.5"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert re.findall(r"^== (\S+) \(limit (\d+) s\)", listed.stdout, re.M) == [
        ("server", "125"), ("tests", "20")]
    assert not list(tmp_path.glob("*.log"))
    wrong = subprocess.run(["bash", str(SCRIPT), "--parts", "server,serve", str(tmp_path)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "unknown part 'serve'" in wrong.stderr
    assert not list(tmp_path.glob("*.log"))
