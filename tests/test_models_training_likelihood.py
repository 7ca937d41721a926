"""`train rm` with `objective: likelihood`: the model stays a causal LM and learns the chosen
completions (loss on the completion only), its held-out accuracy is what `implicit_reward`
then measures, and the run's model is read by `implicit_reward` and `eval rm`."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch.nn.functional as F  # noqa: E402

import rewardkit  # noqa: E402
from rewardkit import Sample  # noqa: E402
from rewardkit.cli import main  # noqa: E402
from rewardkit.compose import ConfigError  # noqa: E402
from rewardkit.models.data import read_pairs  # noqa: E402
from rewardkit.models.evaluation import evaluate_reward_model  # noqa: E402
from rewardkit.models.train import RewardTrainer  # noqa: E402
from rewardkit.models.train_config import RewardTrainConfig  # noqa: E402
from rewardkit.testing import make_tiny_causal_lm  # noqa: E402


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return str(make_tiny_causal_lm(tmp_path_factory.mktemp("base"), hidden_size=32, num_layers=1))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Pairs whose chosen side always says one thing and rejected side another (held-out
    pairs have prompts never trained on)."""
    root = tmp_path_factory.mktemp("data")
    for name, numbers in (("train.jsonl", range(40)), ("test.jsonl", range(40, 56))):
        with open(root / name, "w") as f:
            f.writelines(json.dumps({"prompt": f"What is {i} plus one?",
                                     "chosen": "That is the answer.",
                                     "rejected": "It is a question."}) + "\n"
                         for i in numbers)
    return root


def _cfg(base, root, tmp_path, **changes):
    values = dict(model=base, data=str(root / "train.jsonl"), eval_data=str(root / "test.jsonl"),
                  output_dir=str(tmp_path / "run"), objective="likelihood", steps=4,
                  batch_size=8, learning_rate=3e-3, eval_every=0, progress=False,
                  tensorboard=False, plots=False, device="cpu", max_length=64,
                  chat_template=False)
    values.update(changes)
    return RewardTrainConfig(**values)


def test_the_loss_is_next_token_cross_entropy_on_the_chosen_completion_only(base, data,
                                                                             tmp_path):
    trainer = RewardTrainer(_cfg(base, data, tmp_path))
    examples = trainer.train_examples[:3]
    n_tokens = sum(len(e.chosen) - e.starts[0] for e in examples)
    loss, stats = trainer.loss(examples, denominator=float(n_tokens))
    model = trainer.model.eval()
    total = 0.0
    with torch.no_grad():
        for e in examples:
            ids = torch.tensor([e.chosen])
            lp = F.log_softmax(model(input_ids=ids).logits[0, :-1], -1)
            total -= lp[torch.arange(len(e.chosen) - 1), ids[0, 1:]][e.starts[0] - 1:].sum()
    assert loss.item() == pytest.approx(total.item() / n_tokens, rel=1e-4)
    assert stats["count"] == n_tokens
    tok = trainer.tokenizer
    prompt = tok.decode(examples[0].chosen[:examples[0].starts[0]])
    assert prompt.startswith("What is") and "It is" not in prompt


def test_training_on_chosen_sides_makes_held_out_pairs_rankable(base, data, tmp_path):
    trainer = RewardTrainer(_cfg(base, data, tmp_path, steps=60))
    before = trainer.evaluate()
    final = trainer.train()
    # the random model may already prefer one constant text; training must open the gap
    assert final["eval/accuracy"] == 1.0
    assert final["eval/margin"] > before["eval/margin"] + 5.0
    assert "train/token_accuracy" in final and "train/accuracy" not in final


