"""Each fidelity class of the math reward, from its own labelled rows (data/math_fidelity.jsonl),
and the references users plug in: GSM8K solutions, MATH solutions, unreadable golds."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

import rewardkit
from rewardkit import Sample
from rewardkit.verifiers.math import extract_answer

DATA = Path(__file__).resolve().parents[1] / "data" / "math_fidelity.jsonl"
ROWS = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
CLASSES = sorted({r["class"] for r in ROWS})


def _score_rows(math_verifier, rows: list[dict]) -> list[tuple[dict, rewardkit.Score]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[json.dumps(row["options"], sort_keys=True)].append(row)
    out = []
    for options, group in groups.items():
        scores = math_verifier(**json.loads(options)).score([Sample(r.get("prompt", ""), r["completion"],
                                                   r["gold"]) for r in group])
        out += list(zip(group, scores))
    return out


def test_every_class_of_the_issue_has_passing_and_failing_rows():
    assert {"thousands_currency", "units_words", "markdown_bold", "multibox_gold", "name_value",
            "equation_chain", "answer_location", "final_form", "clock_time", "hedge",
            "think_rule", "code_comment", "box_then_final", "mc_restate", "negation"} <= set(CLASSES)
    for cls in CLASSES:
        assert {r["expected"] for r in ROWS if r["class"] == cls} == {0, 1}, cls


@pytest.mark.parametrize("cls", CLASSES)
def test_class_agrees_with_every_label(math_verifier, cls):
    wrong = [(row["id"], row["completion"][-50:], score.value, score.info.get("reason"))
             for row, score in _score_rows(math_verifier, [r for r in ROWS if r["class"] == cls])
             if score.value != row["expected"]
             or ("reason" in row and score.info.get("reason") != row["reason"])]
    assert wrong == []


GSM8K_SOLUTION = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
                  "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")
MATH_SOLUTION = (r"We have $f(2) = 4$, so $f(f(2)) = f(4) = \boxed{16}$. Checking, $\boxed{16}$ "
                 r"is consistent; the final value is $\boxed{\frac{32}{2}}$.")


def test_gsm8k_and_math_solutions_are_read_as_references():
    with rewardkit.load("math", preset="gsm8k") as verifier:
        scores = verifier.score([
            Sample("q", "She sold 72 clips.\n#### 72", GSM8K_SOLUTION),
            Sample("q", "#### 72", "#### 72"),
            Sample("q", "The answer is 71", GSM8K_SOLUTION),
            Sample("q", r"so it is \boxed{16}", MATH_SOLUTION),
        ])
    assert [s.value for s in scores] == [1.0, 1.0, 0.0, 1.0]
    assert all(s.ok for s in scores)


def test_a_gold_that_cannot_be_read_is_an_error_not_a_silent_zero():
    prose = ("Natalia sold 48/2 = 24 clips in May. Natalia sold 48+24 = 72 clips altogether in "
             "April and May, which is the total.")
    with rewardkit.load("math") as verifier:
        bad, empty_marker, good = verifier.score([Sample("q", r"\boxed{72}", prose),
                                                  Sample("q", r"\boxed{72}", "work\n####  "),
                                                  Sample("q", r"\boxed{72}", "72")])
    assert not bad.ok and bad.info["error_kind"] == "bad_input"
    assert "marker" in bad.info["error"]
    assert not empty_marker.ok and "####" in empty_marker.info["error"]
    assert good.value == 1.0


def test_completion_is_read_through_completion_text():
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": r"so \boxed{48}"}]
    with rewardkit.load("math") as verifier:
        [score] = verifier.score([Sample("q", messages, "48")])
    assert score.value == 1.0


def test_extract_answer_is_the_public_entry_point():
    assert extract_answer(r"first \boxed{3}, then <think>x</think> \boxed{4}") == "4"
    assert extract_answer("**Final Answer: 42**") == "42"
    assert extract_answer("she has 12 apples") is None
    assert extract_answer("she has 12 apples", preset="gsm8k") == "12"
