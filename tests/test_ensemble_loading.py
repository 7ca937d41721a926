"""Trained ensembles loaded in one line: the ``rm_ensemble`` manifest (K reward models, or one
base model with K LoRA adapters), explicit adapters, and clear errors for a bad manifest."""
from __future__ import annotations

import importlib.util
import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("peft") is None:  # imported where used: collecting stays light
    pytest.skip("could not import 'peft'", allow_module_level=True)

from transformers import AutoModelForSequenceClassification  # noqa: E402

import rewardkit  # noqa: E402
from rewardkit import Sample  # noqa: E402
from rewardkit.compose import ConfigError  # noqa: E402
from rewardkit.models.loading import ModelLoadError  # noqa: E402
from rewardkit.testing import (make_random_lora_adapter, make_tiny_causal_lm,  # noqa: E402
                               make_tiny_reward_model)

SAMPLES = [Sample("What is 2+2?", "4"), Sample("hello", "a longer answer to the prompt"),
           Sample([{"role": "user", "content": "hi"}], "there"),
           Sample("def add(a, b):", " return a + b " * 6)]
K = 3


def _write(directory, manifest):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "rewardkit.json").write_text(json.dumps(manifest))
    return directory


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("trained-ensemble")
    finals = [make_tiny_reward_model(root / f"member_{i}" / "final", seed=i) for i in range(K)]
    models = _write(root / "ensemble", {
        "kind": "rm_ensemble", "form": "models",
        "members": [f"../member_{i}/final" for i in range(K)],
        "names": [f"member_{i}" for i in range(K)]})
    base = make_tiny_causal_lm(root / "base", hidden_size=32, num_layers=1)
    adapters = [make_random_lora_adapter(base, root / f"lora_{i}" / "final" / "adapter",
                                         seed=i, noise_seed=100 + i)
                for i in range(K)]
    lora = _write(root / "lora_ensemble", {
        "kind": "rm_ensemble", "form": "lora", "base": "../base",
        "members": [f"../lora_{i}/final" for i in range(K)],
        "names": ["a", "b", "c"],
        "adapters": [f"../lora_{i}/final/adapter" for i in range(K)]})
    return {"root": root, "finals": finals, "models": models, "base": base,
            "adapters": adapters, "lora": lora}


