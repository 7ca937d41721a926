"""MathVerifier behaviour: options, presets, reasons, hedging, final form, errors."""
from __future__ import annotations

import pytest

import rewardkit
from rewardkit import Sample
from rewardkit.verifiers.math import MathVerifier


@pytest.fixture(scope="module")
def verifier():
    with rewardkit.load("math", workers=1) as v:
        yield v


def one(v, completion, gold):
    return v.score([Sample("q", completion, gold)])[0]


def test_load_builds_math_verifier_with_keyword_options():
    v = rewardkit.load("math", preset="gsm8k", final_form=False, timeout=0.5)
    assert isinstance(v, MathVerifier)
    assert v.options.last_number and not v.options.final_form and v.options.timeout == 0.5


def test_unknown_option_is_a_type_error_naming_the_valid_ones():
    with pytest.raises(TypeError, match="final_form"):
        rewardkit.load("math", finalform=True)


def test_bad_option_values_and_presets_are_explained():
    with pytest.raises(ValueError, match="timeout"):
        MathVerifier(timeout=0)
    with pytest.raises(ValueError, match="gsm8k"):
        MathVerifier(preset="nope")


def test_gsm8k_and_boxed_integers_score_one(verifier):
    assert one(verifier, "6 * 7 = 42\n#### 42", "42").value == 1.0
    assert one(verifier, r"So the total is \boxed{42}.", "42").value == 1.0
    assert one(verifier, "#### 41", "42").info["reason"] == "not_equivalent"


def test_info_names_extracted_answer_forms_and_rule(verifier):
    s = one(verifier, r"\boxed{0.75}", r"\frac{3}{4}")
    assert s.value == 1.0
    assert s.info["extracted"] == "0.75" and s.info["source"] == "boxed"
    assert s.info["pred_normalized"] == "3/4" and s.info["gold_normalized"] == "3/4"
    assert s.info["rule"] == "numeric" and "reason" not in s.info


def test_symbolic_and_structural_rules_are_reported(verifier):
    assert one(verifier, r"\boxed{y = 1 + 2x}", "y=2x+1").info["rule"] in ("symbolic", "exact")
    s = one(verifier, r"\boxed{\{3, 1, 2\}}", r"\{1,2,3\}")
    assert (s.value, s.info["rule"]) == (1.0, "structural")


def test_no_answer_reason(verifier):
    s = one(verifier, "I am not sure.", "5")
    assert (s.value, s.info["reason"]) == (0.0, "no_answer")


def test_hedging_with_several_boxes_or_a_list_is_conflicting(verifier):
    for completion in (r"\boxed{3} or \boxed{5}", r"\boxed{3, 5, \text{or } 7}", r"\boxed{\pm 3}"):
        s = one(verifier, completion, "3")
        assert (s.value, s.info["reason"]) == (0.0, "conflicting"), completion
    assert one(verifier, r"\boxed{3} so again \boxed{3}", "3").value == 1.0
    assert one(verifier, r"\boxed{5, 3}", "3, 5").value == 1.0  # a list gold allows a list


def test_final_form_rejects_expressions_left_to_evaluate():
    on = MathVerifier(final_form=True)
    off = MathVerifier(final_form=False)
    for completion, gold in ((r"\boxed{123 \cdot 456}", "56088"), (r"\boxed{3+4}", "7")):
        s = one(on, completion, gold)
        assert (s.value, s.info["rule"]) == (0.0, "final_form")
        assert one(off, completion, gold).value == 1.0
    for completion, gold in ((r"\boxed{56088}", "56088"), (r"\boxed{\frac{3}{4}}", "0.75"),
                             (r"\boxed{2\sqrt{3}}", r"\sqrt{12}")):
        assert one(on, completion, gold).value == 1.0


def test_missing_or_bad_reference_is_an_error_score_not_a_crash(verifier):
    scores = verifier.score([Sample("q", r"\boxed{1}", None), Sample("q", r"\boxed{1}", {"a": 1}),
                             Sample("q", r"\boxed{1}", "1")])
    assert "reference" in scores[0].error and scores[0].value == 0.0
    assert "string" in scores[1].error
    assert scores[2].value == 1.0 and scores[2].ok
    # JSON's NaN (or a missing cell read by pandas) is no gold answer, not the answer "nan"
    # that a completion writing \boxed{nan} matched; a float infinity is the answer ∞.
    for completion in (r"\boxed{nan}", r"\boxed{\infty}", r"\boxed{1}"):
        s = verifier.score([Sample("q", completion, float("nan"))])[0]
        assert not s.ok and "NaN" in s.error and s.value == 0.0, (completion, s)
    assert verifier.score([Sample("q", r"\boxed{\infty}", float("inf"))])[0].value == 1.0


def test_numbers_as_references_and_chat_completions(verifier):
    chat = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": r"\boxed{4}"}]
    assert verifier.score([Sample("q", chat, 4)])[0].value == 1.0
    assert verifier.score([Sample("q", r"\boxed{0.5}", 0.5)])[0].value == 1.0


def test_naming_several_choices_is_a_hedge_not_a_pass(verifier):
    for completion in ("The answer is (A) or (B)", r"\boxed{A, B}", r"\boxed{A \text{ or } B}",
                       r"\boxed{(a) and (b)}", "The answer is A or B"):
        for gold in ("A", "B"):
            s = one(verifier, completion, gold)
            assert (s.value, s.info["reason"]) == (0.0, "conflicting"), (completion, gold)
    assert one(verifier, "The answer is (C) f(A) = 2", "C").value == 1.0
    assert one(verifier, r"\boxed{\textbf{(B)}}", "B").value == 1.0


def test_unicode_symbols_read_as_their_latex_commands(verifier):
    for completion, gold in (("\\boxed{\u22123}", "-3"), ("\\boxed{\u221e}", r"\infty"),
                             ("\\boxed{\u221a2}", r"\sqrt{2}"), ("\\boxed{\u03c0/2}", r"\frac{\pi}{2}"),
                             (r"\boxed{\varnothing}", r"\emptyset")):
        assert one(verifier, completion, gold).value == 1.0, completion


def test_units_in_mbox_and_mathrm_are_dropped_but_not_constants(verifier):
    for completion in (r"\boxed{6 \mbox{ cm}}", r"\boxed{6\,\mathrm{cm}}", r"\boxed{6\ \mathrm{m}}",
                       r"\boxed{6\,\mathrm{cm}^2}"):
        assert one(verifier, completion, "6").value == 1.0, completion
    assert one(verifier, r"\boxed{3+2\mathrm{i}}", "3").value == 0.0
