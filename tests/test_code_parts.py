"""The code reward's pure parts: code extraction, reference parsing, output comparison and the
plain-data wire codec. No sandbox needed."""
import json
import math
import socket

import pytest

from rewardkit.scorer import RewardInputError
from rewardkit.verifiers.code.compare import CompareOptions, text_matches, value_matches
from rewardkit.verifiers.code.extract import extract_code
from rewardkit.verifiers.code.harness import free_names
from rewardkit.verifiers.code.references import parse_reference
from rewardkit.verifiers.code.wire import WireError, from_tree, recv_msg, send_msg, to_tree


# -- extract ----------------------------------------------------------------------------------
def test_last_fenced_block_wins_and_names_the_language():
    text = "first\n```python\nx = 1\n```\nthen\n```cpp\nint main(){}\n```\nbye"
    got = extract_code(text)
    assert got.code == "int main(){}\n" and got.language == "cpp" and got.fenced


def test_unclosed_last_fence_counts_as_a_block():
    got = extract_code("Here:\n```py\ndef f():\n    return 1")
    assert got.code == "def f():\n    return 1\n" and got.language == "python"


def test_no_fence_means_the_whole_text():
    got = extract_code("def f():\n    return 1\n")
    assert got.code == "def f():\n    return 1\n" and got.language is None and not got.fenced


def test_fence_without_or_with_unknown_language_leaves_language_open():
    assert extract_code("```\nx\n```").language is None
    assert extract_code("```brainfuck\n+\n```").fence_tag == "brainfuck"


def test_an_output_block_after_the_program_does_not_replace_it():
    program = "```python\nprint(2)\n```\n"
    for shown in ("Output:\n```\n2\n```", "```text\n2\n```", "```console\n$ python a.py\n```"):
        got = extract_code(program + shown)
        assert got.code == "print(2)\n" and got.language == "python", shown
    got = extract_code("```\nprint(1)\n```\nthen\n```\nprint(2)\n```")
    assert got.code == "print(2)\n"  # among untagged blocks the last still wins


# -- references -------------------------------------------------------------------------------
def test_reference_styles_are_told_apart_by_their_keys():
    he = parse_reference({"test": "def check(candidate):\n    assert candidate(1)\n",
                          "entry_point": "f"})
    assert he.style == "humaneval" and he.entry_point == "f"
    asserts = parse_reference({"test": "x = 2\nassert f(1) == 2\nassert f(2) == x\n"})
    assert asserts.style == "assert" and asserts.n_tests == 2
    io = parse_reference({"inputs": ["1\n", ["2", "3"]], "outputs": ["1\n", "5\n"]})
    assert io.style == "io" and io.inputs[1] == "2\n3\n"
    call = parse_reference({"fn_name": "f", "inputs": [[1, 2]], "outputs": [3], "timeout": 2,
                            "memory_mb": 256, "language": "py"})
    assert (call.style, call.timeout, call.memory_mb, call.language) == ("call", 2.0, 256,
                                                                         "python")


def test_reference_may_be_a_json_string():
    assert parse_reference(json.dumps({"inputs": ["1"], "outputs": ["1"]})).style == "io"


@pytest.mark.parametrize("reference, words", [
    (None, "expected a dict"),
    ({"answer": 3}, "no 'test' and no 'inputs'/'outputs'"),
    ({"test": "assert f(1) ==\n"}, "not valid Python"),
    ({"test": "def check(candidate):\n    assert candidate(1)\n"}, "no 'entry_point'"),
    ({"inputs": ["1"], "outputs": []}, "1 inputs but 0 outputs"),
    ({"inputs": [], "outputs": []}, "at least one test case"),
    ({"fn_name": "f", "inputs": [3], "outputs": [3]}, "list of arguments"),
    ({"fn_name": "not an id", "inputs": [[3]], "outputs": [3]}, "identifier"),
    ({"inputs": ["1"], "outputs": ["1"], "timeout": -1}, "positive number"),
    ({"inputs": ["1"], "outputs": ["1"], "language": "cobol"}, "unknown language"),
    ("not json", "must be JSON"),
])
def test_bad_references_say_what_is_wrong(reference, words):
    with pytest.raises(RewardInputError, match="bad code reference") as err:
        parse_reference(reference)
    assert words in str(err.value)


