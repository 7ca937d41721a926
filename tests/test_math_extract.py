"""Extraction of final answers: sources, their priority, nesting, and what is not an answer."""
from __future__ import annotations

from rewardkit.verifiers.math.config import MathOptions, make_options
from rewardkit.verifiers.math.extract import boxed_contents, extract

OPTS = MathOptions()


def test_boxed_keeps_nested_braces_and_reads_every_box():
    text = r"first \boxed{\frac{1}{2}} then \fbox{ {3} } and \boxed{\sqrt{\frac{a}{b}}}"
    assert boxed_contents(text) == [r"\frac{1}{2}", " {3} ", r"\sqrt{\frac{a}{b}}"]


def test_unclosed_box_is_not_an_answer():
    assert extract(r"so \boxed{5", OPTS).candidates == ()


def test_nested_boxes_unwrap_to_their_content():
    assert extract(r"\boxed{\boxed{\boxed{7}}}", OPTS).candidates == ("7",)


def test_box_outranks_other_sources():
    ex = extract("The answer is 4.\n#### 4\n\\boxed{5}", OPTS)
    assert ex.candidates == ("5",) and ex.source == "boxed"


def test_answer_tag_then_gsm8k_marker_then_phrase():
    assert extract("<answer>12</answer>\n#### 13", OPTS).candidates == ("12",)
    assert extract("The answer is 12.\n#### 13", OPTS).candidates == ("13",)
    assert extract("so the final answer is $\\frac{1}{2}$.", OPTS).candidates == (r"\frac{1}{2}",)


def test_phrase_takes_the_last_statement_and_keeps_decimal_points():
    assert extract("the answer is 4. Recheck: the answer is 3.5. Done.", OPTS).candidates == ("3.5",)


def test_last_number_is_off_by_default_and_on_in_gsm8k_preset():
    text = "She pays 3 * 4 = 12 dollars"
    assert extract(text, OPTS).candidates == ()
    assert extract(text, make_options("gsm8k")).candidates == ("12",)


def test_choice_letter_is_read_only_for_a_letter_gold():
    text = "Option (A) fails; (C) works."
    assert extract(text, OPTS, gold_is_choice=True).candidates == ("C",)
    assert extract(text, OPTS, gold_is_choice=False).candidates == ()


def test_phrase_ends_at_a_comma_before_a_reason():
    ex = extract("The answer is 5, since 2+3=5.", OPTS)
    assert ex.candidates == ("5",)


def test_last_number_keeps_a_unicode_minus():
    ex = extract("so the result is \u22125", make_options("gsm8k"))
    assert ex.candidates == ("\u22125",)
