"""The arithmetic task's supervised warm start trains on the answer only, whatever the
tokenizer makes of the prompt."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from rewardkit.testing import arithmetic  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "data" / "learned" / "base"  # the policy's tokenizer plus word tokens


def _answer_tokens(tokenizer, labels, row):
    kept = labels[row][labels[row] != -100].tolist()
    return tokenizer.convert_ids_to_tokens(kept)


def test_labels_cover_the_answer_and_eos_only_with_a_character_tokenizer():
    tok = arithmetic.build_tokenizer()
    _, labels = arithmetic.sft_batch(tok, ["37+45=", "1+2="], ["82", "3"])
    assert _answer_tokens(tok, labels, 0) == ["8", "2", tok.eos_token]
    assert _answer_tokens(tok, labels, 1) == ["3", tok.eos_token]  # padding is -100 too


@pytest.mark.skipif(not (BASE / "tokenizer.json").is_file(), reason="no shipped base")
def test_a_prompt_of_word_tokens_is_masked_by_its_token_count_not_its_length():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(BASE)
    prompt = "what is 72+45+8?"  # 'what' and 'is' are one token each: 12 tokens, 16 characters
    assert len(tok(prompt).input_ids) < len(prompt)
    _, labels = arithmetic.sft_batch(tok, [prompt, "72+45+8="], ["72+45=117\n117+8=125"] * 2)
    expected = list("72+45=117") + ["\n"] + list("117+8=125") + [tok.eos_token]
    assert _answer_tokens(tok, labels, 0) == expected
    assert _answer_tokens(tok, labels, 1) == expected
