"""The over-optimisation experiment script (examples/overoptimisation.py): its data, its summary
of a run, and a tiny end-to-end run of all four rewards from the same start."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import load_script

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]


def _module():
    return load_script(ROOT / "examples" / "overoptimisation.py", "overoptimisation_example")


def test_pairs_set_the_right_sum_against_a_slip_and_noise_swaps_them(tmp_path):
    exp = _module()
    paths = exp.build_data(tmp_path, pairs=200, noise=0.0, seed=0)
    rows = [json.loads(line) for line in open(paths["pairs"])]
    assert len(rows) == 200 and len({r["prompt"] for r in rows}) == 200
    for r in rows:
        a, b = map(int, r["prompt"].rstrip("=").split("+"))
        assert r["chosen"] == str(a + b) and int(r["rejected"]) - (a + b) in (
            10, -1, 1, -10, 11, 9)
    train_prompts = {json.loads(line)["prompt"] for line in open(exp.ARITH / "train.jsonl")}
    held = [json.loads(line) for line in open(paths["heldout"])]
    assert not {r["prompt"] for r in held} & train_prompts   # held-out prompts never trained on
    noisy = [json.loads(line) for line in open(exp.build_data(tmp_path / "n", 400, 0.5, 0)[
        "pairs"])]
    swapped = sum(1 for r in noisy if r["chosen"] != str(sum(map(int, r["prompt"].rstrip(
        "=").split("+")))))
    assert 140 < swapped < 260


def test_summary_finds_the_best_gold_and_how_far_it_fell():
    exp = _module()
    points = [{"step": 0, "proxy": -1.0, "gold": 0.3, "kl": 0.0},
              {"step": 10, "proxy": 0.0, "gold": 0.5, "kl": 0.2},
              {"step": 20, "proxy": 2.0, "gold": 0.1, "kl": 1.5}]
    s = exp.summarise(points)
    assert (s["gold_best"], s["best_step"], s["kl_at_best"]) == (0.5, 10, 0.2)
    assert s["gold_final"] == 0.1 and s["gold_fall_after_best"] == pytest.approx(0.4)
    assert s["proxy_rise_after_best"] == 2.0 and s["gap_final"] == pytest.approx(1.9)


def test_tiny_run_trains_the_proxies_and_runs_all_four_rewards_from_one_start(tmp_path,
                                                                              monkeypatch):
    exp = _module()
    out = tmp_path / "exp"
    monkeypatch.setattr(sys, "argv", [
        "overoptimisation.py", "--out", str(out), "--pairs", "48", "--rm-steps", "3",
        "--members", "2", "--steps", "2", "--eval-every", "1", "--seeds", "0", "--jobs", "1",
        "--runs", ",".join(exp.RUNS), "-q"])
    monkeypatch.setattr(exp, "run_policy", _small(exp.run_policy))
    exp.main()
    results = json.loads((out / "results.json").read_text())
    assert set(results["summaries"]) == set(exp.RUNS)
    manifest = json.loads((out / "rm_ensemble" / "final" / "rewardkit.json").read_text())
    assert manifest["kind"] == "rm_ensemble" and len(manifest["members"]) == 2
    curves = {n: seeds[0] for n, seeds in results["curves"].items()}  # one seed
    starts = {n: c[0] for n, c in curves.items()}
    # the same seed and policy: every run starts from the same gold accuracy, at KL 0
    assert len({s["gold"] for s in starts.values()}) == 1
    assert all(s["kl"] == 0.0 and len(c) == 3 for s, c in zip(starts.values(),
                                                               curves.values()))
    # each run optimised its own reward: the ensembles' proxies are standardised values,
    # `min` never above `mean` on the same samples at the start
    assert starts["min"]["proxy"] <= starts["mean"]["proxy"] + 1e-9
    assert (out / "overoptimisation.png").stat().st_size > 10_000
    assert "(a) single proxy RM" in (out / "results.md").read_text()


def _small(run_policy):
    """The experiment's runs with a smaller batch, so the test takes seconds."""
    from rewardkit.testing import arithmetic

    original = arithmetic.task_config

    def task_config(*args, **kwargs):
        kwargs.update(batch_size=16, mini_batch_size=16, eval_max_prompts=8, eval_samples=2,
                      plots=False)  # each arm's own PNGs: half this test's time, tested elsewhere
        return original(*args, **kwargs)

    def run(*args, **kwargs):
        arithmetic.task_config = task_config
        try:
            return run_policy(*args, **kwargs)
        finally:
            arithmetic.task_config = original
    return run


def test_by_slip_members_each_see_one_family_of_wrong_answers(tmp_path, monkeypatch):
    exp = _module()
    out = tmp_path / "exp"
    monkeypatch.setattr(sys, "argv", [
        "overoptimisation.py", "--out", str(out), "--pairs", "40", "--rm-steps", "2",
        "--members", "4", "--member-data", "by_slip", "--steps", "1", "--eval-every", "1",
        "--runs", "mean", "--jobs", "1", "-q"])
    monkeypatch.setattr(exp, "run_policy", _small(exp.run_policy))
    exp.main()
    root = out / "rm_ensemble"
    for i, family in enumerate(exp.SLIP_FAMILIES):
        rows = [json.loads(line) for line in open(root / f"pairs_{i}.jsonl")]
        offsets = {int(r["rejected"]) - int(r["chosen"]) for r in rows}
        assert offsets <= set(family) | {10}      # 10: a negative answer moved up
        assert len(rows) == 40
    members = rewardkit_members(root / "final")
    assert len(members) == 4
    assert set(json.loads((out / "results.json").read_text())["summaries"]) == {"mean"}


