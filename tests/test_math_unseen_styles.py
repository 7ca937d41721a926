"""Answers written in styles the labelled sets did not hold: answer phrases read by their shape,
units (dropped when right, refused when another unit than the one asked for), sets of numbers
written in words or as relations joined by "or", look-alike notations, the percent sign on both
sides, hedges read as one value, and work left undone when the gold is in final form."""
from __future__ import annotations

import pytest

from rewardkit.verifiers.math.config import make_options
from rewardkit.verifiers.math.normal_form import read_answers, read_gold
from rewardkit.verifiers.math.verdict import decide
from tests.test_math_statements import _value


@pytest.mark.parametrize("completion,gold", [
    ("Thus, our answer is 27.", "27"),
    ("The correct answer is 64.", "64"),
    ("The answer is therefore 9.", "9"),
    ("So the answer, then, is 9.", "9"),
    ("My final answer would be $\\frac{3}{4}$.", "0.75"),
    ("The answer is 12 (since 3 × 4 = 12).", "12"),
    ("The answer is 7, not 8.", "7"),
    ("She has \\$1,250 left. **Answer: 1250**", "1250"),  # "Answer:" starting a sentence
    ("So x is 4. Answer: 4", "4"),
])
def test_answer_phrases_are_read_by_their_shape(math_verifier, completion, gold):
    assert _value(math_verifier, gold, completion) == 1.0


@pytest.mark.parametrize("completion,gold", [
    ("The wrong answer is 8, as shown above.", "8"),   # a disowned value is no answer
    ("The answer is 7, not 8.", "8"),
    ("The answer is 12 or 13, most likely 12.", "12"),  # a hedge read as one value
    ("$\\boxed{|x| = 5}$", "5"),                        # |x| = 5 is x = 5 or x = -5
])
def test_disowned_values_and_hedges_are_not_paid(math_verifier, completion, gold):
    assert _value(math_verifier, gold, completion) == 0.0


@pytest.mark.parametrize("completion,gold", [
    ("Answer: 38 m", "38"),
    ("$\\boxed{36\\pi \\ \\mathrm{cm}^2}$", "36\\pi"),
    ("$\\boxed{x<-1 \\text{ or } x>2}$", "(-\\infty,-1)\\cup(2,\\infty)"),
    ("$\\boxed{2x+1}$", "f(x)=2x+1"),
    ("$\\boxed{f(x) = 2x+1}$", "2x+1"),
    ("The answer is all real numbers.", "(-\\infty,\\infty)"),
    ("$\\boxed{(-\\infty,\\infty)}$", "\\mathbb{R}"),
    ("$\\boxed{\\text{seven}}$", "7"),
    ("$\\boxed{\\text{twenty-one}}$", "21"),
    ("$\\boxed{½}$", "\\frac12"),
    ("$\\boxed{4½}$", "\\frac92"),
    ("$\\boxed{\\textcolor{red}{7}}$", "7"),
    ("$\\boxed{7\\vphantom{x}}$", "7"),
    ("$\\boxed{1\u20600}$", "10"),
    ("$\\boxed{1\u200d0}$", "10"),
])
def test_look_alike_notations_are_read_as_their_value(math_verifier, completion, gold):
    assert _value(math_verifier, gold, completion) == 1.0


@pytest.mark.parametrize("completion,gold,expected", [
    ("$\\boxed{x<-1 \\text{ or } x>3}$", "(-\\infty,-1)\\cup(2,\\infty)", 0.0),
    ("$\\boxed{x<-1 \\text{ or } y>2}$", "(-\\infty,-1)\\cup(2,\\infty)", 0.0),
    ("$\\boxed{2x+2}$", "f(x)=2x+1", 0.0),
    ("$\\boxed{\\text{eight}}$", "7", 0.0),
    ("$\\boxed{3 x}$", "3", 0.0),  # a letter other than a unit is a variable
])
def test_look_alikes_of_other_values_are_refused(math_verifier, completion, gold, expected):
    assert _value(math_verifier, gold, completion) == expected


