"""The `implicit_reward` Scorer: a causal LM's log-likelihood of the completion (reference-free
or against a reference), per-step scores from the same pass, and `eval rm|prm` reading a causal
LM with it."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

import rewardkit  # noqa: E402
from rewardkit import Sample  # noqa: E402
from rewardkit.cli import main as cli_main  # noqa: E402
from rewardkit.models.loading import ModelLoadError  # noqa: E402
from rewardkit.testing import make_tiny_causal_lm, make_tiny_reward_model  # noqa: E402

BASE = Path(__file__).resolve().parents[1] / "data" / "learned" / "base"
"""The shipped arithmetic base: one token per digit, so prompt and steps split cleanly."""
LM_BASE = BASE.parent / "lm_base"
"""The same base trained further as a language model on right worked solutions."""


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("implicit")
    return {"chat": make_tiny_causal_lm(root / "chat", hidden_size=32, num_layers=1),
            "other": make_tiny_causal_lm(root / "other", hidden_size=32, num_layers=1, seed=3),
            "rm": make_tiny_reward_model(root / "rm")}


def _manual_logprobs(path, prompt: str, completion: str) -> list[float]:
    """Log-probabilities of the completion's tokens (and EOS) given the prompt, computed
    here from the model's logits: prompt and completion tokenised apart."""
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    a = tok(prompt, add_special_tokens=False).input_ids
    b = tok(completion, add_special_tokens=False).input_ids + [tok.eos_token_id]
    x = torch.tensor([a + b])
    with torch.no_grad():
        lp = model(x).logits[0, :-1].log_softmax(-1).gather(-1, x[0, 1:, None])[:, 0]
    return lp[len(a) - 1:].tolist()


def test_value_is_the_completions_log_likelihood_reference_free():
    scorer = rewardkit.load("implicit_reward", model=str(BASE), device="cpu")
    score = scorer.score([Sample("what is 28+3+91?", "28+3=31\n31+91=122")])[0]
    manual = _manual_logprobs(BASE, "what is 28+3+91?", "28+3=31\n31+91=122")
    assert score.ok, score.error
    assert score.value == pytest.approx(sum(manual), abs=1e-4)
    assert score.info["completion_tokens"] == len(manual)
    assert score.info["min_token_logprob"] == pytest.approx(min(manual), abs=1e-5)
    mean = rewardkit.load("implicit_reward", model=str(BASE), device="cpu", reduction="mean",
                          beta=2.0).score([Sample("what is 28+3+91?", "28+3=31\n31+91=122")])[0]
    assert mean.value == pytest.approx(2.0 * sum(manual) / len(manual), abs=1e-4)


def test_against_itself_as_reference_every_reward_is_zero_and_steps_one_half():
    scorer = rewardkit.load("implicit_reward", model=str(BASE), reference=str(BASE),
                            device="cpu", step_sep="\n")
    scores = scorer.score([Sample("12+5+7=", "12+5=17\n17+7=24"),
                           Sample("12+5+7=", "12+5=17\n17+7=99")])
    for s in scores:
        assert s.value == pytest.approx(0.0, abs=1e-5)
        assert s.steps == pytest.approx([0.5, 0.5], abs=1e-5)
        assert s.info["ref_logprob"] == pytest.approx(s.info["logprob"], abs=1e-5)


def test_against_another_reference_the_value_is_the_beta_scaled_log_ratio(models):
    path, ref = str(models["chat"]), str(models["other"])
    both = rewardkit.load("implicit_reward", model=path, reference=ref, beta=0.1, device="cpu")
    alone = rewardkit.load("implicit_reward", model=path, device="cpu")
    ref_alone = rewardkit.load("implicit_reward", model=ref, device="cpu", tokenizer=path)
    sample = Sample("What is 2+2?", "It is 4.")
    s, a, r = (x.score([sample])[0] for x in (both, alone, ref_alone))
    assert s.value == pytest.approx(0.1 * (a.value - r.value), abs=1e-4)
    assert s.info["logprob"] == pytest.approx(a.value, abs=1e-4)


def test_a_slipped_digit_lowers_only_its_own_step_and_the_reward():
    scorer = rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu",
                            step_scores="probability")
    steps_right = ["12+5=17", "17+7=24", "24+3=27"]
    steps_wrong = ["12+5=17", "17+7=94", "94+3=97"]
    right, wrong = scorer.score([
        Sample("12+5+7+3=", "", metadata={"steps": steps_right}),
        Sample("12+5+7+3=", "", metadata={"steps": steps_wrong})])
    assert right.info["num_steps"] == wrong.info["num_steps"] == 3
    # Causal: the first step's tokens see nothing of the slip, so its score is unchanged.
    assert wrong.steps[0] == pytest.approx(right.steps[0], abs=1e-6)
    manual = _manual_logprobs(LM_BASE, "12+5+7+3=", "\n".join(steps_right))
    assert right.steps[0] == pytest.approx(math.exp(sum(manual[:7])), rel=1e-4)  # "12+5=17"
    assert 0.0 < wrong.steps[1] < right.steps[1]
    assert wrong.value < right.value


