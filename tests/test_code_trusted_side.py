"""The trusted side of the code reward holds against hostile candidates: tests that never ran
are not a pass, the candidate's replies are decoded under bounds and an absolute deadline in a
limited checker process, helpers come from the prompt, a candidate's StopIteration cannot
end a test's loop early, and an expected integer is compared exactly."""
import pytest

from rewardkit.verifiers.code import CodeVerifier, CompareOptions
from rewardkit.verifiers.code import wire
from rewardkit.verifiers.code.compare import text_matches, value_matches
from tests.test_code_verdicts import _one  # one sample scored by a CodeVerifier

EMPTY = "```python\npass\n```"
ADD = "```python\ndef add(a, b):\n    return a + b\n```"
SUB = "```python\ndef add(a, b):\n    return a - b\n```"
FRAME = ("import json, os, struct, time\n"
         "def _frame(obj):\n    b = json.dumps(obj).encode()\n"
         "    return struct.pack('>I', len(b)) + b\n")


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier(pool_size=2, timeout=1.0) as v:
        yield v


# -- tests that never run -----------------------------------------------------------------------
MAIN_GUARD = {"test": "if __name__ == '__main__':\n    assert add(1, 2) == 3\n"
                      "    assert add(2, 2) == 4\n"}
PYTEST_STYLE = {"test": "def test_small():\n    assert add(1, 2) == 3\n\n"
                        "class TestAdd:\n    def test_zero(self):\n        assert add(0, 0) == 0\n"}


@pytest.mark.parametrize("reference", [MAIN_GUARD, PYTEST_STYLE], ids=["main_guard", "pytest"])
def test_asserts_in_main_guard_and_pytest_functions_run(verifier, reference):
    empty, wrong, right = (_one(verifier, c, reference) for c in (EMPTY, SUB, ADD))
    assert empty.value == 0.0 and wrong.value == 0.0
    assert right.value == 1.0, right.info
    expected = 2
    assert right.info["passed"] == right.info["total"] == expected


@pytest.mark.parametrize("test, entry", [
    ("def check(candidate):\n    pass\n", "add"),
    ("def helper():\n    assert add(1, 2) == 3\n", None),
    ("x = 1\n", None),
])
def test_tests_that_check_nothing_are_an_error_not_a_pass(verifier, test, entry):
    reference = {"test": test, **({"entry_point": entry} if entry else {})}
    score = _one(verifier, ADD, reference)
    assert score.value == 0.0 and not score.ok
    assert "no test executed" in score.info["error"]


# -- helpers from the trusted prompt ------------------------------------------------------------
ROT_PROMPT = ('def encode(s: str):\n    return "".join(chr((ord(c) - 97 + 1) % 26 + 97) '
              'for c in s)\n\n\ndef decode(s: str):\n    """Inverse of encode."""\n')
ROT_REF = {"test": "def check(candidate):\n    for s in ['abc', 'xyz', 'hello']:\n"
                   "        assert candidate(encode(s)) == s\n", "entry_point": "decode"}
CHEAT = "```python\ndef encode(s):\n    return s\ndef decode(s):\n    return s\n```"
HONEST = ("```python\ndef decode(s):\n    return ''.join(chr((ord(c) - 97 - 1) % 26 + 97) "
          "for c in s)\n```")


def test_helpers_come_from_the_samples_prompt_when_the_reference_has_none(verifier):
    assert _one(verifier, CHEAT, ROT_REF, prompt=ROT_PROMPT).value == 0.0
    assert _one(verifier, HONEST, ROT_REF, prompt=ROT_PROMPT).value == 1.0


def test_without_a_trusted_prompt_the_candidates_helper_is_never_used(verifier):
    score = _one(verifier, CHEAT, ROT_REF)
    assert score.value == 0.0
    assert "encode" in score.info["first_failure"]


# -- exceptions that steer the test's control flow ------------------------------------------------
def test_a_candidates_stopiteration_cannot_end_the_tests_loop_early(verifier):
    reference = {"test": "def check(candidate):\n    assert all(map(candidate, [1, 2, 3]))\n",
                 "entry_point": "positive"}
    cheat = "```python\ndef positive(x):\n    raise StopIteration\n```"
    assert _one(verifier, cheat, reference).value == 0.0
    assert _one(verifier, "```python\ndef positive(x):\n    return x > 0\n```",
                reference).value == 1.0


