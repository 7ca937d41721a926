"""Completions as trainers decode them end in chat-template special tokens; every text reward
must score them as if the tokens were not there."""
import pytest

import rewardkit
from rewardkit import Sample
from rewardkit.text import END_TOKENS, strip_end_tokens

# Endings as real chat templates produce them (token, and what a decode with
# skip_special_tokens=False appends after the answer).
ENDINGS = ["<|im_end|>", "<|im_end|>\n", "</s>", "<|eot_id|>", "<|endoftext|>",
           "<|end_of_text|>", "<end_of_turn>\n<eos>", "<｜end▁of▁sentence｜>", "<|end|>",
           "<|return|>", "<|im_end|><|endoftext|><|endoftext|>", " </s></s>"]


@pytest.mark.parametrize("ending", ENDINGS)
def test_every_text_reward_ignores_trailing_end_tokens(ending):
    batch = [Sample("2+2?", "4" + ending, "4")]
    assert rewardkit.load("exact_match").score(batch)[0].value == 1.0
    assert rewardkit.load("regex", pattern=r"^\d+$", mode="fullmatch").score(batch)[0].value == 1.0

    @rewardkit.reward("ends_with_digit_probe", override=True)
    def probe(prompt, completion, reference):
        return float(completion[-1:].isdigit())

    assert rewardkit.load("ends_with_digit_probe").score(batch)[0].value == 1.0


@pytest.mark.parametrize("completion", [
    "Natalia sold 48 + 24 = 72 clips.\n#### 72<|im_end|>",
    "The answer is \\boxed{72}.</s>",
    "<think>48+24</think>\nSo the total is \\boxed{72}<｜end▁of▁sentence｜>",
    "\\boxed{72}<|eot_id|>",
])
def test_math_reads_the_answer_before_the_end_token(completion):
    score = rewardkit.load("math", preset="gsm8k").score([Sample("q", completion, "72")])[0]
    assert score.value == 1.0, score.info


def test_chat_message_completions_are_stripped_too():
    sample = Sample("q", [{"role": "assistant", "content": "Paris<|im_end|>"}], "Paris")
    assert sample.completion_text == "Paris"
    assert rewardkit.load("exact_match").score([sample])[0].value == 1.0


@pytest.mark.parametrize("text, expected", [
    ("x</answer>", "x</answer>"),      # a format tag is the policy's text, kept
    ("a <b>", "a <b>"),
    ("ends with space  ", "ends with space  "),  # untouched when nothing is stripped
    ("<|im_end|> in the middle, then text", "<|im_end|> in the middle, then text"),
    ("x<|assistant|>", "x"),           # any special-token shape at the end
    ("<|im_end|>", ""),
])
def test_only_trailing_special_tokens_are_removed(text, expected):
    assert strip_end_tokens(text) == expected


def test_a_flood_of_end_tokens_is_stripped_in_one_linear_pass():
    text = "42" + "<|im_end|>\n" * 200_000
    assert strip_end_tokens(text) == "42"


# The end-of-turn token of each chat-template family, as the families' tokenizer configs define
# them (ChatML/Qwen/Phi-4, Llama 2, Llama 3, Llama 4, Mistral, Gemma 2/3, Gemma 4, Phi-3,
# Alpaca/Vicuna/Zephyr, gpt-oss, DeepSeek V3/R1, DeepSeek-Coder, Cohere Command R).
FAMILY_END_TOKENS = ["<|im_end|>", "</s>", "<|eot_id|>", "<|eot|>", "<end_of_turn>", "<turn|>",
                     "<|end|>", "<|return|>", "<｜end▁of▁sentence｜>", "<|EOT|>",
                     "<|END_OF_TURN_TOKEN|>", "<|end_of_text|>", "<|endoftext|>"]


@pytest.mark.parametrize("token", FAMILY_END_TOKENS)
def test_end_tokens_of_every_chat_template_family_are_stripped(token):
    assert strip_end_tokens("The answer is 72." + token) == "The answer is 72."
    assert strip_end_tokens("#### 72" + token + "\n") == "#### 72"


def test_the_token_list_covers_the_families_named_in_the_docs():
    for token in ("<|im_end|>", "</s>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>",
                  "<end_of_turn>", "<｜end▁of▁sentence｜>"):
        assert token in END_TOKENS