def test_metadata_steps_and_text_split_on_step_sep_agree():
    scorer = rewardkit.load("implicit_reward", model=str(BASE), device="cpu", step_sep="\n")
    given, split = scorer.score([
        Sample("12+5+7=", "ignored", metadata={"steps": ["12+5=17", "17+7=24"]}),
        Sample("12+5+7=", "12+5=17\n17+7=24")])
    assert given.value == pytest.approx(split.value, abs=1e-6)
    assert given.steps == pytest.approx(split.steps, abs=1e-6)


def test_scores_do_not_depend_on_the_batch_and_twins_are_identical():
    scorer = rewardkit.load("implicit_reward", model=str(BASE), device="cpu", batch_tokens=64)
    target = Sample("what is 28+3+91?", "28+3=31\n31+91=122")
    others = [Sample("9+9=", "9+9=18"), Sample("sum of 1,2,3,4,5:", "1+2=3\n3+3=6\n6+4=10\n10+5=15"),
              target]
    alone = scorer.score([target])[0].value
    batch = scorer.score(others + [Sample("4+4=", "4+4=8")])
    assert batch[2].value == pytest.approx(alone, abs=1e-4)
    assert batch[2].value == scorer.score([target, target])[1].value


def test_chat_template_completion_tokens_start_after_the_assistant_header(models):
    path = str(models["chat"])
    scorer = rewardkit.load("implicit_reward", model=path, device="cpu")
    tok = AutoTokenizer.from_pretrained(path)
    s = scorer.score([Sample("What is 2+2?", "It is 4.")])[0]
    prefix = tok.apply_chat_template([{"role": "user", "content": "What is 2+2?"}],
                                     tokenize=False, add_generation_prompt=True)
    full = tok.apply_chat_template([{"role": "user", "content": "What is 2+2?"},
                                    {"role": "assistant", "content": "It is 4."}], tokenize=False)
    n_prefix = len(tok(prefix, add_special_tokens=False).input_ids)
    n_full = len(tok(full, add_special_tokens=False).input_ids)
    assert s.info["completion_tokens"] == n_full - n_prefix


def test_bad_samples_get_their_own_error_and_the_batch_is_answered():
    scorer = rewardkit.load("implicit_reward", model=str(BASE), device="cpu", max_length=20)
    good, long, bad_steps, blank_steps = scorer.score([
        Sample("1+2=", "1+2=3"),
        Sample("1+2+3+4+5+6=", "1+2=3\n3+3=6\n6+4=10\n10+5=15\n15+6=21"),
        Sample("1+2=", "", metadata={"steps": "not a list"}),
        Sample("1+2=", "", metadata={"steps": ["", " "]})])
    assert good.ok and math.isfinite(good.value)
    assert not long.ok and "max_length" in long.error
    assert not bad_steps.ok and "metadata['steps']" in bad_steps.error
    assert not blank_steps.ok and "no step" in blank_steps.error


def test_load_time_errors_say_what_to_do(models):
    with pytest.raises(ModelLoadError, match="not a causal language model"):
        rewardkit.load("implicit_reward", model=str(models["rm"]), device="cpu")
    with pytest.raises(ModelLoadError, match="reduction"):
        rewardkit.load("implicit_reward", model=str(BASE), reduction="max")
    with pytest.raises(ModelLoadError, match="beta"):
        rewardkit.load("implicit_reward", model=str(BASE), beta=0)
    with pytest.raises(ModelLoadError, match="smaller vocabulary"):
        rewardkit.load("implicit_reward", model=str(models["chat"]), reference=str(BASE),
                       device="cpu")


def test_eval_rm_and_prm_read_a_causal_lm_as_its_implicit_reward(tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": "12+5+7=", "chosen": "12+5=17\n17+7=24", "rejected": "12+5=17\n17+7=94"},
        {"prompt": "3+4+5=", "chosen": "3+4=7\n7+5=12", "rejected": "3+4=1\n1+5=6"}]))
    out = tmp_path / "rm.json"
    assert cli_main(["eval", "rm", "--model", str(BASE), "--data", str(pairs), "-o", str(out),
                     "--no-heuristics"]) == 0
    report = json.loads(out.read_text())
    assert report["reward"] == "implicit_reward" and report["n"] == 2
    steps = tmp_path / "steps.jsonl"
    steps.write_text(json.dumps({"prompt": "12+5+7=", "completions": ["12+5=17", "17+7=24"],
                                 "labels": [True, True]}))
    out = tmp_path / "prm.json"
    assert cli_main(["eval", "prm", "--model", str(LM_BASE), "--data", str(steps), "-o",
                     str(out), "--no-heuristics"]) == 0
    report = json.loads(out.read_text())
    assert report["reward"] == "implicit_reward" and report["errors"] == 0
    direct = rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu").score(
        [Sample("12+5+7=", "", metadata={"steps": ["12+5=17", "17+7=24"]})])[0]
    assert report["overall"]["correct_accuracy"] == float(min(direct.steps) >= 0.5)