def test_the_run_is_read_by_implicit_reward_with_the_trainers_own_accuracy(base, data,
                                                                           tmp_path, capsys):
    cfg = _cfg(base, data, tmp_path, steps=20)
    trainer = RewardTrainer(cfg)
    last = trainer.train()
    final = tmp_path / "run" / "final"
    sidecar = json.loads((final / "rewardkit.json").read_text())
    assert sidecar["objective"] == "likelihood" and sidecar["reward"] == "implicit_reward"
    scorer = rewardkit.load("implicit_reward", model=str(final), device="cpu",
                            chat_template=False)
    report = evaluate_reward_model(scorer, read_pairs(str(data / "test.jsonl")),
                                   heuristics=False)
    assert report["overall"]["accuracy"] == pytest.approx(last["eval/accuracy"], abs=1e-9)
    a, b = scorer.score([Sample("What is 7 plus one?", "That is the answer."),
                         Sample("What is 7 plus one?", "It is a question.")])
    assert a.value > b.value
    out = tmp_path / "report.json"
    assert main(["eval", "rm", "--model", str(final), "--data", str(data / "test.jsonl"),
                 "-O", "chat_template=false", "--no-heuristics", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["reward"] == "implicit_reward"


@pytest.mark.parametrize("changes, message", [
    ({"task": "prm", "data": "steps.jsonl"}, "task rm"),
    ({"ensemble": 2}, "ensemble"),
    ({"center_rewards_coefficient": 0.01}, "bradley_terry"),
    ({"objective": "dpo"}, "objective"),
])
def test_likelihood_config_errors_say_what_to_change(changes, message):
    values = {"model": "m", "data": "d.jsonl", "objective": "likelihood", **changes}
    with pytest.raises(ConfigError, match=message):
        RewardTrainConfig(**values).validate()


def test_a_lora_likelihood_run_saves_a_merged_causal_lm_that_scores_as_it_trained(base, data,
                                                                                  tmp_path):
    trainer = RewardTrainer(_cfg(base, data, tmp_path, lora=True, steps=6,
                                 learning_rate=1e-2))
    last = trainer.train()
    final = tmp_path / "run" / "final"
    assert (final / "adapter").is_dir()
    scorer = rewardkit.load("implicit_reward", model=str(final), device="cpu",
                            chat_template=False)
    report = evaluate_reward_model(scorer, read_pairs(str(data / "test.jsonl")),
                                   heuristics=False)
    assert report["overall"]["accuracy"] == pytest.approx(last["eval/accuracy"], abs=1e-9)
    assert report["mean_margin"] == pytest.approx(last["eval/margin"], rel=1e-3)


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    """Text the base 'knew': prompt-completion rows unlike the reward data, and one preference
    row (its chosen side is what replays)."""
    path = tmp_path_factory.mktemp("replay") / "replay.jsonl"
    rows = [{"prompt": f"Name colour {i}.", "completion": "Blue and green."} for i in range(20)]
    rows.append({"prompt": "Name colour 99.", "chosen": "Blue and green.", "rejected": "No."})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_each_batch_holds_the_replayed_share_and_those_rows_are_learned_on_their_completion(
        base, data, replay, tmp_path):
    trainer = RewardTrainer(_cfg(base, data, tmp_path, replay_data=str(replay),
                                 replay_fraction=0.25))
    seen = []
    real_loss = trainer.loss
    trainer.loss = lambda examples, denominator: (seen.append(list(examples)),
                                                  real_loss(examples, denominator))[1]
    trainer.step()
    (batch,) = seen
    tok = trainer.tokenizer
    texts = [tok.decode(e.chosen) for e in batch]
    assert len(batch) == 8 and sum("Name colour" in t for t in texts) == 2
    replayed = next(e for e, t in zip(batch, texts) if "Name colour" in t)
    assert tok.decode(replayed.chosen[replayed.starts[0]:]).startswith("Blue and green.")
    assert "Name colour" in tok.decode(replayed.chosen[:replayed.starts[0]])
    # the preference row replays its chosen side
    assert any(tok.decode(e.chosen).startswith("Name colour 99.Blue")
               for e in trainer.replay_sampler.prompts)


def _replayed_logprob(trainer, prompt, completion):
    ids, start = trainer._likelihood_side(prompt, completion, plain=True)
    model = trainer.model.eval()
    with torch.no_grad():
        lp = F.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, :-1], -1)
    return lp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])][start - 1:].sum().item()


def test_replay_keeps_what_training_on_the_reward_data_alone_overwrites(base, data, replay,
                                                                        tmp_path):
    """Trained on the reward data alone the model forgets nothing it never knew; so first
    teach the replayed text, then train on the reward data with and without replaying it."""
    teach = tmp_path / "teach.jsonl"  # the replayed text as pairs, to train on first
    teach.write_text("".join(json.dumps({"prompt": f"Name colour {i}.", "chosen": "Blue and "
                                         "green.", "rejected": "No."}) + "\n" for i in range(20)))
    taught = RewardTrainer(_cfg(base, data, tmp_path / "teach", data=str(teach), eval_data=None,
                                eval_fraction=0.0, steps=40))
    taught.train()
    known = str(tmp_path / "teach" / "run" / "final")
    after = {}
    for name, extra in (("alone", {}), ("replay", {"replay_data": str(replay)})):
        trainer = RewardTrainer(_cfg(known, data, tmp_path / name, steps=40, **extra))
        trainer.train()
        after[name] = _replayed_logprob(trainer, "Name colour 7.", "Blue and green.")
    before = _replayed_logprob(taught, "Name colour 7.", "Blue and green.")
    assert after["replay"] > after["alone"] + 1.0
    assert after["replay"] > before - 1.0


def test_a_resumed_replay_run_continues_exactly(base, data, replay, tmp_path):
    def cfg(where, steps):
        return _cfg(base, data, tmp_path / where, steps=steps, lr_schedule="constant",
                    replay_data=str(replay), replay_fraction=0.5)

    straight = RewardTrainer(cfg("a", 4))
    straight.train()
    RewardTrainer(cfg("b", 2)).train()
    resumed = RewardTrainer(cfg("b", 4), resume=str(tmp_path / "b" / "run"))
    resumed.train()
    for (name, a), (_, b) in zip(straight.model.state_dict().items(),
                                 resumed.model.state_dict().items()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("changes, message", [
    ({"objective": "bradley_terry"}, "only objective: likelihood"),
    ({"replay_fraction": 0.01}, "0 replayed rows"),
    ({"replay_fraction": 1.0}, "16 replayed rows"),
])
def test_replay_config_errors_say_what_to_change(changes, message):
    values = {"model": "m", "data": "d.jsonl", "objective": "likelihood", "batch_size": 16,
              "replay_data": "r.jsonl", **changes}
    with pytest.raises(ConfigError, match=message):
        RewardTrainConfig(**values).validate()


def test_replay_rows_without_a_completion_are_refused_with_their_keys(tmp_path):
    from rewardkit.models.data import read_completions

    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"prompt": "p", "text": "t"}) + "\n")
    with pytest.raises(ConfigError, match=r"row 0 .*'completion'.*\['prompt', 'text'\]"):
        read_completions(str(path))
