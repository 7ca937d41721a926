"""The code reward's trusted side: prompt code runs only in the sandbox, out of the candidate's
reach; a reply past the size bound is refused unread and failure messages stay short; float
comparison decides numbers of any size."""

import pytest

from rewardkit.types import Sample
from rewardkit.verifiers.code import CodeVerifier, CompareOptions
from rewardkit.verifiers.code.compare import text_matches, value_matches

ADD = "```python\ndef add(a, b):\n    return a + b\n```"


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier(pool_size=2, timeout=2.0) as v:
        yield v


def _one(verifier, completion, reference, prompt=""):
    return verifier.score([Sample(prompt, completion, reference)])[0]


# -- prompt code runs in the sandbox -----------------------------------------------------------------
def _shift_prompt(marker: str) -> str:
    return ("try:\n"
            f"    open({marker!r}, 'w').write('prompt code ran here')\n"
            "except OSError:\n    pass\n\n"
            "def shift(s):\n    return ''.join(chr((ord(c) - 97 + 1) % 26 + 97) for c in s)\n\n"
            "def unshift(s):\n    '''Inverse of shift.'''\n")


SHIFT_TEST = ("def check(candidate):\n    for s in ['abc', 'xyz']:\n"
              "        assert candidate(shift(s)) == s\n")
UNSHIFT = ("```python\ndef unshift(s):\n"
           "    return ''.join(chr((ord(c) - 97 - 1) % 26 + 97) for c in s)\n```")


@pytest.mark.parametrize("where", ["reference", "sample"])
def test_prompt_code_never_runs_on_the_host(verifier, tmp_path, where):
    marker = tmp_path / "written-by-prompt-code"
    prompt = _shift_prompt(str(marker))
    reference = {"test": SHIFT_TEST, "entry_point": "unshift"}
    if where == "reference":
        reference["prompt"] = prompt
    score = _one(verifier, UNSHIFT, reference, prompt if where == "sample" else "")
    assert score.value == 1.0, score.info  # the prompt's helper was there for the test
    assert not marker.exists(), "the prompt's code ran on the host"


def test_the_candidate_cannot_patch_the_prompts_helpers_from_its_own_process(verifier):
    # In the candidate's process a helper held in a dict could be swapped; the prompt's
    # helpers live in another process.
    cheat = ("```python\nimport gc\nfor o in gc.get_objects():\n"
             "    if isinstance(o, dict) and callable(o.get('shift')):\n"
             "        o['shift'] = lambda s: s\n"
             "def unshift(s):\n    return s\n```")
    reference = {"test": SHIFT_TEST, "entry_point": "unshift",
                 "prompt": _shift_prompt("/nonexistent/x")}
    assert _one(verifier, cheat, reference).value == 0.0


def test_the_prompts_helper_process_memory_is_out_of_the_candidates_reach(verifier):
    probe = ("```python\nimport os\ndef probe():\n    opened = []\n"
             "    for p in os.listdir('/proc'):\n"
             "        if p.isdigit() and int(p) != os.getpid():\n"
             "            try:\n                open(f'/proc/{p}/mem', 'r+b').close()\n"
             "                opened.append(p)\n"
             "            except OSError:\n                pass\n    return opened\n```")
    reference = {"test": "def check(candidate):\n    assert secret() == 41\n"
                         "    assert candidate() == []\n", "entry_point": "probe",
                 "prompt": "def secret():\n    return 41\n\ndef probe():\n    '''doc'''\n"}
    score = _one(verifier, probe, reference)
    assert score.value == 1.0, score.info


# -- the checker's memory ------------------------------------------------------------------------------
def test_a_reply_past_the_size_bound_is_refused_unread():
    big = "```python\ndef add(a, b):\n    return 'x' * (3 << 20)\n```"
    with CodeVerifier(pool_size=1, timeout=5.0, max_reply_mb=1) as v:
        score = _one(v, big, {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})
        fine = _one(v, ADD, {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})
    assert score.ok and score.value == 0.0
    assert "refused unread" in score.info["tests"][0]["message"], score.info
    assert fine.value == 1.0


def test_failure_messages_never_hold_a_whole_huge_value(verifier):
    big = "```python\ndef add(a, b):\n    return ['x' * 1000] * 1000\n```"
    score = _one(verifier, big, {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})
    message = score.info["tests"][0]["message"]
    assert score.value == 0.0 and len(message) < 400, len(message)


def test_max_reply_mb_is_validated():
    with pytest.raises(ValueError, match="max_reply_mb"):
        CodeVerifier(max_reply_mb=0)


# -- float comparison of huge numbers --------------------------------------------------------------------
BIG = "1" + "0" * 5000


def test_float_mode_decides_huge_integer_tokens():
    options = CompareOptions("float")
    assert text_matches(BIG + "\n", BIG, options)
    assert text_matches("+" + BIG, BIG, options)
    assert not text_matches(BIG[:-1] + "1", BIG, options)
    assert text_matches("1e5000", BIG, options)  # the same number, written as a float
    assert not text_matches("1e400", "2e400", options)  # not both "infinity"
    assert text_matches("1e400", "1.0000000001e400", options)


def test_float_mode_decides_huge_returned_integers():
    options = CompareOptions("float")
    assert not value_matches(10 ** 5000, 1.5, options)
    assert not value_matches(1.5, 10 ** 5000, options)
    assert not value_matches(10 ** 400, float("inf"), options)
    assert value_matches(10 ** 5000, 10 ** 5000, options)


@pytest.mark.parametrize("printed, value", [(BIG, 1.0), (BIG[:-1] + "7", 0.0)])
def test_a_huge_integer_output_is_a_verdict_not_an_error(printed, value):
    program = f"```python\nprint('{printed}')\n```"
    with CodeVerifier(pool_size=1, timeout=5.0, compare="float") as v:
        score = _one(v, program, {"inputs": [""], "outputs": [BIG + "\n"]})
        call = _one(v, f"```python\ndef big():\n    return 10 ** 5000 + {printed[-1]}\n```",
                    {"fn_name": "big", "inputs": [[]], "outputs": [1.5]})
    assert score.ok and score.value == value, score.info
    assert call.ok and call.value == 0.0 and call.info["tests"][0]["verdict"] == \
        "wrong_answer", call.info


def test_a_prompt_whose_code_fails_is_an_error_of_the_reward_not_a_verdict(verifier):
    # The prompt runs before the candidate's code is loaded: its failure is never the
    # candidate's doing.
    reference = {"test": SHIFT_TEST, "entry_point": "unshift",
                 "prompt": "raise RuntimeError('broken dataset row')\n" + _shift_prompt("/x")}
    score = _one(verifier, UNSHIFT, reference)
    assert not score.ok and score.value == 0.0
    assert "broken dataset row" in score.info["error"], score.info
