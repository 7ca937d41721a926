"""Every test-file shape of the code benchmarks (docs/code_test_shapes.md), scored with a
correct, a wrong and an empty program: correct 1.0, wrong below 1.0 (partial credit on, so a
dropped failure shows), empty 0.0 or an error Score.

The records are written here in each benchmark's own format (field names and layout as the
data sets store them) and turned into references the way the docs table says."""
import json

import pytest

from rewardkit.types import Sample
from rewardkit.verifiers.code import CodeVerifier

EMPTY = "```python\npass\n```"


def fenced(code: str) -> str:
    return f"```python\n{code}```"


# -- converters, as in docs/code_test_shapes.md -----------------------------------------------------
def humaneval(record: dict) -> dict:
    return {"test": record["test"], "entry_point": record["entry_point"],
            "prompt": record["prompt"]}


def mbpp(record: dict) -> dict:
    setup = record.get("test_setup_code") or ""
    return {"test": setup + "\n" + "\n".join(record.get("test_imports", []) +
                                              record["test_list"])}


def apps(record: dict, harness: str = "apps") -> dict:
    # input_output is a JSON string, as APPS and TACO store it
    return {**json.loads(record["input_output"]), "harness": harness}


def lcb(record: dict) -> dict:
    cases = json.loads(record["public_test_cases"])
    if cases[0]["testtype"] == "functional":
        return {"fn_name": json.loads(record["metadata"])["func_name"],
                "inputs": [[json.loads(a) for a in c["input"].split("\n")] for c in cases],
                "outputs": [json.loads(c["output"]) for c in cases], "harness": "livecodebench"}
    return {"inputs": [c["input"] for c in cases], "outputs": [c["output"] for c in cases],
            "harness": "livecodebench"}


# -- the records ---------------------------------------------------------------------------------------
TOTAL_PROMPT = 'def total(xs: list) -> int:\n    """Sum of the numbers in xs."""\n'
TOTAL_TEST = ("\n\nMETADATA = {'author': 'rk', 'dataset': 'test'}\n\n\ndef check(candidate):\n"
              "    assert candidate([1, 2, 3]) == 6\n    assert candidate([]) == 0\n"
              "    assert candidate([-4, 4, 5]) == 5\n")
SHIFT_PROMPT = ('def shift(s: str) -> str:\n    """Each letter one further in the alphabet."""\n'
                '    return "".join(chr((ord(c) - 97 + 1) % 26 + 97) for c in s)\n\n\n'
                'def unshift(s: str) -> str:\n    """Takes a string encoded with shift; returns '
                'the decoded string."""\n')
SHIFT_TEST = ("\n\nMETADATA = {}\n\n\ndef check(candidate):\n    for s in ['abc', 'xyz', 'zebra']:\n"
              "        assert candidate(shift(s)) == s\n")
UNSHIFT = ('def unshift(s):\n    return "".join(chr((ord(c) - 97 - 1) % 26 + 97) for c in s)\n')
MEAN_TEST = ("def check(candidate):\n    import math\n"
             "    assert math.isclose(candidate([1.0, 2.0]), 1.5)\n"
             "    assert math.isclose(candidate([3.0]), 3.0)\n")

ADD = "def add(a, b):\n    return a + b\n"
ADD_WRONG_LATE = "def add(a, b):\n    return a + b if a < 2 else a * b\n"  # right for a < 2 only
AREA = "import math\ndef area(r):\n    return math.pi * r * r\n"
AREA_WRONG = "import math\ndef area(r):\n    return 3 * r * r\n"

TWO_SUM = ("class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
           "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
           "                return [seen[target - x], i]\n            seen[x] = i\n")
TWO_SUM_WRONG = "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n"
SUM_STDIN = "a, b = map(int, input().split())\nprint(a + b)\n"
SUM_STDIN_WRONG = "a, b = map(int, input().split())\nprint(a + b if a < 2 else a * b)\n"

