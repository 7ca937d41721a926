"""Reasoning format, length and repetition shaping rewards: values from their papers' formulas,
agreement with open-r1's definitions on completions as models write them, edge cases."""
import math
import re
from pathlib import Path

import pytest

import rewardkit
from rewardkit import Sample
from rewardkit.verifiers.shaping import (AdaptiveLength, CosineLength, OverlongPenalty,
                                         RepetitionPenalty, TagCount, ThinkFormat)

GOOD = "<think>\n2 and 2 make 4\n</think>\n<answer>\n\\boxed{4}\n</answer>"

# open-r1's definitions (src/open_r1/rewards.py), written out here as the outside reference
_OPEN_R1_FORMAT = re.compile(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$",
                             re.DOTALL | re.MULTILINE)


def _open_r1_tag_count(text):
    return sum(0.25 for tag in ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>")
               if text.count(tag) == 1)


def _open_r1_repetition(text, n, max_penalty):
    words = text.lower().split()
    if text == "" or len(words) < n:
        return 0.0
    grams = list(zip(*[words[i:] for i in range(n)]))
    return (1 - len(set(grams)) / len(grams)) * max_penalty


AS_WRITTEN = [
    GOOD,
    "<think>\nLet me compute.\n12*4 = 48\n</think>\n<answer>\n48\n</answer>",
    "<think>2+2=4</think><answer>4</answer>",                       # no newlines
    "<think>\nreasoning\n</think>\n\n<answer>\n4\n</answer>",       # blank line between
    "Sure! <think>\nx\n</think>\n<answer>\n4\n</answer>",           # chatter before
    "<think>\nx\n</think>\n<answer>\n4\n</answer>\n",               # final newline
    "<think>\nx\n</think>\nThe answer is 4.",                       # no answer block
    "The answer is 4.",
    "<answer>\n4\n</answer>",
    "<think>\n<think>\nx\n</think>\n<answer>\n4\n</answer>",        # doubled tag
    "",
]


def _one(reward, completion, reference="4", prompt="What is 2+2?", **meta):
    return reward.score([Sample(prompt, completion, reference, meta or None)])[0]


@pytest.mark.parametrize("text", AS_WRITTEN)
def test_strict_format_agrees_with_open_r1_where_tags_are_single(text):
    ours = _one(ThinkFormat(), text).value
    single = all(text.count(t) == 1 for t in ("<think>", "</think>", "<answer>", "</answer>"))
    theirs = 1.0 if _OPEN_R1_FORMAT.match(text) else 0.0
    if single:
        assert ours == theirs
    else:  # deliberate difference: a repeated tag never earns the format reward here
        assert ours == 0.0


def test_trailing_text_after_the_answer_fails_strict_unlike_open_r1_multiline():
    text = GOOD + "\nextra words the grader never reads"
    assert _OPEN_R1_FORMAT.match(text)            # MULTILINE lets `$` stop at a line end
    assert _one(ThinkFormat(), text).value == 0.0


def test_soft_format_and_shared_answer_extraction():
    soft = ThinkFormat(strict=False)
    assert _one(soft, "<think>2+2=4</think> <answer>4</answer>").value == 1.0
    assert _one(soft, "<answer>4</answer><think>x</think>").value == 0.0
    s = _one(ThinkFormat(), GOOD)
    assert s.value == 1.0 and s.info["answer"] == "4"     # read as the math verifier reads it
    empty = _one(ThinkFormat(strict=False, require_answer=True), "<think>x</think><answer> </answer>")
    assert empty.value == 0.0 and empty.info["reason"] == "empty answer"


@pytest.mark.parametrize("text", AS_WRITTEN)
def test_tag_count_equals_open_r1(text):
    assert _one(TagCount(), text).value == _open_r1_tag_count(text)