def rewardkit_members(final):
    import rewardkit

    ens = rewardkit.load("ensemble", model=str(final), normalize=False)
    (score,) = ens.score([rewardkit.Sample("3+4=", "7")])
    return score.components


def test_replayed_stops_cut_the_single_run_where_each_rule_fires():
    import argparse

    exp = _module()
    args = argparse.Namespace(patience=2, disagreement_patience=2, disagreement_margin=0.1,
                              keep_before_stop=False)
    points = [{"step": 0, "proxy": -1.0, "gold": 0.30, "kl": 0.0, "disagreement": 1.00},
              {"step": 10, "proxy": -0.5, "gold": 0.35, "kl": 0.1, "disagreement": 1.05},
              {"step": 20, "proxy": 0.0, "gold": 0.38, "kl": 0.2, "disagreement": 1.20},
              {"step": 30, "proxy": 0.5, "gold": 0.30, "kl": 0.3, "disagreement": 1.30},
              {"step": 40, "proxy": 1.0, "gold": 0.20, "kl": 0.5, "disagreement": 1.40},
              {"step": 50, "proxy": 2.0, "gold": 0.10, "kl": 0.9, "disagreement": 1.50}]
    # gold falls at 30 and 40: the gold rule stops at 40
    assert [p["step"] for p in exp.replay_stop("early_stop", points, args)] == [0, 10, 20, 30, 40]
    # both rise from 10 on, above 1.1 × the first from 20: the second such evaluation is 30
    assert [p["step"] for p in exp.replay_stop("disagreement_stop", points, args)] == [
        0, 10, 20, 30]
    # keeping the policy before the stop: the evaluation before 30 is the one kept
    kept = exp.replay_stop("disagreement_stop", points, argparse.Namespace(
        **{**vars(args), "keep_before_stop": True}))
    assert [p["step"] for p in kept] == [0, 10, 20]
    calm = [dict(p, disagreement=1.0) for p in points]
    assert exp.replay_stop("disagreement_stop", calm, args) == calm   # never fires
    with pytest.raises(SystemExit, match="eval/disagreement"):
        exp.replay_stop("disagreement_stop", [{k: v for k, v in p.items()
                                               if k != "disagreement"} for p in points], args)


def test_stop_arms_are_also_judged_against_the_single_proxys_peak_on_the_same_seed():
    """A stop arm's own peak is whatever it saw before it stopped, so "final ≥ 90% of its own
    peak" always holds for a stop at its best point: the table also reads the final gold
    against the best gold the uncut run of the same seed reached."""
    exp = _module()
    single = [{"gold_best": 0.40, "gold_final": 0.01}, {"gold_best": 0.40, "gold_final": 0.01}]
    stopped = [{"gold_start": 0.3, "gold_best": 0.37, "gold_final": 0.37, "kl_final": 0.1,
                "step_final": 20},
               {"gold_start": 0.3, "gold_best": 0.34, "gold_final": 0.34, "kl_final": 0.1,
                "step_final": 20}]
    out = exp.over_seeds(stopped, single)
    assert out["keeps_90pct_of_peak"] == "2/2 seeds"            # its own peak: trivially
    assert out["keeps_90pct_of_single_peak"] == "1/2 seeds"     # 0.34 < 0.9 × 0.40
    assert out["final_over_single_peak"]["min"] == pytest.approx(0.85)
    assert "final ≥ 90% of single proxy's peak" in exp.table({"single": out},
                                                            {"single": "(a)"})


@pytest.mark.parametrize("option, message", [
    (["--threads", "0"], "--threads must be at least 1"),
    (["--gold-prompts", "501"], "--gold-prompts must be between 1 and 500"),   # the held-out set
    (["--gold-prompts", "0"], "--gold-prompts must be between 1 and 500")])
def test_bad_options_are_refused_before_anything_is_written(tmp_path, monkeypatch, capsys,
                                                            option, message):
    exp = _module()
    monkeypatch.setattr(sys, "argv", ["overoptimisation.py", "--out", str(tmp_path), *option])
    with pytest.raises(SystemExit):
        exp.main()
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_every_reward_model_the_arms_load_cuts_its_passes_by_a_fixed_rule(tmp_path):
    """``max_padding: auto`` cuts scoring calls by measured pass times on a CPU, so the scores'
    last bits, and through them the runs, would follow the machine's load; every reward model
    the arms and the monitor load gets a fixed share instead."""
    import argparse

    exp = _module()
    data = exp.data_paths(tmp_path)
    args = argparse.Namespace(penalty="uwo", lam=1.0, disagreement_lam=1.0)
    specs = [exp.reward_spec(n, tmp_path, data, args) for n in exp.RUNS]
    specs.append(exp.ensemble_spec(tmp_path, data))

    def padding(spec):
        """The rule of every reward model in ``spec`` (compositions and members included)."""
        reward, options = spec["reward"], spec.get("options", {})
        if isinstance(reward, dict):  # a composition: each component
            return [r for part in reward["rewards"].values() for r in padding(part)]
        if reward == "reward_model":
            return [options.get("max_padding", "auto")]
        if reward == "ensemble" and "members" in options:
            return [r for member in options["members"] for r in padding(member)]
        if reward == "ensemble":
            return [options.get("model_options", {}).get("max_padding", "auto")]
        return padding({"reward": options["reward"], "options": options["options"]})

    rules = [r for s in specs for r in padding(s)]
    assert len(rules) == len(specs) + 1, rules  # the penalty arm loads two reward models
    assert all(isinstance(r, float) and 0 <= r < 1 for r in rules), rules
