"""`train rm --ensemble K`: members that differ (seeds, bootstrap resamples, head
initialisations), one held-out split for all, the on-disk formats the `ensemble` reward reads,
the report's figures, resume, LoRA members, the CLI and config errors."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import rewardkit  # noqa: E402
from rewardkit.cli import main  # noqa: E402
from rewardkit.compose import ConfigError  # noqa: E402
from rewardkit.models import train_ensemble as te  # noqa: E402
from rewardkit.models.train import RewardTrainer, train_reward_model  # noqa: E402
from rewardkit.models.train_config import RewardTrainConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BASE = str(ROOT / "data" / "learned" / "base")  # the 2 MB arithmetic model
N_ROWS, HELD = 48, 12  # eval_fraction 0.25 of 48


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models train fastest on one thread (and do not fight other jobs for the cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "pairs.jsonl"
    with open(ROOT / "data" / "learned" / "rm_train.jsonl") as src:
        path.write_text("".join(next(src) for _ in range(N_ROWS)))
    return str(path)


def _cfg(pairs, out, **changes):
    values = dict(model=BASE, data=pairs, output_dir=str(out), steps=3, batch_size=4,
                  learning_rate=1e-3, eval_every=0, eval_fraction=0.25, progress=False,
                  tensorboard=False, plots=False, device="cpu", max_length=64, ensemble=3)
    values.update(changes)
    return RewardTrainConfig(**values)


def _heldout(trainer):
    return [(r.prompt, r.chosen, r.rejected) for r in trainer.eval_rows]


@pytest.fixture(scope="module")
def models_run(pairs, tmp_path_factory):
    cfg = _cfg(pairs, tmp_path_factory.mktemp("ens") / "run")
    return cfg, train_reward_model(cfg)


def test_models_form_writes_members_manifest_and_report(models_run):
    cfg, report = models_run
    out = Path(cfg.output_dir)
    final = out / "final"
    manifest = json.loads((final / "rewardkit.json").read_text())
    assert manifest == {"kind": "rm_ensemble", "form": "models",
                        "members": ["../member_0/final", "../member_1/final",
                                    "../member_2/final"],
                        "names": ["member_0", "member_1", "member_2"]}
    assert (final / "tokenizer_config.json").is_file()
    for i, rel in enumerate(manifest["members"]):
        assert (final / rel).resolve() == (out / f"member_{i}" / "final").resolve()
        assert (out / f"member_{i}" / "metrics.jsonl").is_file()
        assert (out / f"member_{i}" / "checkpoints" / "step-3").is_dir()
    assert json.loads((out / te.REPORT).read_text()) == report
    assert report["k"] == 3 and report["held_out_pairs"] == HELD and report["form"] == "models"
    assert [m["seed"] for m in report["members"]] == [0, 1, 2]
    assert all(0 <= m["accuracy"] <= 1 for m in report["members"])
    assert report["mean_member_accuracy"] == pytest.approx(
        np.mean([m["accuracy"] for m in report["members"]]))
    assert report["disagreement_std"] > 0 and np.isfinite(report["disagreement_std_raw"])
    logged = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert logged[-1]["ensemble/disagreement_std"] == pytest.approx(report["disagreement_std"])


def test_members_load_as_reward_models_differ_and_match_the_report(models_run, pairs):
    cfg, report = models_run
    ens = te.ModelsEnsembleTrainer(cfg)
    held = _heldout(ens.member_trainer(0))
    values = []
    for i, member in enumerate(report["members"]):
        scorer = rewardkit.load("reward_model", model=str(Path(cfg.output_dir) /
                                                          f"member_{i}" / "final"))
        scores = scorer.score([rewardkit.Sample(p, c) for p, c, _ in held] +
                              [rewardkit.Sample(p, r) for p, _, r in held])
        v = np.array([s.value for s in scores])
        values.append(v)
        # the report's accuracy is what the saved model scores through the Scorer
        assert member["accuracy"] == pytest.approx(np.mean(v[:HELD] > v[HELD:]))
    assert not np.allclose(values[0], values[1]) and not np.allclose(values[1], values[2])
    z = [(v - v.mean()) / v.std() for v in values]
    assert report["disagreement_std"] == pytest.approx(np.std(z, axis=0).mean(), rel=1e-4)
    assert report["disagreement_std_raw"] == pytest.approx(np.std(values, axis=0).mean(),
                                                           rel=1e-4)
    # and the `ensemble` reward loads the run in one line, members as trained
    ens_reward = rewardkit.load("ensemble", model=str(Path(cfg.output_dir) / "final"),
                                normalize=False)
    joint = ens_reward.score([rewardkit.Sample(p, c) for p, c, _ in held])
    for j, s in enumerate(joint):
        assert [s.components[f"member_{i}"] for i in range(3)] == pytest.approx(
            [v[j] for v in values], abs=1e-5)
        assert s.uncertainty == pytest.approx(np.std([v[j] for v in values]), abs=1e-5)


def test_one_heldout_split_and_a_different_bootstrap_per_member(pairs, tmp_path):
    ens = te.ModelsEnsembleTrainer(_cfg(pairs, tmp_path / "run"))
    members = [ens.member_trainer(i) for i in range(3)]
    single = RewardTrainer(_cfg(pairs, tmp_path / "single", ensemble=1))
    pool = N_ROWS - HELD
    for m in members:
        assert _heldout(m) == _heldout(single)  # drawn with the ensemble's seed
        assert len(m.train_rows) == pool == m.pool_size
        assert len(set(m.resample.tolist())) < pool  # with replacement: some drawn twice
    draws = [tuple(m.resample.tolist()) for m in members]
    assert len(set(draws)) == 3
    assert [m.cfg.seed for m in members] == [0, 1, 2]
    # member 1's resample is reproducible from its seed
    assert list(draws[1]) == te.bootstrap_indices(pool, 1).tolist()


def test_without_bootstrap_members_share_data_and_differ_by_seed(pairs, tmp_path):
    ens = te.ModelsEnsembleTrainer(_cfg(pairs, tmp_path / "run", bootstrap=False, ensemble=2))
    a, b = ens.member_trainer(0), ens.member_trainer(1)
    single = RewardTrainer(_cfg(pairs, tmp_path / "single", ensemble=1))
    assert [e.chosen for e in a.train_examples] == [e.chosen for e in single.train_examples]
    assert [e.chosen for e in b.train_examples] == [e.chosen for e in single.train_examples]
    assert _heldout(a) == _heldout(b)
    head_a = a.model.score.weight.detach()
    head_b = b.model.score.weight.detach()
    assert not torch.equal(head_a, head_b)  # seeded differently
    assert a.sampler.next(8) != b.sampler.next(8)  # different data order
    heads = te.HeadsEnsembleTrainer(_cfg(pairs, tmp_path / "heads", bootstrap=False,
                                         ensemble_form="heads"))
    assert (heads.counts == 1).all()
    assert all(e.weights == [1.0, 1.0, 1.0] for e in heads.train_examples)


def test_heads_form_loads_as_an_ensemble_with_heads_that_differ(pairs, tmp_path):
    cfg = _cfg(pairs, tmp_path / "run", ensemble_form="heads", steps=4)
    report = train_reward_model(cfg)
    final = Path(cfg.output_dir) / "final"
    sidecar = json.loads((final / "rewardkit.json").read_text())
    assert sidecar["kind"] == "rm_heads" and sidecar["heads"] == 3
    assert sidecar["head_names"] == ["head_0", "head_1", "head_2"]
    assert {"chat_template", "plain_format"} <= set(sidecar)
    assert report["form"] == "heads" and len(report["members"]) == 3
    assert all(0 <= m["accuracy"] <= 1 for m in report["members"])
    assert np.isfinite(report["disagreement_std"]) and report["disagreement_std"] > 0
    assert all(m["train_pairs"] == N_ROWS - HELD for m in report["members"])
    assert [m["distinct_pairs"] for m in report["members"]] == [
        int((te.bootstrap_counts(N_ROWS - HELD, j) > 0).sum()) for j in range(3)]
    assert all(m["distinct_pairs"] < N_ROWS - HELD for m in report["members"])
    ens = rewardkit.load("ensemble", model=str(final), heads=3, normalize=False)
    trainer = te.ModelsEnsembleTrainer(_cfg(pairs, tmp_path / "x")).member_trainer(0)
    held = _heldout(trainer)
    scores = ens.score([rewardkit.Sample(p, c) for p, c, _ in held] +
                       [rewardkit.Sample(p, r) for p, _, r in held])
    values = np.array([[s.components[f"head_{j}"] for s in scores] for j in range(3)])
    assert not np.allclose(values[0], values[1]) and not np.allclose(values[1], values[2])
    for j, m in enumerate(report["members"]):
        assert m["accuracy"] == pytest.approx(np.mean(values[j, :HELD] > values[j, HELD:]))
    assert [s.uncertainty for s in scores] == pytest.approx(list(values.std(0)), abs=1e-5)
    assert (Path(cfg.output_dir) / te.REPORT).is_file()


def test_heads_loss_is_the_mean_of_bootstrap_weighted_bradley_terry_losses(pairs, tmp_path):
    trainer = te.HeadsEnsembleTrainer(_cfg(pairs, tmp_path / "run", ensemble_form="heads",
                                           center_rewards_coefficient=0.01))
    n = N_ROWS - HELD
    counts = trainer.counts
    assert counts.shape == (n, 3) and (counts.sum(0) == n).all()
    for j in range(3):
        assert counts[:, j].tolist() == te.bootstrap_counts(n, j).tolist()
    assert not np.array_equal(counts[:, 0], counts[:, 1])
    weight = trainer.model.score.weight.detach()
    for j in range(3):  # head j starts from its own seeded draw, N(0, 0.02²)
        draw = torch.randn(weight.shape[1], generator=torch.Generator().manual_seed(j)) * 0.02
        assert torch.allclose(weight[j], draw)
    assert not torch.allclose(weight[0], weight[1])
    examples = trainer.train_examples[:4]
    for e in examples:
        e.margin = 0.3
    loss, _ = trainer.loss(examples, denominator=4.0)
    model = trainer.model.eval()
    with torch.no_grad():
        rc = torch.stack([model(input_ids=torch.tensor([e.chosen])).logits[0] for e in examples])
        rr = torch.stack([model(input_ids=torch.tensor([e.rejected])).logits[0]
                          for e in examples])
    w = torch.tensor([e.weights for e in examples])
    per = -F.logsigmoid(rc - rr - 0.3) + 0.01 * (rc + rr) ** 2
    expected = torch.stack([(per[:, j] * w[:, j]).sum() / 4 for j in range(3)]).mean()
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)


def test_heads_resume_continues_exactly(pairs, tmp_path):
    def cfg(where, steps):
        return _cfg(pairs, tmp_path / where, ensemble_form="heads", steps=steps,
                    lr_schedule="constant")

    straight = te.HeadsEnsembleTrainer(cfg("a", 4))
    straight.train()
    te.HeadsEnsembleTrainer(cfg("b", 2)).train()
    resumed = te.HeadsEnsembleTrainer(cfg("b", 4), resume=str(tmp_path / "b"))
    assert resumed.step_count == 2
    resumed.train()
    for (name, a), (_, b) in zip(straight.model.state_dict().items(),
                                 resumed.model.state_dict().items()):
        assert torch.equal(a, b), name


def test_models_resume_skips_finished_members_and_continues_the_interrupted_one(
        pairs, tmp_path, monkeypatch):
    straight = te.ModelsEnsembleTrainer(_cfg(pairs, tmp_path / "a", ensemble=2,
                                             lr_schedule="constant"))
    straight.train()
    step = te.MemberTrainer.step

    def step_then_interrupt(self):
        out = step(self)
        if self.cfg.seed == 1 and self.step_count == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return out

    cfg = _cfg(pairs, tmp_path / "b", ensemble=2, lr_schedule="constant")
    monkeypatch.setattr(te.MemberTrainer, "step", step_then_interrupt)
    run = te.ModelsEnsembleTrainer(cfg)
    with pytest.raises(KeyboardInterrupt):
        run.train()
    assert run.interrupted_member == "member_1" and run.step_count == 2
    assert run.interrupt_checkpoint.name == "step-2"
    monkeypatch.undo()
    first = (tmp_path / "b" / "member_0" / "final" / "model.safetensors").stat().st_mtime_ns
    with pytest.raises(ConfigError, match="learning_rate"):
        te.ModelsEnsembleTrainer(_cfg(pairs, tmp_path / "b", ensemble=2, learning_rate=5e-3,
                                      lr_schedule="constant"), resume=tmp_path / "b")
    with pytest.raises(ConfigError, match="its own output folder"):
        te.ModelsEnsembleTrainer(cfg, resume=tmp_path / "a")
    report = te.ModelsEnsembleTrainer(cfg, resume=tmp_path / "b").train()
    assert (tmp_path / "b" / "member_0" / "final" / "model.safetensors").stat().st_mtime_ns \
        == first  # not retrained
    from safetensors.torch import load_file

    for i in range(2):
        a = load_file(str(tmp_path / "a" / f"member_{i}" / "final" / "model.safetensors"))
        b = load_file(str(tmp_path / "b" / f"member_{i}" / "final" / "model.safetensors"))
        assert all(torch.equal(a[k], b[k]) for k in a), i
    steps = [json.loads(line)["step"] for line in
             open(tmp_path / "b" / "member_1" / "metrics.jsonl")]
    assert steps == sorted(steps) and steps[-1] == 3
    assert report["members"][1]["accuracy"] == pytest.approx(
        json.loads((tmp_path / "a" / te.REPORT).read_text())["members"][1]["accuracy"])


def test_lora_members_are_adapters_on_one_base(pairs, tmp_path):
    cfg = _cfg(pairs, tmp_path / "run", ensemble=2, lora=True, lora_r=4, steps=2)
    report = train_reward_model(cfg)
    final = Path(cfg.output_dir) / "final"
    manifest = json.loads((final / "rewardkit.json").read_text())
    assert manifest["kind"] == "rm_ensemble" and manifest["form"] == "lora"
    assert manifest["base"] == BASE
    assert manifest["adapters"] == ["../member_0/final/adapter", "../member_1/final/adapter"]
    assert manifest["members"] == ["../member_0/final", "../member_1/final"]
    for rel in manifest["adapters"]:
        assert (final / rel / "adapter_config.json").is_file()
        assert json.loads((final / rel / "adapter_config.json").read_text())["r"] == 4
    values = [rewardkit.load("reward_model", model=str(final / rel)).score(
        [rewardkit.Sample("12+3+4=", "12+3=15\n15+4=19")])[0].value
        for rel in manifest["members"]]
    assert values[0] != pytest.approx(values[1])
    assert report["form"] == "lora" and len(report["members"]) == 2
    # one line loads the base once with both adapters; each member is its merged model
    ens_reward = rewardkit.load("ensemble", model=str(final), normalize=False)
    (joint,) = ens_reward.score([rewardkit.Sample("12+3+4=", "12+3=15\n15+4=19")])
    assert [joint.components["member_0"], joint.components["member_1"]] == pytest.approx(
        values, abs=1e-4)


def test_cli_trains_an_ensemble_and_prints_the_table(pairs, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["train", "rm", "--model", BASE, "--data", pairs, "--output", str(out),
                 "--steps", "2", "--batch-size", "4", "--ensemble", "2", "--quiet",
                 "--set", "device=cpu", "--set", "tensorboard=false", "--set", "plots=false",
                 "--set", "eval_fraction=0.25"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert any(line.startswith("member_0") for line in lines)
    assert any(line.startswith("member_1") for line in lines)
    assert any(line.startswith("ensemble") for line in lines)
    report = json.loads((out / te.REPORT).read_text())
    assert f"{report['disagreement_std']:.3f} standardised" in text
    assert json.loads((out / "final" / "rewardkit.json").read_text())["kind"] == "rm_ensemble"
    # --resume OUTPUT alone reads the ensemble's options; finished members are kept
    assert main(["train", "rm", "--resume", str(out), "--quiet"]) == 0
    assert "member_1" in capsys.readouterr().out


@pytest.mark.parametrize("changes, message", [
    ({"ensemble": 0}, "ensemble must be at least 1"),
    ({"ensemble": "three"}, "ensemble must be an integer"),
    ({"task": "prm"}, "ensemble=3 trains reward-model"),
    ({"ensemble_form": "trees"}, "ensemble_form must be one of models, heads"),
    ({"bootstrap": "maybe"}, "bootstrap must be"),
])
def test_config_errors_name_the_option(pairs, tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message):
        _cfg(pairs, tmp_path, **changes).validate()


def test_cli_reports_bad_ensemble_options(pairs, tmp_path, capsys):
    assert main(["train", "rm", "--model", BASE, "--data", pairs, "--ensemble", "0"]) == 2
    assert "ensemble must be at least 1" in capsys.readouterr().err
    assert main(["train", "prm", "--model", BASE, "--data", pairs, "--ensemble", "2"]) == 2
    assert "task prm has none" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="RewardTrainer trains one model"):
        RewardTrainer(_cfg(pairs, tmp_path))


def test_summarize_against_hand_computed_values():
    # two members, two pairs: completions (c1, c2, r1, r2)
    values = np.array([[1.0, 3.0, 0.0, 4.0],     # member a: right on pair 1, wrong on pair 2
                       [10.0, 30.0, 20.0, 0.0]])  # member b: wrong on pair 1, right on pair 2
    out = te.summarize(values, ["a", "b"])
    assert out["member_accuracy"] == {"a": 0.5, "b": 0.5}
    za = (values[0] - 2.0) / np.sqrt(2.5)      # mean 2, population variance 2.5
    zb = (values[1] - 15.0) / np.sqrt(125.0)   # mean 15, population variance 125
    zmean = (za + zb) / 2
    assert out["ensemble_accuracy"] == pytest.approx(np.mean(zmean[:2] > zmean[2:]))
    assert out["ensemble_accuracy_raw"] == 0.5  # (5.5 > 10) no, (16.5 > 2) yes
    assert out["disagreement_std"] == pytest.approx(np.mean(np.abs(za - zb) / 2))
    assert out["disagreement_std_raw"] == pytest.approx(np.mean([4.5, 13.5, 10.0, 2.0]))
    assert te.summarize(np.zeros((2, 0)), ["a", "b"])["ensemble_accuracy"] is None
