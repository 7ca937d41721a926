"""What a completion states: several answers by one rule, relations as sets of numbers, number
formats, equations that assert the answer, self-corrections, and the problem's own expression
boxed as its answer. Each case is written as models write it."""
from __future__ import annotations

import pytest

from rewardkit import Sample


def _value(math_verifier, gold: str, completion: str, prompt: str = "", **options) -> float:
    [score] = math_verifier(**options).score([Sample(prompt, completion, gold)])
    assert score.ok, score.info
    return score.value


@pytest.mark.parametrize("gold,completion,expected", [
    # solutions of one unknown: an unordered collection
    ("-1, \\frac{15}{8}", "Final Answer: The final answer is $p = -1$ and $p = \\frac{15}{8}$.", 1.0),
    ("-1, \\frac{15}{8}", "So $\\boxed{p = \\frac{15}{8} \\text{ and } p = -1}$.", 1.0),
    ("-1, \\frac{15}{8}", "So $\\boxed{p = -1 \\text{ and } p = \\frac{15}{7}}$.", 0.0),
    ("p = -1 \\text{ and } p = \\frac{15}{8}", "Thus $\\boxed{p = -1}$.", 0.0),
    # asked quantities: matched by name, in any order, one box each or one box for all
    ("k = 3, n = 5", "Hence $\\boxed{k = 3}$ and $\\boxed{n = 5}$.", 1.0),
    ("k = 3, n = 5", "Substituting back gives $\\boxed{n = 5,\\ k = 3}$.", 1.0),
    ("k = 3, n = 5", "Substituting back gives $\\boxed{n = 3,\\ k = 5}$.", 0.0),
    # a named tuple with several values: its solutions
    ("(5, 8), (8, 5)", "Both orders work: $\\boxed{(x, y) = (5, 8) \\text{ and } (8, 5)}$", 1.0),
    ("(5, 8), (8, 5)", "The solutions are $\\boxed{(5, 8)}$ and $\\boxed{(8, 6)}$.", 0.0),
])
def test_several_answers_follow_one_rule_for_gold_and_prediction(math_verifier, gold, completion,
                                                                expected):
    assert _value(math_verifier, gold, completion) == expected


@pytest.mark.parametrize("gold,answer,expected", [
    ("(0, 1)", "0 < f(x) < 1", 1.0),
    ("(0, 1)", "0 \\le f(x) < 1", 0.0),
    ("[2, \\infty)", "x \\ge 2", 1.0),
    ("[2, \\infty)", "x > 2", 0.0),
    ("(-\\infty, 5]", "5 \\geq x", 1.0),
    ("x \\ge 2", "[2, \\infty)", 1.0),
])
def test_a_relation_on_one_variable_is_the_set_of_numbers_it_describes(math_verifier, gold,
                                                                       answer, expected):
    assert _value(math_verifier, gold, f"So the range is $\\boxed{{{answer}}}$.") == expected


@pytest.mark.parametrize("gold,answer,expected", [
    ("3.5", "3,5", 1.0),          # a decimal comma where the gold is a decimal
    ("1000.99", "1000,99", 1.0),
    ("1,22", "1.22", 1.0),        # a gold written with a decimal comma
    ("0,111", "0.111", 1.0),
    ("1.22", "1,220", 0.0),       # three digits group thousands: 1220
    ("3, 5", "3,5", 1.0),         # against a list gold the comma separates items
    ("\\frac{40}{9}", "4 4/9", 1.0),
    ("-\\frac{40}{9}", "-4 4/9", 1.0),
    ("\\frac{9004}{9}", "1 000 4/9", 1.0),
    ("12", "11 7/6", 0.0),        # no proper fraction: no number
    ("4", "4 4/0", 0.0),
    ("28\\%", "28 pct", 1.0),
    ("14916", "14 {, }916", 1.0),
    ("4", "\\hspace{1mm}4\\hspace{1mm}", 1.0),
    ("12", "12\\hspace{0.5em}\\text{cm}", 1.0),
])
def test_number_formats_models_write(math_verifier, gold, answer, expected):
    assert _value(math_verifier, gold, f"The answer is $\\boxed{{{answer}}}$.") == expected


def test_percent_sign_outside_the_math_marks_a_percent(math_verifier):
    assert _value(math_verifier, "28\\%", "The overall loss is $28$ %.\n\n**Answer:** $28$ %") == 1.0


@pytest.mark.parametrize("completion", [
    "Let me verify once more.\n\nTherefore $\\boxed{5 = 5}$.",
    "Checking in the second equation,\n\\[\\boxed{x = 4 = 5}\\]",
    "Adding the two counts, we get $\\boxed{2 + 3 = 5 = 6}$ apples.",
    "Each step checks out. Final Answer: The final answer is $5 = 5$. I hope it is correct.",
])
def test_an_equation_that_asserts_the_answer_pays_nothing(math_verifier, completion):
    assert _value(math_verifier, "5", completion) == 0.0


