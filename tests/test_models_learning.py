"""Proof that `train rm|prm` learn, on checkable data from the arithmetic task
(data/learned/, see rewardkit/models/arithmetic.py): held-out pairwise accuracy for the reward
model, ProcessBench F1 for the process reward model, and the trained reward model driving GRPO.

The default tests train briefly from the arithmetic base on an easy version of the data (one-digit
addends, first number up to 30; slips still balanced, so no trivial rule solves it) and check a
clear step above chance; the slow tests train with data/learned/recipe.yaml on the shipped data,
as benchmarks/learned_figures.py does, and check the held-out figures."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import rewardkit  # noqa: E402
from rewardkit.cli import main  # noqa: E402
from rewardkit.models import arithmetic  # noqa: E402
from rewardkit.models.data import read_pairs, read_solutions  # noqa: E402
from rewardkit.models.evaluation import evaluate_process_reward, evaluate_reward_model  # noqa: E402
from rewardkit.models.train import RewardTrainer  # noqa: E402
from rewardkit.models.train_config import RewardTrainConfig  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "learned"
POLICY = Path(__file__).resolve().parents[1] / "data" / "arithmetic"

RM_FAST_TARGET, PRM_FAST_TARGET = 0.6, 0.2   # 50 steps: clearly above chance (0.5, 0.0)
FAST = {"rm": dict(steps=50, batch_size=32, learning_rate=1e-3),
        "prm": dict(steps=50, batch_size=32, learning_rate=1e-3)}
EASY = arithmetic.Spec(start=(1, 30), addend_digits=(1,), steps=(2, 4), notes="easy")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The shipped base (the runs docs/learned.md reports start from it), else a fresh one."""
    if (DATA / "base" / "config.json").is_file():
        return str(DATA / "base")
    return str(arithmetic.make_base(tmp_path_factory.mktemp("arith-base")))


@pytest.fixture(scope="module")
def easy(tmp_path_factory):
    """The easy data: 2,000 training and 200 held-out problems."""
    from rewardkit.testing.arithmetic import write_jsonl

    root = tmp_path_factory.mktemp("easy")
    seen: set[str] = set()
    test = arithmetic.make_problems(200, EASY, 1, seen)
    train = arithmetic.make_problems(2000, EASY, 2, seen)
    write_jsonl(arithmetic.preference_rows(train, 3, EASY), root / "rm_train.jsonl")
    write_jsonl(arithmetic.preference_rows(test, 4, EASY), root / "rm_test.jsonl")
    write_jsonl(arithmetic.stepwise_rows(train, 5, EASY), root / "prm_train.jsonl")
    write_jsonl(arithmetic.stepwise_rows(test, 6, EASY), root / "prm_test.jsonl")
    return root


def _train(task, base, out, data=DATA, **options):
    values = dict(lr_schedule="constant", warmup_steps=5)
    values.update(options)
    cfg = RewardTrainConfig(task=task, model=base, data=str(data / f"{task}_train.jsonl"),
                            eval_data=str(data / f"{task}_test.jsonl"), output_dir=str(out),
                            eval_every=0, progress=False, tensorboard=False, plots=False,
                            device="cpu", **values)
    RewardTrainer(cfg).train()
    return out / "final"


def _recipe():
    from rewardkit.compose import read_config_file

    return dict(read_config_file(DATA / "recipe.yaml")["train"])


def _rm_accuracy(model, data=DATA, name="rm_test.jsonl"):
    scorer = rewardkit.load("reward_model", model=str(model), device="cpu")
    return evaluate_reward_model(scorer, read_pairs(str(data / name)))


def _prm_f1(model, data=DATA, name="prm_test.jsonl"):
    scorer = rewardkit.load("process_reward", model=str(model), device="cpu")
    return evaluate_process_reward(scorer, read_solutions(str(data / name)))


@pytest.fixture(scope="module")
def fast_rm(base, easy, tmp_path_factory):
    return _train("rm", base, tmp_path_factory.mktemp("rm"), easy, **FAST["rm"])


def test_reward_model_learns_to_prefer_correct_worked_answers(fast_rm, easy):
    report = _rm_accuracy(fast_rm, easy)
    assert report["overall"]["accuracy"] >= RM_FAST_TARGET, report["overall"]
    # the easy data has no shortcut either: every trivial rule is near a coin
    for rule in ("smaller", "larger", "shorter", "longer"):
        assert abs(report["heuristics"]["overall"][rule]["accuracy"] - 0.5) < 0.1


def test_process_reward_model_learns_to_find_the_first_wrong_step(base, easy, tmp_path):
    report = _prm_f1(_train("prm", base, tmp_path, easy, **FAST["prm"]), easy)
    assert report["layout"] == "processbench"
    assert report["overall"]["f1"] >= PRM_FAST_TARGET, report["overall"]
    # rules that read no arithmetic cannot get both accuracies above 0
    assert all(rule["f1"] == 0.0 for rule in report["heuristics"]["overall"].values())


def test_the_trained_reward_model_drives_grpo(fast_rm, tmp_path):
    out = tmp_path / "grpo"
    assert main(["train", "grpo", "--model", str(POLICY / "policy"),
                 "--data", str(POLICY / "train.jsonl"), "--reward", "reward_model",
                 "-O", f"model={fast_rm}", "-O", "device=cpu", "--steps", "2",
                 "--batch-size", "8", "--group-size", "4", "--max-new-tokens", "6",
                 "--learning-rate", "1e-4", "--device", "cpu", "--quiet", "--output", str(out),
                 "--set", "tensorboard=false", "--set", "plots=false"]) == 0
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert [r["step"] for r in rows if "reward/mean" in r] == [1, 2]
    assert all(r["reward/errors"] == 0 for r in rows if "reward/errors" in r)
    assert any(r["reward/std"] > 0 for r in rows if "reward/std" in r)  # a graded reward


@pytest.fixture(scope="module")
def recipe_rm_report(base, tmp_path_factory):
    """Trained as benchmarks/learned_figures.py trains it (data/learned/recipe.yaml), scored
    on every held-out slice; the figures themselves are in docs/learned.md."""
    model = _train("rm", base, tmp_path_factory.mktemp("recipe-rm"), **_recipe())
    return _rm_accuracy(model, name="rm_slices.jsonl")


@pytest.mark.slow
def test_recipe_reward_model_learned_no_direction_shortcut(recipe_rm_report):
    """The model trained on the old data preferred the smaller answer on most pairs."""
    agreement = recipe_rm_report["heuristics"]["overall"]["smaller"]["model_agreement"]
    assert 0.4 <= agreement <= 0.6, agreement
    assert recipe_rm_report["subsets"]["in_distribution"]["accuracy"] > 0.55


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="not reached by the shipped recipe: 0.69 in "
                   "distribution, 0.55-0.93 on the slices, 3 seeds (docs/learned.md)")
def test_recipe_reward_model_reaches_the_slice_targets(recipe_rm_report):
    subsets = recipe_rm_report["subsets"]
    assert subsets["in_distribution"]["accuracy"] >= 0.95
    assert all(block["accuracy"] >= 0.85 for block in subsets.values()), subsets


@pytest.mark.slow
def test_recipe_process_reward_model_beats_every_trivial_rule_in_distribution(base, tmp_path):
    report = _prm_f1(_train("prm", base, tmp_path, **_recipe()), name="prm_slices.jsonl")
    block = report["subsets"]["in_distribution"]
    assert block["f1"] >= 0.1, block   # every trivial rule scores F1 0
