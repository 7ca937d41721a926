"""The offline tiny model builder: what it saves loads back, generates, and chats."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from rewardkit.testing import make_tiny_causal_lm  # noqa: E402


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory):
    return make_tiny_causal_lm(tmp_path_factory.mktemp("tiny-qwen"))


def test_saved_tokenizer_loads_back_and_splits_text_as_trained(tiny_qwen):
    from tokenizers import Tokenizer

    tok = AutoTokenizer.from_pretrained(tiny_qwen)
    trained = Tokenizer.from_file(str(tiny_qwen / "tokenizer.json"))
    for text in ["What is 12 * 4? The answer is 48.", "def add(a, b):\n    return a + b",
                 "accents é and symbols ∑ still round-trip"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == trained.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids) == text
    assert tok.pad_token == "<|pad|>" and tok.eos_token == "<|im_end|>"
    assert tok.pad_token_id != tok.eos_token_id


def test_model_loads_back_with_matching_vocabulary_and_generates(tiny_qwen):
    tok = AutoTokenizer.from_pretrained(tiny_qwen)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen)
    assert model.config.model_type == "qwen2"
    assert model.get_input_embeddings().num_embeddings == len(tok)
    inputs = tok("The answer is", return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert out.shape[1] == inputs["input_ids"].shape[1] + 5


def test_chat_template_renders_turns_and_generation_prompt(tiny_qwen):
    tok = AutoTokenizer.from_pretrained(tiny_qwen)
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is 2 + 3?"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n"
                    "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n")
    ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=False)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    # each turn delimiter is a single special token, never split into pieces
    assert ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 2
    assert ids.count(tok.eos_token_id) == 2


def test_same_seed_same_weights_and_llama_builds(tmp_path):
    a = make_tiny_causal_lm(tmp_path / "a", arch="llama", hidden_size=32, num_layers=1, seed=3)
    b = make_tiny_causal_lm(tmp_path / "b", arch="llama", hidden_size=32, num_layers=1, seed=3)
    c = make_tiny_causal_lm(tmp_path / "c", arch="llama", hidden_size=32, num_layers=1, seed=4)
    wa, wb, wc = (AutoModelForCausalLM.from_pretrained(p).model.embed_tokens.weight
                  for p in (a, b, c))
    assert AutoModelForCausalLM.from_pretrained(a).config.model_type == "llama"
    assert torch.equal(wa, wb)
    assert not torch.equal(wa, wc)


@pytest.mark.parametrize("kwargs, message", [
    ({"arch": "gpt9"}, "arch must be one of"),
    ({"hidden_size": 60}, "multiple of 16"),
    ({"vocab_size": 100}, "at least 300"),
    ({"texts": []}, "texts is empty"),
])
def test_bad_arguments_are_rejected_with_a_reason(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_tiny_causal_lm(tmp_path, **kwargs)