@pytest.mark.parametrize("prompt,completion,gold,expected", [
    ("What is the length in centimeters?", "$\\boxed{250 \\text{ m}}$", "250", 0.0),
    ("What is the length in centimeters?", "$\\boxed{250 \\text{ cm}}$", "250", 1.0),
    ("", "$\\boxed{250 \\text{ m}}$", "250 \\text{ cm}", 0.0),
    ("", "$\\boxed{250 \\text{ centimetres}}$", "250 \\text{ cm}", 1.0),
    ("How many minutes does the trip take?", "$\\boxed{90 \\text{ hours}}$", "90", 0.0),
    ("How many minutes does the trip take?", "$\\boxed{90 \\text{ minutes}}$", "90", 1.0),
    ("Find the angle in degrees.", "$\\boxed{90 \\text{ radians}}$", "90", 0.0),
    ("How many dollars does she save?", "$\\boxed{5 \\text{ cents}}$", "5", 0.0),
    ("What is the area in square meters?", "$\\boxed{12 \\text{ m}^2}$", "12", 1.0),
    ("How many apples are left?", "$\\boxed{12 \\text{ apples}}$", "12", 1.0),
])
def test_another_unit_than_the_one_asked_is_another_answer(math_verifier, prompt, completion,
                                                           gold, expected):
    assert _value(math_verifier, gold, completion, prompt) == expected


@pytest.mark.parametrize("prompt,completion,gold,expected", [
    ("", "$\\boxed{0.25\\%}$", "25\\%", 0.0),
    ("", "$\\boxed{2500\\%}$", "25\\%", 0.0),
    ("", "$\\boxed{0.25\\%}$", "0.25", 0.0),
    ("", "$\\boxed{0.25\\%}$", "0.0025", 1.0),
    ("", "$\\boxed{25\\%}$", "0.25", 1.0),
    ("", "$\\boxed{25\\%}$", "25", 0.0),
    ("What percent of 80 is 20?", "$\\boxed{25\\%}$", "25", 1.0),
    ("What percent of 80 is 20?", "$\\boxed{25\\%}$", "0.25", 0.0),
    ("", "$\\boxed{25}$", "25\\%", 1.0),
    ("", "$\\boxed{0.25}$", "25\\%", 1.0),
    ("", "$\\boxed{2500}$", "25\\%", 0.0),
])
def test_a_percent_sign_means_what_it_says_on_both_sides(math_verifier, prompt, completion, gold,
                                                         expected):
    assert _value(math_verifier, gold, completion, prompt) == expected


def test_one_percent_answer_never_matches_two_golds_a_factor_100_apart(math_verifier):
    for prompt in ("", "What percent of the class passed?"):
        paid = [gold for gold in ("0.25", "25", "0.0025")
                if _value(math_verifier, gold, "$\\boxed{0.25\\%}$", prompt) == 1.0]
        assert len(paid) <= 1, (prompt, paid)


@pytest.mark.parametrize("prompt,answer,gold", [
    ("Simplify $\\frac{x^2-16}{x+4}$.", "\\frac{(x-4)(x+4)}{x+4}", "x-4"),
    ("Expand $(x+3)^2$.", "x^2+3x+3x+9", "x^2+6x+9"),
    ("Simplify $\\sqrt{72}$.", "3\\sqrt{8}", "6\\sqrt2"),
    ("Rationalize $\\frac{6}{\\sqrt3}$.", "\\frac{6\\sqrt3}{3}", "2\\sqrt3"),
    ("Expand $(x-2)(x-3)$.", "x(x-5)+6", "x^2-5x+6"),
    ("", "2\\sqrt3+3\\sqrt3", "5\\sqrt3"),
])
def test_work_left_undone_is_not_final_when_the_gold_is(math_verifier, prompt, answer, gold):
    completion = f"The answer is $\\boxed{{{answer}}}$."
    assert _value(math_verifier, gold, completion, prompt) == 0.0
    assert _value(math_verifier, gold, completion, prompt, preset="eval") == 1.0


@pytest.mark.parametrize("answer,gold", [
    ("x-4", "x-4"),
    ("6\\sqrt{2}", "6\\sqrt2"),
    ("\\frac{\\sqrt3}{2}", "\\frac{\\sqrt{3}}{2}"),
    ("(x-2)(x-3)", "(x-3)(x-2)"),
    ("\\sqrt{8}", "\\sqrt{8}"),           # the gold does not simplify it either
    ("x^2-5x+6", "x^2-5x+6"),
    ("2\\sqrt{2}+2", "2+2\\sqrt2"),
])
def test_final_forms_stay_paid(math_verifier, answer, gold):
    assert _value(math_verifier, gold, f"The answer is $\\boxed{{{answer}}}$.") == 1.0