def test_free_names_are_what_the_test_borrows_from_the_candidate():
    test = "import math\nX = 3\ndef check(c):\n    y = poly([1], 2)\n    assert c(y) == X\n"
    assert free_names(test) == {"poly"}
    assert free_names("assert len(f(1)) == 1") == {"f"}


# -- compare ----------------------------------------------------------------------------------
def test_whitespace_mode_ignores_spacing_but_not_tokens():
    options = CompareOptions("whitespace")
    assert text_matches("1 2\r\n3  \n\n", "1 2\n3\n", options)
    assert not text_matches("1 2 3", "1 2 4", options)


def test_exact_mode_needs_identical_text():
    assert not text_matches("1\n", "1", CompareOptions("exact"))
    assert text_matches("1\n", "1\n", CompareOptions("exact"))


def test_float_mode_tolerates_rounding_only():
    options = CompareOptions("float", rel_tol=1e-6, abs_tol=1e-6)
    assert text_matches("0.3333333\n", "0.333333333\n", options)
    assert not text_matches("0.34\n", "0.333333333\n", options)
    assert not text_matches("0.3333333", "0.333333333", CompareOptions("whitespace"))


def test_call_values_compare_tuples_as_lists_and_unwrap_singletons():
    options = CompareOptions()
    assert value_matches((1, 2), [1, 2], options)
    assert value_matches(7, [7], options)
    assert not value_matches(7, [8], options)
    assert not value_matches(7, [7], CompareOptions(unwrap_singleton=False))
    assert value_matches([0.1 + 0.2], [0.3], CompareOptions("float"))
    assert not value_matches([0.1 + 0.2], [0.3], options)


def test_unknown_compare_mode_is_refused():
    with pytest.raises(ValueError, match="compare mode"):
        CompareOptions("fuzzy")


# -- wire -------------------------------------------------------------------------------------
PLAIN = [None, True, 0, -5, 1 << 200, 1.5, math.inf, "ü", b"\x00\xff", 2 + 3j,
         [1, [2]], (1, (2, "a")), {"a": 1, 2: (3,)}, {1, 2}, frozenset({"x"}), {(1, 2): {3}}]


@pytest.mark.parametrize("value", PLAIN, ids=repr)
def test_plain_builtin_data_round_trips_exactly(value):
    back = from_tree(json.loads(json.dumps(to_tree(value))))
    assert back == value and type(back) is type(value)


def test_anything_but_builtin_plain_data_refuses_to_encode():
    class AlwaysEqual:
        def __eq__(self, other):
            return True

    class SneakyInt(int):
        def __eq__(self, other):
            return True

    for value in (AlwaysEqual(), SneakyInt(3), [AlwaysEqual()], {"k": SneakyInt(1)}, print):
        with pytest.raises(WireError, match="not plain data"):
            to_tree(value)


@pytest.mark.parametrize("tree", [{"x": 1}, {"t": 5}, {"d": [[[1], 2]]}, {"c": ["a", 1]},
                                  {"b": "***"}, {"i": "zz"}])
def test_malformed_trees_are_rejected(tree):
    with pytest.raises(WireError):
        from_tree(tree)


def test_deeply_nested_data_is_rejected_not_crashing():
    deep = []
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(WireError, match="nested too deeply"):
        to_tree(deep)
    tree = []
    for _ in range(1000):
        tree = [tree]
    with pytest.raises(WireError):
        from_tree(tree)


def test_framing_refuses_oversized_and_cut_messages():
    a, b = socket.socketpair()
    with a, b:
        send_msg(a, {"v": "x" * 100})
        with pytest.raises(WireError, match="exceeds"):
            recv_msg(b, max_bytes=50)
    a, b = socket.socketpair()
    with b:
        a.sendall(b"\x00\x00\x01\x00{")
        a.close()
        with pytest.raises(WireError, match="closed"):
            recv_msg(b)
