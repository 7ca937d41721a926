"""The `reward_model` and `process_reward` Scorers on tiny models built offline: formatting,
truncation, batching, outputs, step layouts, aggregates, errors per sample and at load time."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import (AutoModelForSequenceClassification,  # noqa: E402
                          AutoModelForTokenClassification, AutoTokenizer)

import rewardkit  # noqa: E402
from rewardkit import Sample  # noqa: E402
from rewardkit.models.encoding import token_budget_batches, truncate  # noqa: E402
from rewardkit.models.loading import ModelLoadError  # noqa: E402
from rewardkit.models.process_reward import encode_steps, split_steps  # noqa: E402
from rewardkit.testing import make_tiny_causal_lm, make_tiny_reward_model  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("reward-models")
    return {
        "rm": make_tiny_reward_model(root / "rm"),
        "prm": make_tiny_reward_model(root / "prm", head="token"),
        "qwen_prm": make_tiny_reward_model(root / "qwen_prm", head="token",
                                           step_token="<extra_0>", seed=1),
        "nopad": make_tiny_reward_model(root / "nopad", pad_token=False),
        "two": make_tiny_reward_model(root / "two", num_labels=2),
        "lm": make_tiny_causal_lm(root / "lm", hidden_size=32, num_layers=1),
    }


def _manual_logit(path, text):
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        ids = tok(text, add_special_tokens=False, return_tensors="pt")
        return model(**ids).logits[0, 0].item()


def test_reward_model_reads_the_chat_template_conversation(models):
    scorer = rewardkit.load("reward_model", model=str(models["rm"]), device="cpu")
    tok = AutoTokenizer.from_pretrained(models["rm"])
    text = tok.apply_chat_template([{"role": "user", "content": "What is 2+2?"},
                                    {"role": "assistant", "content": "It is 4."}], tokenize=False)
    as_strings, as_messages = scorer.score([
        Sample("What is 2+2?", "It is 4."),
        Sample([{"role": "user", "content": "What is 2+2?"}],
               [{"role": "assistant", "content": "It is 4."}])])
    assert as_strings.value == pytest.approx(_manual_logit(models["rm"], text), abs=1e-5)
    assert as_messages.value == pytest.approx(as_strings.value, abs=1e-6)
    assert as_strings.info["logit"] == as_strings.value and as_strings.info["tokens"] > 5


def test_reward_model_outputs_sigmoid_and_centered(models):
    path = str(models["rm"])
    samples = [Sample("q", "short answer"), Sample("q", "another, longer answer here")]
    logits = [s.value for s in rewardkit.load("reward_model", model=path).score(samples)]
    sig = rewardkit.load("reward_model", model=path, output="sigmoid").score(samples)
    assert [s.value for s in sig] == pytest.approx([1 / (1 + math.exp(-x)) for x in logits])
    centered = rewardkit.load("reward_model", model=path, output="centered", center=0.25)
    assert [s.value for s in centered.score(samples)] == pytest.approx([x - 0.25 for x in logits])
    from_set = rewardkit.load("reward_model", model=path, output="centered",
                              center_data=[{"prompt": "q", "completion": "short answer"},
                                           {"prompt": "q", "completion": "another, longer "
                                                                         "answer here"}])
    assert from_set.center == pytest.approx(sum(logits) / 2, abs=1e-5)
    assert sum(s.value for s in from_set.score(samples)) == pytest.approx(0.0, abs=1e-5)
    with pytest.raises(ModelLoadError, match="center"):
        rewardkit.load("reward_model", model=path, output="centered")


def test_truncation_keeps_the_end_of_the_completion_and_says_so(models):
    path = str(models["rm"])
    long_completion = " ".join(f"word{i}" for i in range(300)) + " THE END"
    full = rewardkit.load("reward_model", model=path, max_length=4096)
    cut = rewardkit.load("reward_model", model=path, max_length=64)
    (whole,) = full.score([Sample("question", long_completion)])
    (short,) = cut.score([Sample("question", long_completion)])
    assert "truncated" not in whole.info and short.info["tokens"] == 64
    dropped = short.info["truncated"]["completion_tokens_dropped"]
    assert dropped == whole.info["tokens"] - 64
    assert short.info["truncated"]["prompt_tokens_dropped"] == 0
    sample = Sample("question", long_completion)
    assert cut.encode(sample).ids[-10:] == full.encode(sample).ids[-10:]


def test_truncate_gives_the_prompt_at_most_half_the_budget():
    enc = truncate(list(range(100)), n_prompt=80, max_length=20)
    assert enc.ids == list(range(10)) + list(range(90, 100))
    assert (enc.dropped_prompt, enc.dropped_completion) == (70, 10)
    assert truncate(list(range(10)), 4, 20).ids == list(range(10))


def test_token_budget_batches_cover_every_sample_once_within_the_budget():
    lengths = [5, 300, 17, 17, 120, 1, 64, 64, 64, 900, 33]
    batches = list(token_budget_batches(lengths, batch_tokens=256))
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    for b in batches:
        width = max(lengths[i] for i in b)
        assert len(b) == 1 or width * len(b) <= 256
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    assert all(len(b) <= 2 for b in token_budget_batches(lengths, 10**6, max_batch_size=2))


def test_max_padding_starts_a_new_batch_where_a_row_would_be_mostly_padding():
    lengths = [100] * 8 + [95] * 4 + [50] * 6 + [10] * 2
    batches = list(token_budget_batches(lengths, 10**6, max_padding=0.2, min_rows=8))
    assert [sorted({lengths[i] for i in b}, reverse=True) for b in batches] == [
        [100, 95], [50, 10]]  # 50 is padded by half of 100; the 10s join a batch under 8 rows
    assert len(list(token_budget_batches(lengths, 10**6))) == 1  # off by default


def test_encoding_a_batch_equals_encoding_each_sample_alone(models):
    scorer = rewardkit.load("reward_model", model=str(models["rm"]), device="cpu",
                            max_length=40)
    samples = [Sample("What is 2+2?", "It is 4."), Sample("q", "a " * 40),
               Sample("long prompt " * 20, "short"),
               Sample([{"role": "user", "content": "hi"}], "there")]
    together = scorer.encode_many(samples)
    for sample, enc in zip(samples, together):
        alone = scorer.encode_many([sample])[0]
        assert (enc.ids, enc.dropped_prompt, enc.dropped_completion) == (
            alone.ids, alone.dropped_prompt, alone.dropped_completion)
    assert together[1].truncated and together[2].dropped_prompt > 0
    assert not together[0].truncated and len(together[0].ids) <= 40


def test_scores_do_not_depend_on_how_samples_are_batched(models):
    path = str(models["rm"])
    samples = [Sample("p", "x " * n) for n in (1, 40, 3, 90, 7, 15)]
    one_batch = rewardkit.load("reward_model", model=path, batch_tokens=10**6).score(samples)
    small = rewardkit.load("reward_model", model=path, batch_tokens=64).score(samples)
    assert [s.value for s in small] == pytest.approx([s.value for s in one_batch], abs=1e-4)


def test_identical_samples_score_bit_identically_whatever_the_batch_layout(models):
    """Identical completions must tie exactly: a float difference from padding or batch
    neighbours would make one of an identical pair "win"."""
    import random

    rng = random.Random(0)
    texts = ["x " * rng.randint(1, 60) + "y" * rng.randint(0, 9) for _ in range(40)]
    samples = []
    for t in texts:  # each text twice, its twin far away in the batch order
        samples.append(Sample("p", t))
    samples += [Sample("p", t) for t in reversed(texts)]
    for budget in (40, 97, 256, 10**6):
        scores = rewardkit.load("reward_model", model=str(models["rm"]),
                                batch_tokens=budget, max_batch_size=3).score(samples)
        first, second = scores[:len(texts)], scores[len(texts):][::-1]
        assert [a.value for a in first] == [b.value for b in second], budget


def test_a_bad_sample_gets_its_own_error_and_the_batch_is_scored(models):
    scorer = rewardkit.load("reward_model", model=str(models["rm"]))
    scores = scorer.score([{"prompt": "a", "completion": "fine"},
                           {"prompt": "a", "completion": 42},
                           {"prompt": "a", "completion": "also fine"}])
    assert scores[0].ok and scores[2].ok and not scores[1].ok
    assert "completion must be a string" in scores[1].error and scores[1].value == 0.0


@pytest.mark.parametrize("which, options, message", [
    ("missing", {}, "no model at .*offline: a local folder with config.json is needed"),
    ("lm", {}, "not a sequence classifier"),
    ("prm", {}, "not a sequence classifier"),
    ("two", {}, "2 outputs"),
    ("nopad", {}, "no pad token"),
    ("rm", {"output": "probability"}, "output must be one of"),
])
def test_reward_model_refuses_unusable_models_at_load_time(models, tmp_path, which, options,
                                                           message):
    path = str(tmp_path / "nowhere") if which == "missing" else str(models[which])
    with pytest.raises(ModelLoadError, match=message):
        rewardkit.load("reward_model", model=path, **options)


def test_a_missing_pad_token_can_be_named(models):
    scorer = rewardkit.load("reward_model", model=str(models["nopad"]), pad_token="<|endoftext|>")
    assert scorer.score([Sample("a", "b"), Sample("a", "longer text")])[1].ok


def test_reward_model_in_a_composition_config(models):
    scorer = rewardkit.load({"rewards": {"rm": {"reward": "reward_model", "weight": 2.0,
                                                "options": {"model": str(models["rm"])}}}})
    direct = rewardkit.load("reward_model", model=str(models["rm"]))
    (score,) = scorer.score([Sample("q", "an answer")])
    (alone,) = direct.score([Sample("q", "an answer")])
    assert score.components["rm"] == pytest.approx(alone.value, abs=1e-6)
    assert score.value == pytest.approx(2.0 * alone.value, abs=1e-6)


# -- process rewards ---------------------------------------------------------------------------

def test_separator_layout_reads_the_last_token_of_each_separator(models):
    tok = AutoTokenizer.from_pretrained(models["prm"])
    enc = encode_steps(tok, "Q", ["step one", "step two"], "separator", separator="\n\n")
    sep = tok("\n\n", add_special_tokens=False).input_ids
    assert len(enc.positions) == 2
    for pos in enc.positions:
        assert enc.ids[pos - len(sep) + 1:pos + 1] == sep
    assert enc.positions[-1] == len(enc.ids) - 1


def test_process_reward_scores_each_step_as_the_token_classifier_does(models):
    path = models["prm"]
    scorer = rewardkit.load("process_reward", model=str(path), aggregate="min")
    assert scorer.layout == "separator"
    (score,) = scorer.score([Sample("What is 3+4?", "3+4 is 7.\n\nSo the answer is 7.")])
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForTokenClassification.from_pretrained(path).eval()
    enc = encode_steps(tok, "What is 3+4?", ["3+4 is 7.", "So the answer is 7."], "separator")
    with torch.no_grad():
        probs = model(input_ids=torch.tensor([enc.ids])).logits[0].softmax(-1)[:, 1]
    assert score.steps == pytest.approx(probs[enc.positions].tolist(), abs=1e-5)
    assert score.value == pytest.approx(min(score.steps))
    assert score.info["num_steps"] == 2


def test_step_token_layout_is_detected_and_read_at_the_step_token(models):
    path = models["qwen_prm"]
    scorer = rewardkit.load("process_reward", model=str(path), system_prompt="Reason.")
    assert scorer.layout == "step_token"
    tok = AutoTokenizer.from_pretrained(path)
    enc = scorer.encode(Sample("Q?", "a\n\nb\n\nc"))
    step_id = tok.convert_tokens_to_ids("<extra_0>")
    assert [enc.ids[p] for p in enc.positions] == [step_id] * 3
    text = tok.decode(enc.ids)
    assert "<|im_start|>system\nReason.<|im_end|>" in text
    assert "a<extra_0>b<extra_0>c<extra_0>" in text
    (score,) = scorer.score([Sample("Q?", "a\n\nb\n\nc")])
    assert len(score.steps) == 3 and all(0 < p < 1 for p in score.steps)


@pytest.mark.parametrize("how, expected", [
    ("min", lambda s: min(s)), ("last", lambda s: s[-1]),
    ("prod", lambda s: math.prod(s)), ("mean", lambda s: sum(s) / len(s))])
def test_aggregates_combine_the_step_scores(models, how, expected):
    scorer = rewardkit.load("process_reward", model=str(models["prm"]), aggregate=how)
    (score,) = scorer.score([Sample("Q", "one\n\ntwo\n\nthree")])
    assert score.value == pytest.approx(expected(score.steps))


def test_steps_can_be_given_as_a_list_and_split_on_any_separator(models):
    scorer = rewardkit.load("process_reward", model=str(models["prm"]), step_sep="\n")
    a, b, bad = scorer.score([
        Sample("Q", "one\ntwo\nthree"),
        Sample("Q", "ignored", metadata={"steps": ["one", "two", "three"]}),
        Sample("Q", "  \n\n ")])
    assert a.steps == pytest.approx(b.steps) and len(a.steps) == 3
    assert not bad.ok and "no steps" in bad.error
    assert split_steps("a\n\n\n\nb\n\n", "\n\n") == ["a", "b"]


def test_steps_past_max_length_are_unscored_and_reported(models):
    scorer = rewardkit.load("process_reward", model=str(models["prm"]), max_length=24)
    (score,) = scorer.score([Sample("Q", "\n\n".join(f"step number {i}" for i in range(10)))])
    assert score.ok and 0 < len(score.steps) < 10
    assert score.info["steps_unscored"] == 10 - len(score.steps)


@pytest.mark.parametrize("which, options, message", [
    ("rm", {}, "not a token classifier"),
    ("lm", {}, "not a token classifier"),
    ("prm", {"layout": "step_token"}, "needs the token"),
    ("prm", {"aggregate": "median"}, "aggregate must be one of"),
])
def test_process_reward_refuses_unusable_models_at_load_time(models, which, options, message):
    with pytest.raises(ModelLoadError, match=message):
        rewardkit.load("process_reward", model=str(models[which]), **options)
