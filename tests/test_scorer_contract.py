"""The Scorer contract: batch in, one Score per sample out, a bad sample never kills a batch."""
import asyncio
import threading

import pytest

import rewardkit
from rewardkit import Sample, Score, Scorer


class Flaky(Scorer):
    name = "flaky"

    def score_one(self, sample):
        if sample.completion_text == "boom":
            raise RuntimeError("exploded on purpose")
        return float(len(sample.completion_text))


def test_failing_sample_gets_error_score_and_others_are_kept():
    scores = Flaky().score([Sample("p", "ab"), Sample("p", "boom"), Sample("p", "abc")])
    assert [s.value for s in scores] == [2.0, 0.0, 3.0]
    assert scores[1].info["error"] == "RuntimeError: exploded on purpose"
    assert scores[1].info["error_kind"] == "RuntimeError"
    assert scores[0].ok and not scores[1].ok


def test_error_value_is_configurable():
    s = Flaky()
    s.error_value = -1.0
    assert s.score([Sample("p", "boom")])[0].value == -1.0


def test_malformed_sample_dicts_are_scored_as_errors_in_place():
    scores = Flaky().score([{"prompt": "p", "completion": "ab"}, {"prompt": "p", "completion": 5},
                            {"prompt": "p", "completion": "x", "refrence": 1}])
    assert scores[0].value == 2.0
    assert "completion must be a string" in scores[1].info["error"]
    assert "unknown sample field" in scores[2].info["error"]


class BatchOnly(Scorer):
    def score_batch(self, samples):
        if any(s.completion == "boom" for s in samples):
            raise ValueError("bad batch")
        return [Score(1.0) for _ in samples]


def test_failing_batch_is_retried_per_sample_so_only_the_culprit_errs():
    scores = BatchOnly().score([Sample("p", "a"), Sample("p", "boom"), Sample("p", "c")])
    assert [s.ok for s in scores] == [True, False, True]
    assert "bad batch" in scores[1].info["error"]


def test_score_rejects_a_single_sample_with_advice():
    with pytest.raises(TypeError, match=r"score\(\[sample\]\)"):
        Flaky().score(Sample("p", "x"))


def test_chat_completion_is_scored_on_last_assistant_message():
    s = Sample([{"role": "user", "content": "hi"}],
               [{"role": "assistant", "content": "first"}, {"role": "tool", "content": "t"},
                {"role": "assistant", "content": [{"type": "text", "text": "final"}]}])
    assert s.completion_text == "final"
    assert s.prompt_text == "hi"


def test_chat_messages_without_content_are_an_error_score():
    sample = Sample("p", [{"role": "assistant"}])
    assert "completion[0]" in sample.problem
    [score] = rewardkit.load("exact_match").score([sample])
    assert score.info["error_kind"] == "bad_sample" and "completion[0]" in score.error


def test_nan_from_a_function_reward_is_an_error():
    scorer = rewardkit.FunctionScorer(lambda p, c, r: float("nan"), name="nan")
    assert scorer.score([Sample("p", "c")])[0].info["error_kind"] == "nan"


class _Emits(Scorer):
    """Returns the Scores it was built with, whatever the samples (a custom Scorer's bug)."""

    def __init__(self, *scores: Score) -> None:
        self.scores = scores

    def score_batch(self, samples):
        return list(self.scores)[:len(samples)]


@pytest.mark.parametrize("bad, kind, names", [
    (Score(float("nan")), "nan", "value"),
    (Score(float("inf")), "non_finite", "value"),
    (Score(-float("inf")), "non_finite", "value"),
    (Score(1.0, components={"a": 1.0, "b": float("nan")}), "nan", "component 'b'"),
    (Score(1.0, steps=[0.5, float("inf")]), "non_finite", "step 1"),
    (Score(1.0, uncertainty=float("nan")), "nan", "uncertainty"),
])
def test_a_non_finite_number_in_any_scorers_score_becomes_an_error(bad, kind, names):
    """Checked in Scorer.score for every reward, custom Scorers included: a NaN or infinity
    reaching a trainer turns a whole group's normalised advantages into NaN."""
    good = Score(0.5, info={"kept": True})
    scorer = _Emits(good, Score(bad.value, dict(bad.components), bad.steps, bad.uncertainty,
                                {"extracted": "x"}))
    scorer.error_value = -1.0
    first, second = scorer.score([Sample("p", "a"), Sample("p", "b")])
    assert first is good
    assert not second.ok and second.value == -1.0 and second.info["error_kind"] == kind
    assert names in second.error and second.info["extracted"] == "x"
    # An error Score keeps the error_value it was given, even a NaN one (TRL reads NaN as
    # "does not apply"): only Scores that claim a reward are checked.
    err = Score.from_error("no", float("nan"))
    assert _Emits(err).score([Sample("p", "a")])[0] is err


def test_ascore_matches_score_and_runs_off_the_event_loop_thread():
    seen = []

    class Where(Scorer):
        def score_one(self, sample):
            seen.append(threading.current_thread() is threading.main_thread())
            return 1.0

    out = asyncio.run(Where().ascore([Sample("p", "c")]))
    assert [s.value for s in out] == [1.0] and seen == [False]


def test_score_to_dict_drops_empty_parts():
    assert Score(0.5).to_dict() == {"value": 0.5}
    d = Score(1.0, {"a": 1.0}, [0.1], 0.2, {"x": 1}).to_dict()
    assert d == {"value": 1.0, "components": {"a": 1.0}, "steps": [0.1], "uncertainty": 0.2,
                 "info": {"x": 1}}