def test_cosine_length_values():
    r = CosineLength(max_len=100, reward="exact_match")
    assert _one(r, "4").value == pytest.approx(1.0 - 0.5 * (1 - math.cos(math.pi / 100)) / 2)
    right_long, wrong_long = _one(r, "4" + " " * 99), _one(r, "5" + " " * 99)
    # exact_match normalises whitespace, so these are right / wrong answers of length 100
    assert right_long.value == pytest.approx(0.5) and wrong_long.value == pytest.approx(-0.5)
    assert _one(r, "5").value == pytest.approx(-1.0 + 0.5 * (1 - math.cos(math.pi / 100)) / 2)
    mid = CosineLength(max_len=4, reward="exact_match")
    assert _one(mid, "4 ").value == pytest.approx(0.75)    # halfway: the middle of [0.5, 1]
    assert CosineLength(max_len=10, exceed_value=-1, reward="exact_match").value(True, 11) == -1


def test_cosine_length_with_the_math_reward_and_bad_samples():
    r = rewardkit.load("cosine_length", max_len=1000)
    scores = r.score([Sample("q", "\\boxed{4}", "4"), Sample("q", "\\boxed{5}", "4"),
                      Sample("q", "\\boxed{4}", None)])
    assert scores[0].value > 0.99 and scores[1].value < -0.99
    assert not scores[2].ok and "reference" in scores[2].error
    r.close()


def test_dapo_overlong_punishment():
    r = OverlongPenalty(max_length=20, cache=10, unit="words")
    values = [r.value(n) for n in (0, 10, 15, 20, 30)]
    assert values == [0.0, 0.0, -0.5, -1.0, -1.0]
    assert _one(r, "w " * 15).value == -0.5
    tokens = OverlongPenalty(max_length=20, cache=10)
    assert _one(tokens, "short", completion_tokens=18).value == pytest.approx(-0.8)
    missing = _one(tokens, "short")
    assert not missing.ok and "tokenizer" in missing.error
    with pytest.raises(ValueError, match="cache"):
        OverlongPenalty(max_length=10, cache=20)


def test_overlong_counts_tokens_with_a_real_tokenizer():
    policy = Path(__file__).resolve().parents[1] / "data" / "arithmetic" / "policy"
    if not policy.is_dir():
        pytest.skip("data/arithmetic/policy is not built")
    pytest.importorskip("transformers")
    r = OverlongPenalty(max_length=4, cache=2, tokenizer=str(policy))
    from transformers import AutoTokenizer

    n = len(AutoTokenizer.from_pretrained(str(policy))("12+34=46", add_special_tokens=False)["input_ids"])
    assert _one(r, "12+34=46").info["length"] == n
    assert _one(r, "12+34=46").value == r.value(n)


def test_adaptive_length_targets_the_groups_correct_answers():
    r = AdaptiveLength(strength=0.5, reward="exact_match", unit="chars")
    group = [Sample("q", c, "4", {"group": 0}) for c in ("4", "4   ", "4" + " " * 9, "5")]
    other = [Sample("q", "5", "4", {"group": 1}), Sample("q", "6", "4", {"group": 1})]
    scores = r.score(group + other)
    assert [s.info["target"] for s in scores[:4]] == [4.0] * 4  # median of 1, 4, 10 chars
    assert scores[1].value == 1.0                               # at the target
    assert scores[0].value == pytest.approx(1 - 0.5 * 3 / 4)
    assert scores[2].value == pytest.approx(0.5)                # |10 - 4| / 4 > 1: capped
    assert scores[3].value == 0.0                               # wrong
    assert [s.value for s in scores[4:]] == [0.0, 0.0] and scores[4].info["target"] is None
    shortest = AdaptiveLength(statistic="min", only_longer=True, reward="exact_match")
    assert shortest.score(group)[0].value == 1.0


@pytest.mark.parametrize("text", [
    "", "one", "the cat sat on the mat", "a b c a b c a b c",
    "I think I think I think I think so", "Wait, wait, wait. Let me check: 2+2=4. Wait, wait.",
])
def test_repetition_penalty_equals_open_r1(text):
    assert _one(RepetitionPenalty(3, -1.0), text).value == pytest.approx(
        _open_r1_repetition(text, 3, -1.0))


def test_repetition_values_and_options():
    assert _one(RepetitionPenalty(3, -1.0), "a b c a b c a b c").value == pytest.approx(-4 / 7)
    assert _one(RepetitionPenalty(2, -0.5, unit="chars"), "哈哈哈哈").value == pytest.approx(-0.5 * 2 / 3)
    with pytest.raises(ValueError, match="<= 0"):
        RepetitionPenalty(max_penalty=1.0)