# -- float comparison ------------------------------------------------------------------------------
def test_float_mode_compares_expected_integers_exactly():
    options = CompareOptions("float")
    assert not text_matches("1000000001\n", "1000000000\n", options)
    assert not text_matches("1000000001.0", "1000000000", options)
    assert text_matches("7.0", "7", options) and text_matches("0.3333334", "0.3333333", options)
    assert not value_matches(1000000001.0, 1000000000, options)
    assert value_matches(2.0, 2, options) and value_matches(0.1 + 0.2, 0.3, options)


# -- decoding the candidate's replies ---------------------------------------------------------------
def test_the_scorer_process_never_decodes_the_candidates_reply(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("decoded in the scorer's process")

    from rewardkit.verifiers.code import channel, harness
    monkeypatch.setattr(wire, "from_tree", refuse)
    monkeypatch.setattr(harness, "from_tree", refuse)
    monkeypatch.setattr(channel, "from_tree", refuse)
    with CodeVerifier(pool_size=1, timeout=2.0) as v:
        score = _one(v, ADD, {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]})
    assert score.value == 1.0, score.info


def test_a_reply_trickled_byte_by_byte_times_out_at_the_case_deadline():
    trickle = FRAME + ("def add(a, b):\n    head = struct.pack('>I', 100)\n"
                       "    for i in range(100):\n"
                       "        os.write(3, (head + b'{' * 96)[i:i + 1])\n"
                       "        time.sleep(0.1)\n")
    with CodeVerifier(pool_size=1, timeout=0.5, partial_credit=True) as v:
        score = _one(v, f"```python\n{trickle}```",
                     {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})
    assert score.value == 0.0
    assert score.info["tests"][0]["verdict"] == "timeout", score.info


def test_a_set_of_colliding_hashes_is_cut_off_at_the_case_deadline():
    # Every n * (2**61 - 1) hashes to 0: building a set of them is quadratic.
    collide = FRAME + ("def add(a, b):\n    big = [i * (2 ** 61 - 1) for i in range(1, 40001)]\n"
                       "    os.write(3, _frame({'ok': True, 'value': {'s': big}}))\n"
                       "    time.sleep(60)\n")
    with CodeVerifier(pool_size=1, timeout=0.5, partial_credit=True) as v:
        score = _one(v, f"```python\n{collide}```",
                     {"fn_name": "add", "inputs": [[1, 2], [2, 2]], "outputs": [3, 4]})
    assert score.value == 0.0
    assert score.info["tests"][0]["verdict"] == "timeout", score.info


def test_a_frame_of_millions_of_empty_lists_is_refused_before_it_is_built():
    flood = FRAME + ("def add(a, b):\n    body = b'{\"ok\":true,\"value\":[' + b'[],' * 3000000"
                     " + b'[]]}'\n    os.write(3, struct.pack('>I', len(body)) + body)\n"
                     "    time.sleep(60)\n")
    with CodeVerifier(pool_size=1, timeout=2.0, partial_credit=True) as v:
        score = _one(v, f"```python\n{flood}```",
                     {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})
    assert score.value == 0.0
    assert "values" in score.info["tests"][0]["message"], score.info


def test_framing_counts_values_before_decoding():
    import socket
    a, b = socket.socketpair()
    with a, b:
        wire.send_msg(a, {"v": [[] for _ in range(50)]})
        with pytest.raises(wire.WireError, match="more than 10 values"):
            wire.recv_msg(b, max_nodes=10)



def test_a_checker_ended_by_a_signal_fails_the_sample_and_is_replaced(verifier):
    # What the kernel does to a checker at its memory or CPU limit, done here by the test code
    # itself (which runs in the checker).
    killer = {"test": "def check(candidate):\n    import os, signal\n    candidate(1, 2)\n"
                      "    os.kill(os.getpid(), signal.SIGXCPU)\n", "entry_point": "add"}
    score = _one(verifier, ADD, killer)
    assert score.ok and score.value == 0.0
    assert score.info["tests"][0]["verdict"] == "crashed"
    assert "limit" in score.info["tests"][0]["message"]
    assert _one(verifier, ADD, {"test": "assert add(1, 2) == 3"}).value == 1.0
