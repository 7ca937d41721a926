"""The format + math + length composition of examples/ drives `rewardkit train grpo` on the
shipped arithmetic policy, and the same file scores rollouts offline."""
import json
from pathlib import Path

import pytest

import rewardkit
from rewardkit import Sample

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "arithmetic_format_math_length.yaml"
R1_EXAMPLE = ROOT / "examples" / "r1_format_math_length.yaml"


def test_composition_ranks_answers_as_intended():
    scorer = rewardkit.load(str(EXAMPLE))
    right, chatty_right, wrong = scorer.score([Sample("7+11=", "18", "18"),
                                               Sample("7+11=", "it is 18", "18"),
                                               Sample("7+11=", "19", "18")])
    assert set(right.components) == {"correct", "format", "length", "length.correct"}
    assert right.value > chatty_right.value > wrong.value
    assert right.components["format"] == 1.0 and chatty_right.components["format"] == 0.0
    scorer.close()


def test_r1_style_composition_gates_on_format():
    scorer = rewardkit.load(str(R1_EXAMPLE))
    good = "<think>\n7 plus 11 is 18\n</think>\n<answer>\n18\n</answer>"
    no_format = "18"
    looping = "<think>\n" + "wait let me check " * 30 + "\n</think>\n<answer>\n18\n</answer>"
    s_good, s_bad, s_loop = scorer.score([Sample("7+11=", t, "18")
                                          for t in (good, no_format, looping)])
    assert s_bad.value == -1.0 and s_bad.info["gate_failed"] == "format"
    assert s_good.value > s_loop.value > s_bad.value
    assert s_loop.components["repetition"] < -0.5
    scorer.close()


def test_rewardkit_train_grpo_runs_the_composition(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if not (ROOT / "data" / "arithmetic" / "policy").is_dir():
        pytest.skip("data/arithmetic/policy is not built")
    from rewardkit.cli import main

    out = tmp_path / "run"
    code = main(["train", "grpo", "--config", str(EXAMPLE), "--steps", "3", "--batch-size", "32",
                 "--group-size", "8", "--output", str(out), "--quiet",
                 "--set", "mini_batch_size=32", "--set", "eval_max_prompts=8",
                 "--set", "eval_samples=2", "--set", "eval_k=[1]", "--set", "plots=false",
                 "--set", "tensorboard=false", "--set", f"model={ROOT / 'data/arithmetic/policy'}",
                 "--set", f"data={ROOT / 'data/arithmetic/train.jsonl'}",
                 "--set", f"eval_data={ROOT / 'data/arithmetic/test.jsonl'}"])
    assert code == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "reward/mean" in r]
    assert len(steps) == 3
    for r in steps:  # every component reaches the trainer's metrics, with finite values
        for name in ("correct", "format", "length"):
            assert -1.0 <= r[f"reward/{name}"] <= 1.0
        assert r["reward/errors"] == 0.0
    evals = [r for r in rows if "eval/gold_mean" in r]
    assert evals, "the math gold reward is evaluated beside the composition"
    assert (out / "final").is_dir()