# id -> (reference, correct, wrong, sample prompt)
SHAPES = {
    # HumanEval
    "humaneval_whole_function": (
        humaneval({"prompt": TOTAL_PROMPT, "test": TOTAL_TEST, "entry_point": "total"}),
        fenced("def total(xs):\n    return sum(xs)\n"),
        fenced("def total(xs):\n    return sum(x for x in xs if x > 0)\n"), ""),
    "humaneval_continuation": (
        humaneval({"prompt": TOTAL_PROMPT, "test": TOTAL_TEST, "entry_point": "total"}),
        "    return sum(xs)\n", "    return sum(x for x in xs if x > 0)\n", ""),
    "humaneval_helper_in_prompt": (
        humaneval({"prompt": SHIFT_PROMPT, "test": SHIFT_TEST, "entry_point": "unshift"}),
        fenced(UNSHIFT),
        fenced("def shift(s):\n    return s\ndef unshift(s):\n    return s\n"), ""),
    "humaneval_helper_in_chat_prompt": (
        {"test": SHIFT_TEST, "entry_point": "unshift"}, fenced(UNSHIFT),
        fenced("def shift(s):\n    return s\ndef unshift(s):\n    return s\n"), SHIFT_PROMPT),
    "humaneval_imports_inside_check": (
        {"test": MEAN_TEST, "entry_point": "mean"},
        fenced("def mean(xs):\n    return sum(xs) / len(xs)\n"),
        fenced("def mean(xs):\n    return sum(xs) / 2\n"), ""),
    "humaneval_as_its_harness_runs_it_one_file_ending_in_check": (
        {"test": TOTAL_TEST + "\n\ncheck(total)\n", "prompt": TOTAL_PROMPT},
        fenced(TOTAL_PROMPT + "    return sum(xs)\n"),
        fenced(TOTAL_PROMPT + "    return sum(x for x in xs if x > 0)\n"), ""),
    "humaneval_one_file_helper_from_prompt": (
        {"test": SHIFT_TEST + "\n\ncheck(unshift)\n", "prompt": SHIFT_PROMPT}, fenced(UNSHIFT),
        fenced("def shift(s):\n    return s\ndef unshift(s):\n    return s\n"), ""),
    # MBPP
    "mbpp_test_list": (
        mbpp({"test_list": ["assert add(1, 1) == 2", "assert add(2, 3) == 5",
                            "assert add(4, 4) == 8"], "test_setup_code": ""}),
        fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "mbpp_test_setup_code": (
        mbpp({"test_list": ["assert add(*pairs[0]) == 1", "assert add(*pairs[1]) == 7"],
              "test_setup_code": "pairs = [(0, 1), (3, 4)]"}),
        fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "mbpp_asserts_use_the_solutions_import": (
        mbpp({"test_list": ["assert math.isclose(area(1), 3.141592653589793)",
                            "assert math.isclose(area(2), 12.566370614359172)"]}),
        fenced(AREA), fenced(AREA_WRONG), ""),
    "mbpp_sanitized_test_imports": (
        mbpp({"test_imports": ["import math"],
              "test_list": ["assert math.isclose(area(1), 3.141592653589793)"]}),
        fenced(AREA), fenced(AREA_WRONG), ""),
    # assert files ending in a block or a call: the trailing statement's failure counts
    "assert_then_trailing_for": (
        {"test": "assert add(1, 1) == 2\nfor a, b in [(2, 3), (4, 5)]:\n"
                 "    assert add(a, b) == a + b\n"}, fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "assert_then_trailing_while": (
        {"test": "assert add(1, 1) == 2\ni = 2\nwhile i < 5:\n    assert add(i, 1) == i + 1\n"
                 "    i += 1\n"}, fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "assert_then_trailing_with": (
        {"test": "import contextlib\nassert add(1, 1) == 2\nwith contextlib.suppress(KeyError):\n"
                 "    assert add(3, 3) == 6\n"}, fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "assert_then_trailing_if": (
        {"test": "assert add(1, 1) == 2\nif add(0, 0) == 0:\n    assert add(3, 3) == 6\n"},
        fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "assert_then_trailing_check_call": (
        {"test": "def check(candidate):\n    assert candidate(3, 3) == 6\n\n"
                 "assert add(1, 1) == 2\ncheck(add)\n"}, fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "check_call_raising_without_assert": (
        {"test": "assert add(1, 1) == 2\ndef check(candidate):\n    if candidate(3, 3) != 6:\n"
                 "        raise ValueError('wrong sum')\ncheck(add)\n"},
        fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    # names resolved with Python's scoping
    "helper_binds_the_name_in_its_own_scope": (
        {"test": "def helper():\n    add = 3\n    return add\n\n"
                 "assert add(1, 2) == helper()\nassert add(2, 3) == 5\n"},
        fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "lambda_parameter_and_comprehension_bind_the_name": (
        {"test": "key = lambda add: add\nnames = [add for add in 'ab']\n"
                 "assert add(1, 2) == 3\nassert add(2, 3) == 5\n"},
        fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "main_guard_asserts": (
        {"test": "if __name__ == '__main__':\n    assert add(1, 1) == 2\n"
                 "    assert add(2, 3) == 5\n"}, fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "pytest_functions": (
        {"test": "def test_small():\n    assert add(1, 1) == 2\n\n"
                 "class TestAdd:\n    def test_big(self):\n        assert add(20, 3) == 23\n"},
        fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    # APPS / TACO
    "apps_standard_input": (
        apps({"input_output": json.dumps({"inputs": ["1 2\n", "4 5\n"],
                                          "outputs": ["3\n", "9\n"]})}),
        fenced(SUM_STDIN), fenced(SUM_STDIN_WRONG), ""),
    "apps_call_based_wrapped_outputs": (
        apps({"input_output": json.dumps({"fn_name": "add", "inputs": [[1, 1], [4, 5]],
                                          "outputs": [[2], [9]]})}),
        fenced(ADD), fenced(ADD_WRONG_LATE), ""),
    "taco_call_based_solution_class": (
        apps({"input_output": json.dumps({"fn_name": "twoSum",
                                          "inputs": [[[2, 7, 11, 15], 9], [[3, 2, 4], 6]],
                                          "outputs": [[0, 1], [1, 2]]})}, "taco"),
        fenced(TWO_SUM), fenced(TWO_SUM_WRONG), ""),
    # LiveCodeBench
    "livecodebench_stdin": (
        lcb({"public_test_cases": json.dumps([
            {"input": "1 2\n", "output": "3\n", "testtype": "stdin"},
            {"input": "4 5\n", "output": "9\n", "testtype": "stdin"}]),
             "metadata": "{}"}),
        fenced(SUM_STDIN), fenced(SUM_STDIN_WRONG), ""),
    "livecodebench_functional": (
        lcb({"public_test_cases": json.dumps([
            {"input": "[2,7,11,15]\n9", "output": "[0, 1]", "testtype": "functional"},
            {"input": "[3,2,4]\n6", "output": "[1, 2]", "testtype": "functional"}]),
             "metadata": json.dumps({"func_name": "twoSum"})}),
        fenced(TWO_SUM), fenced(TWO_SUM_WRONG), ""),
}


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier(pool_size=2, timeout=2.0, partial_credit=True) as v:
        yield v


def _score(verifier, completion, reference, prompt):
    return verifier.score([Sample(prompt, completion, reference)])[0]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_correct_program_scores_one(verifier, shape):
    reference, correct, _, prompt = SHAPES[shape]
    score = _score(verifier, correct, reference, prompt)
    assert score.ok and score.value == 1.0, score.info


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_wrong_program_scores_below_one(verifier, shape):
    reference, _, wrong, prompt = SHAPES[shape]
    score = _score(verifier, wrong, reference, prompt)
    assert score.value < 1.0, score.info
    assert score.info.get("first_failure"), score.info


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_empty_program_scores_zero_or_is_an_error(verifier, shape):
    reference, _, _, prompt = SHAPES[shape]
    score = _score(verifier, EMPTY, reference, prompt)
    assert score.value == 0.0, score.info


@pytest.mark.parametrize("ending, verdicts", [
    ("sys.exit(0)", ["passed"]), ("sys.exit(3)", ["passed", "failed", "not_run"])])
def test_a_test_script_that_exits_is_judged_like_python_test_py(verifier, ending, verdicts):
    # Status 0 ends the script as a success (what follows never runs, as under
    # `python test.py`); any other status is a failed test, never dropped.
    reference = {"test": f"import sys\nassert add(1, 1) == 2\n{ending}\nassert add(1, 2) == 0\n"}
    score = _score(verifier, fenced(ADD), reference, "")
    assert [t["verdict"] for t in score.info["tests"]] == verdicts, score.info


@pytest.mark.parametrize("test, verdict", [
    ("async def test_add():\n    assert add(1, 2) == 0\n", "failed"),
    ("def test_add():\n    yield\n    assert add(1, 2) == 0\n", "failed"),
])
def test_async_and_yielding_test_functions_never_pass_without_running(verifier, test, verdict):
    score = _score(verifier, fenced(ADD), {"test": "assert add(1, 1) == 2\n" + test}, "")
    assert [t["verdict"] for t in score.info["tests"]] == ["passed", verdict], score.info


def test_an_async_test_function_is_run(verifier):
    score = _score(verifier, fenced(ADD), {"test": "async def test_add():\n"
                                                   "    assert add(1, 2) == 3\n"}, "")
    assert score.value == 1.0 and score.info["total"] == 1, score.info