def test_a_false_chain_pays_nothing_in_rl_and_states_its_last_value_in_eval(math_verifier):
    assert _value(math_verifier, "5", "So $\\boxed{2 + 2 = 5}$.") == 0.0
    assert _value(math_verifier, "11", "$\\boxed{x = 5+5+1 = 11}$") == 1.0
    assert _value(math_verifier, "11", "$\\boxed{x = 5+5+1 = 7 = 11}$", preset="eval") == 1.0
    assert _value(math_verifier, "5", "$\\boxed{5 = 5}$", preset="eval") == 0.0


def test_a_self_correction_counts_the_box_after_the_retraction(math_verifier):
    corrected = ("The roots sum to $3$, so the answer is $\\boxed{3}$.\n\nWait, that is the sum; the "
                 "question asks for the product, which is $4$. So the answer is $\\boxed{4}$.")
    assert _value(math_verifier, "4", corrected) == 1.0
    assert _value(math_verifier, "3", corrected) == 0.0
    # without a retraction two different boxes remain a hedge
    assert _value(math_verifier, "4", "It is $\\boxed{3}$ or $\\boxed{4}$.") == 0.0


@pytest.mark.parametrize("prompt,gold,answer", [
    ("Simplify $\\frac{x^2-9}{x-3}$.", "x+3", "\\dfrac{x^2-9}{x-3}"),
    ("Expand $(x+2)(x-5)$.", "x^2-3x-10", "(x-5)(x+2)"),
    ("Factor $x^2+5x+6$.", "(x+2)(x+3)", "x^{2} + 5x + 6"),
    ("Rationalize the denominator: $\\frac{3}{\\sqrt{6}}$.", "\\frac{\\sqrt{6}}{2}",
     "\\frac{3}{\\sqrt 6}"),
    ("Simplify $\\sqrt{50} + \\sqrt{18}$.", "8\\sqrt{2}", "\\sqrt{18} + \\sqrt{50}"),
    ("Simplify $(2x^3)(3x^2)$.", "6x^5", "2x^3 \\cdot 3x^2"),
    ("Rationalize the denominator of $\\frac{1}{\\sqrt{3}-1}$.", "\\frac{\\sqrt{3}+1}{2}",
     "\\frac{1}{-1+\\sqrt{3}}"),
])
def test_the_problems_own_expression_up_to_trivial_rewriting_is_no_solution(
        math_verifier, prompt, gold, answer):
    completion = f"Working it through, the result is $\\boxed{{{answer}}}$."
    assert _value(math_verifier, gold, completion, prompt) == 0.0
    assert _value(math_verifier, gold, completion, prompt, preset="eval") == 1.0  # no final_form


@pytest.mark.parametrize("prompt,gold,answer", [
    ("Simplify $\\sqrt{12}$.", "2\\sqrt{3}", "2\\sqrt{3}"),
    ("Rationalize the denominator of $\\frac{1}{\\sqrt{2}}$.", "\\frac{\\sqrt{2}}{2}",
     "\\frac{\\sqrt 2}{2}"),
    ("Expand $(x+1)^2$.", "x^2+2x+1", "x^{2} + 2x + 1"),
    ("Factor $x^2-5x+6$.", "(x-2)(x-3)", "(x-3)(x-2)"),
    ("Simplify $\\frac{6}{8}$.", "\\frac{3}{4}", "0.75"),
])
def test_a_standard_notation_of_the_value_still_pays(math_verifier, prompt, gold, answer):
    completion = f"Working it through, the result is $\\boxed{{{answer}}}$."
    assert _value(math_verifier, gold, completion, prompt) == 1.0


def test_answer_statements_without_a_colon(math_verifier):
    assert _value(math_verifier, "9", "Answer \\[ \n 9 \n \\]") == 1.0
    assert _value(math_verifier, "x \\geq 5", "Therefore $x \\geq 5$ is the solution.") == 1.0
    assert _value(math_verifier, "x \\neq 5", "The solution is $x \\neq 5$") == 1.0
    assert _value(math_verifier, "9", "Answer $ \n 9 \n $") == 0.0  # inline math stays on one line


@pytest.mark.parametrize("gold,answer", [
    ("[2, \\infty)", "x \\geq 2"),
    ("(-\\infty, 1) \\cup (2, 5]", "(-\\infty, 1) \\cup (2, 5]"),
    ("y = 2x + 1", "2x - y + 1 = 0"),
    ("-1, 0, 1", "0, 1"),
])
def test_the_cheap_comparison_decides_relations_equations_and_lists_without_sympy(gold, answer):
    from rewardkit.verifiers.math.config import make_options
    from rewardkit.verifiers.math.normal_form import read_answers, read_gold
    from rewardkit.verifiers.math.verdict import decide

    opts = make_options("default")
    g = read_gold(gold, opts)
    assert decide(g, read_answers([answer], g, opts), opts) is not None  # no worker needed
