"""`implicit_reward` with `verify: generate`: a bare final answer is scored by the model's own
worked solution (generated from the prompt) with the answer put in its place; worked
completions keep the likelihood reading; every way the own solution can fail is an error in
that sample's Score."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import rewardkit  # noqa: E402
from rewardkit import Sample  # noqa: E402
from rewardkit.cli import main as cli_main  # noqa: E402
from rewardkit.models.loading import ModelLoadError  # noqa: E402
from rewardkit.testing import make_tiny_causal_lm  # noqa: E402

LM_BASE = Path(__file__).resolve().parents[1] / "data" / "learned" / "lm_base"
"""The shipped arithmetic language model (2 MB): it writes these problems' worked solutions
right, greedily."""
RIGHT = {"what is 28+3+91?": "28+3=31\n31+91=122", "sum of 21,30,4:": "21+30=51\n51+4=55",
         "14+23+5=": "14+23=37\n37+5=42", "what is 6+52+20?": "6+52=58\n58+20=78"}


@pytest.fixture(scope="module")
def generate():
    return rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu",
                          verify="generate")


def test_a_model_that_writes_the_right_steps_ranks_the_right_bare_answer_first(generate):
    for prompt, steps in RIGHT.items():
        total = int(steps.rsplit("=", 1)[1])
        wrong = [total + d for d in (-10, -1, 1, 2, 10, 100)]
        right, *others = generate.score([Sample(prompt, str(a)) for a in [total, *wrong]])
        assert right.info["generated"] == steps  # it wrote the right steps
        assert right.info["agrees"] and right.info["own_answers"] == [str(total)]
        for w, s in zip(wrong, others):
            assert s.ok and not s.info["agrees"]
            assert right.value > s.value, (prompt, w, right.value, s.value)


def test_the_value_is_the_likelihood_of_the_own_steps_with_the_answer_put_in(generate):
    likelihood = rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu")
    bare = generate.score([Sample("what is 28+3+91?", " 123 ")])[0]
    worked = likelihood.score([Sample("what is 28+3+91?", "28+3=31\n31+91=123")])[0]
    assert bare.value == pytest.approx(worked.value, abs=1e-4)
    assert bare.steps == pytest.approx([math.exp(worked.value)], rel=1e-4)
    doubled = rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu",
                             verify="generate", beta=2.0)
    assert doubled.score([Sample("what is 28+3+91?", "123")])[0].value == \
        pytest.approx(2.0 * worked.value, abs=1e-4)


def test_worked_completions_keep_the_likelihood_reading(generate):
    likelihood = rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu")
    samples = [Sample("12+5+7=", "12+5=17\n17+7=24"), Sample("12+5+7=", "it is 24"),
               Sample("12+5+7=", "", metadata={"steps": ["12+5=17", "17+7=24"]})]
    for a, b in zip(generate.score(samples), likelihood.score(samples)):
        assert "verify" not in a.info
        # the same reading up to float32 rounding: the two scorers may batch the passes
        # differently (a sum of ~20 log-probabilities near -63 moved by 1.5e-5 once)
        assert a.value == pytest.approx(b.value, rel=1e-6, abs=1e-5)
        assert a.steps == pytest.approx(b.steps)


def test_generation_is_batched_and_gives_what_one_prompt_alone_gives(generate):
    """Prompts of different lengths are left-padded together; each gets what it gets alone."""
    samples = [Sample(p, a) for p in RIGHT for a in ("5", "122")]
    together = generate.score(samples)
    for s, t in zip(samples, together):
        alone = generate.score([s])[0]
        assert alone.info["generated"] == t.info["generated"] == RIGHT[s.prompt]
        assert alone.value == pytest.approx(t.value, abs=1e-4)


def test_more_solutions_are_summed_into_one_probability():
    beams = rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu",
                           verify="generate", num_solutions=3)
    greedy = rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu",
                            verify="generate")
    s = beams.score([Sample("sum of 21,30,4:", "55")])[0]
    g = greedy.score([Sample("sum of 21,30,4:", "55")])[0]
    assert s.info["solutions_used"] == 3 and len(s.info["own_answers"]) == 3
    assert s.info["generated"] == g.info["generated"]  # the best beam is the greedy path here
    assert s.value >= g.value - 1e-4  # a sum over paths that include the greedy one
    assert 0.0 < s.steps[0] <= 1.0 + 1e-6


def test_own_solutions_that_fail_are_errors_in_their_own_scores(generate):
    short = rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu",
                           verify="generate", max_new_tokens=3)
    cut, worked = short.score([Sample("what is 28+3+91?", "122"),
                               Sample("12+5+7=", "12+5=17\n17+7=24")])
    assert not cut.ok and "max_new_tokens=3" in cut.error
    assert worked.ok
    decimals = rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu",
                              verify="generate", answer_pattern=r"\d+\.\d+")
    none, = decimals.score([Sample("what is 28+3+91?", "122.0")])
    assert not none.ok and "no final answer matching" in none.error
    tight = rewardkit.load("implicit_reward", model=str(LM_BASE), device="cpu",
                           verify="generate", max_length=16)
    over, = tight.score([Sample("what is 28+3+91?", "122")])
    assert not over.ok and "max_length" in over.error


def test_a_model_that_never_ends_its_solution_is_an_error(tmp_path):
    random_lm = make_tiny_causal_lm(tmp_path / "lm", hidden_size=32, num_layers=1)
    scorer = rewardkit.load("implicit_reward", model=str(random_lm), device="cpu",
                            verify="generate", max_new_tokens=1, chat_template=False)
    s, = scorer.score([Sample("What is 2+2?", "4")])
    assert not s.ok and "ended within max_new_tokens=1" in s.error


def test_bad_options_are_refused_with_what_to_do():
    with pytest.raises(ModelLoadError, match="verify must be one of"):
        rewardkit.load("implicit_reward", model=str(LM_BASE), verify="check")
    with pytest.raises(ModelLoadError, match="drop reference"):
        rewardkit.load("implicit_reward", model=str(LM_BASE), reference=str(LM_BASE),
                       verify="generate")
    with pytest.raises(ModelLoadError, match="reduction"):
        rewardkit.load("implicit_reward", model=str(LM_BASE), reduction="mean",
                       verify="generate")
    with pytest.raises(ModelLoadError, match="num_solutions"):
        rewardkit.load("implicit_reward", model=str(LM_BASE), verify="generate",
                       num_solutions=0)
    with pytest.raises(ModelLoadError, match="max_new_tokens"):
        rewardkit.load("implicit_reward", model=str(LM_BASE), verify="generate",
                       max_new_tokens=0)
    with pytest.raises(ModelLoadError, match="not a regular expression"):
        rewardkit.load("implicit_reward", model=str(LM_BASE), answer_pattern="(")
    with pytest.raises(ModelLoadError, match="empty text"):
        rewardkit.load("implicit_reward", model=str(LM_BASE), answer_pattern=r"\d*")


def test_eval_rm_shows_bare_and_worked_forms_side_by_side(tmp_path, capsys):
    rows = [{"prompt": p, "chosen": c, "rejected": r, "subset": s} for p, c, r, s in [
        ("what is 28+3+91?", "122", "132", "in_range/bare"),
        ("sum of 21,30,4:", "21+30=51\n51+4=55", "21+30=51\n51+4=65", "in_range/worked"),
        ("14+23+5=", "42", "41", "spaced/bare")]]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "report.json"
    assert cli_main(["eval", "rm", "--model", str(LM_BASE), "--data", str(data), "-O",
                     "verify=generate", "-o", str(out), "--no-heuristics"]) == 0
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if "slice" in line)
    assert header.split() == ["slice", "bare", "worked"]
    spaced = next(line for line in printed.splitlines() if line.strip().startswith("spaced"))
    assert spaced.split()[1] == "1.000" and spaced.split()[-1] == "-"
    assert json.loads(out.read_text())["subsets"]["in_range/bare"]["accuracy"] == 1.0