@pytest.mark.parametrize("gold,answer,expected", [
    ("2, -2", "\\pm 2", 1.0),
    ("\\pm 2", "2, -2", 1.0),
    ("1 \\pm \\sqrt{2}", "1 - \\sqrt2, 1 + \\sqrt2", 1.0),
    ("2", "\\pm 2", 0.0),
    ("(5, 8), (8, 5)", "(8, 5), (5, 8)", 1.0),
    ("(5, 8), (8, 5)", "(5, 8), (8, 6)", 0.0),
    ("\\{(1, 2), (3, 4)\\}", "\\{(3, 4), (1, 2)\\}", 1.0),
    ("y=2x+1", "2x+1", 1.0),
    ("y=2x+1", "2x-1", 0.0),
    ("1", "\\infty", 0.0),
    ("\\infty", "-\\infty", 0.0),
    ("\\infty", "+\\infty", 1.0),
    ("\\frac{\\pi}{6}", "30^\\circ", 1.0),
    ("\\ln 2", "\\ln(2)", 1.0),
    ("2\\sin x\\cos x", "\\sin(2x)", 1.0),
    ("\\tan^2(y)+1", "\\tan^2(y)+2", 0.0),
    ("x \\neq 5", "(-\\infty, 5) \\cup (5, \\infty)", 1.0),
    ("x \\neq 5", "x \\neq 6", 0.0),
    ("\\frac{4}{9}", "4/0", 0.0),
])
def test_common_structured_answers_are_decided_without_sympy(gold, answer, expected):
    """The classes that used to wait on a worker process (a sympy parse of 35-45 ms each) are
    decided in the calling process, with the same verdict."""
    opts = make_options("default")
    g = read_gold(gold, opts)
    result = decide(g, read_answers([answer], g, opts), opts)
    assert result is not None, "went to the sympy path"
    assert float(result["equivalent"]) == expected, result


@pytest.mark.parametrize("preset", ["default", "eval"])
@pytest.mark.parametrize("gold,completion,expected", [
    # a gold of several boxes, each named by a word or two, is one answer of several parts
    ("$\\boxed{1}$ papers and $\\boxed{2}$ bins", "We need $\\boxed{1}$ papers and $\\boxed{2}$ bins.", 1.0),
    ("$\\boxed{1}$ papers and $\\boxed{2}$ bins", "We need $\\boxed{2}$ papers and $\\boxed{1}$ bin.", 0.0),
    ("\\boxed{3} is wrong so \\boxed{5}", "The answer is $\\boxed{5}$.", 1.0),
    # named solutions in groups are the solutions, each a tuple
    ("(5,2),(7,2)", "$\\boxed{p=5,q=2;p=7,q=2}$", 1.0),
    ("p=5,q=2;p=7,q=2", "$\\boxed{(7,2),(5,2)}$", 1.0),
    ("p=5,q=2;p=7,q=2", "$\\boxed{(5,2),(7,3)}$", 0.0),
    ("W(x)=1 \\text{ or } W(x)=-1", "$\\boxed{1, -1}$", 1.0),
    ("10\\textnormal{ cm}", "$\\boxed{10\\textnormal{ cm}}$", 1.0),
    # a gold of several boxes, each in its own math delimiters, is one list answer
    ("\\(\\boxed{1}\\) and \\(\\boxed{-2}\\).", "$\\boxed{-2,1}$.", 1.0),
    ("\\[\\boxed{1}\\] or \\[\\boxed{-2}\\]", "$\\boxed{-2,1}$.", 1.0),
    ("\\(\\boxed{1}\\) and \\(\\boxed{-2}\\).", "$\\boxed{1}$.", 0.0),
    ("\\(\\boxed{3}\\) is wrong so \\(\\boxed{5}\\)", "$\\boxed{5}$", 1.0),
    ("\\(\\boxed{1}\\) papers and \\(\\boxed{2}\\) bins", "$\\boxed{(1, 2)}$", 1.0),
    ("\\(\\boxed{1}\\) papers and \\(\\boxed{2}\\) bins", "$\\boxed{2}$", 0.0),
    # a magnitude of capitals (a segment's length) names one quantity; |x| = 5 is two values
    ("$$|AB|=1$$", "$\\boxed{1}$", 1.0),
    ("1", "$\\boxed{\\left|\\overline{AB}\\right| = 1}$", 1.0),
    ("$$|AB|=1$$", "$\\boxed{2}$", 0.0),
    ("5", "$\\boxed{|z| = 5}$", 0.0),
])
def test_math_verify_suite_shapes(math_verifier, preset, gold, completion, expected):
    assert _value(math_verifier, gold, completion, preset=preset) == expected