def _merged_values(base, adapter, samples, tmp_path):
    """What the adapter scores merged into its base and loaded as a plain reward model."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    out = tmp_path / f"merged_{adapter.parent.parent.name}"
    merged.config.pad_token_id = AutoTokenizer.from_pretrained(str(base)).pad_token_id
    merged.save_pretrained(out)
    AutoTokenizer.from_pretrained(str(base)).save_pretrained(out)
    scorer = rewardkit.load("reward_model", model=str(out))
    return [s.value for s in scorer.score(samples)]


def _expected(values, combine, lam):
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return {"mean": mean, "min": min(values), "uwo": mean - lam * var,
            "mean_minus_std": mean - lam * math.sqrt(var)}[combine], math.sqrt(var)


@pytest.mark.parametrize("combine", ["mean", "min", "uwo", "mean_minus_std"])
def test_a_models_manifest_loads_every_member_as_its_reward_model(trained, combine):
    ens = rewardkit.load("ensemble", model=str(trained["models"]), combine=combine, lam=0.7,
                         normalize=False)
    singles = [rewardkit.load("reward_model", model=str(p)).score(SAMPLES)
               for p in trained["finals"]]
    for i, score in enumerate(ens.score(SAMPLES)):
        values = [singles[j][i].value for j in range(K)]
        assert score.components == {f"member_{j}": pytest.approx(values[j], abs=1e-6)
                                    for j in range(K)}
        want, std = _expected(values, combine, 0.7)
        assert score.value == pytest.approx(want, abs=1e-6)
        assert score.uncertainty == pytest.approx(std, abs=1e-6)
    assert len({round(singles[j][0].value, 6) for j in range(K)}) == K  # the members differ


def test_the_lora_form_scores_each_adapter_as_its_merged_model(trained, tmp_path):
    ens = rewardkit.load("ensemble", model=str(trained["lora"]), combine="uwo", lam=0.5,
                         normalize=False, heads=K)
    got = ens.score(SAMPLES)
    per_member = [_merged_values(trained["base"], a, SAMPLES, tmp_path)
                  for a in trained["adapters"]]
    for i, score in enumerate(got):
        assert score.ok, score.info
        values = [per_member[j][i] for j in range(K)]
        assert list(score.components) == ["a", "b", "c"]
        assert list(score.components.values()) == pytest.approx(values, abs=1e-5)
        want, std = _expected(values, "uwo", 0.5)
        assert score.value == pytest.approx(want, abs=1e-5)
        assert std > 1e-3  # the adapters differ, so the members disagree


def test_the_lora_form_holds_one_trunk_whatever_k(trained, monkeypatch):
    from rewardkit.models.lora_members import trunk_tensors

    calls = []
    real = AutoModelForSequenceClassification.from_pretrained.__func__

    def counting(cls, *args, **kwargs):
        calls.append(args[0] if args else kwargs.get("pretrained_model_name_or_path"))
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(AutoModelForSequenceClassification, "from_pretrained",
                        classmethod(counting))
    ens = rewardkit.load("ensemble", model=str(trained["lora"]), normalize=False)
    assert len(calls) == 1 and str(calls[0]).endswith("base")
    base = AutoModelForSequenceClassification.from_pretrained(str(trained["base"]),
                                                              num_labels=1)
    one_trunk = sum(1 for n, _ in base.named_parameters() if not n.startswith("score."))
    assert trunk_tensors(ens.shared.model) == one_trunk
    # K adapters attached to that one model
    assert set(ens.shared.model.peft_config) == {"a", "b", "c"}


def test_explicit_base_and_adapters_give_the_same_members(trained):
    manifest = rewardkit.load("ensemble", model=str(trained["lora"]), normalize=False)
    explicit = rewardkit.load("ensemble", model=str(trained["base"]), normalize=False,
                              adapters=[str(a) for a in trained["adapters"]],
                              names=["a", "b", "c"])
    for m, e in zip(manifest.score(SAMPLES), explicit.score(SAMPLES)):
        assert e.components == pytest.approx(m.components, abs=1e-6)


def test_a_trained_ensemble_in_a_composition_config(trained, tmp_path):
    import yaml

    path = tmp_path / "reward.yaml"
    path.write_text(yaml.safe_dump({"reward": {"rewards": {"rm": {
        "reward": "ensemble", "options": {"model": str(trained["models"]), "combine": "min",
                                          "normalize": False}}}}}))
    direct = rewardkit.load("ensemble", model=str(trained["models"]), combine="min",
                            normalize=False)
    for c, d in zip(rewardkit.load(str(path)).score(SAMPLES), direct.score(SAMPLES)):
        assert c.value == pytest.approx(d.value, abs=1e-6)


@pytest.mark.parametrize("manifest, message", [
    ({"kind": "rm_ensemble", "form": "models", "members": ["../nowhere/final"]},
     r"members\[0\] '\.\./nowhere/final' .* does not exist; expected a reward model folder"),
    ({"kind": "rm_ensemble", "form": "models", "members": []}, "`members` must be a non-empty"),
    ({"kind": "rm_ensemble", "form": "ensemble", "members": ["../member_0/final"]},
     "`form` must be 'models'"),
    ({"kind": "rm_ensemble", "form": "models", "members": ["../member_0/final"],
      "names": ["a", "b"]}, "one name per member"),
    ({"kind": "rm_ensemble", "form": "lora", "members": ["../lora_0/final"],
      "adapters": ["../lora_0/final/adapter"]}, "form 'lora' needs `base`"),
    ({"kind": "rm_ensemble", "form": "lora", "base": "../base", "members": ["../lora_0/final"],
      "adapters": ["../lora_0/final"]}, r"adapters\[0\].* has no adapter_config\.json"),
    ({"kind": "rm_ensemble", "form": "lora", "base": "../base", "members": ["../lora_0/final"],
      "adapters": ["../missing/adapter"]}, r"adapters\[0\].* does not exist"),
    ({"kind": "rm_ensemble", "form": "lora", "base": "../base",
      "members": ["../lora_0/final", "../lora_1/final"], "adapters": ["../lora_0/final/adapter"]},
     "1 adapters for 2 members"),
])
def test_a_bad_manifest_is_a_load_error_naming_what_was_expected(trained, manifest, message):
    bad = _write(trained["root"] / "bad", manifest)
    with pytest.raises(ModelLoadError, match=message):
        rewardkit.load("ensemble", model=str(bad))


def test_an_unreadable_manifest_and_wrong_counts_are_load_errors(trained):
    bad = trained["root"] / "garbled"
    bad.mkdir(exist_ok=True)
    (bad / "rewardkit.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="could not be read as JSON"):
        rewardkit.load("ensemble", model=str(bad))
    with pytest.raises(ModelLoadError, match="has 3 members, not heads=2"):
        rewardkit.load("ensemble", model=str(trained["models"]), heads=2)
    with pytest.raises(ConfigError, match="model_options: .*accepted"):
        rewardkit.load("ensemble", model=str(trained["lora"]), model_options={"output": "x"})
    with pytest.raises(ConfigError, match="adapters must be a non-empty list"):
        rewardkit.load("ensemble", model=str(trained["base"]), adapters=[])
    with pytest.raises(ConfigError, match="go with model=DIR"):
        rewardkit.load("ensemble", members=["tests.plugin_rewards:plugin_len"],
                       adapters=[str(trained["adapters"][0])])
